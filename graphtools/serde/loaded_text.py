"""The text a Caffe2 net was loaded from, written back as it was while the net is unchanged.

protobuf's text format prints a NetDef one way; text files are written many ways (by hand,
with tabs, comments and fields in any order; by an old Caffe2, which spells DeviceOption's
field 2 ``cuda_gpu_id``). Printing an unchanged net again would rewrite every line of such a
file, drop its comments, and make a file an old Caffe2 no longer reads. So the loader keeps
the text for the revision of the net it loaded (``Net.cached``): any edit of the net (every
mutating ``Net`` method bumps its revision and drops what was cached) forgets it, and the net
is printed from the IR. A large text (``MAP_AT_LEAST`` bytes) is kept as a map of its file,
not a copy; one changed on disk since is printed from the IR too (the IR holds the whole net).
"""

from __future__ import annotations

from pathlib import Path

from graphtools.errors import SerdeError
from graphtools.ir import Net
from graphtools.serde.mapped_file import MappedFile

__all__ = ["loaded_text", "remember_text"]

_KEY = "loaded-text"


def remember_text(net: Net, data: bytes, path: str | Path | None) -> None:
    """Keep ``data`` (the text ``net`` was just loaded from, read from ``path``) for as long
    as ``net`` is unchanged."""
    mapped = MappedFile.of(path, data) if path is not None and Path(path).is_file() else None
    kept: bytes | MappedFile = data if mapped is None else mapped
    net.cached(_KEY, lambda _: kept)


def loaded_text(net: Net) -> bytes | None:
    """The text ``net`` was loaded from when nothing changed it since (and its file, when
    mapped, did not change either); ``None`` otherwise."""
    kept = net.cached(_KEY, lambda _: None)
    if not isinstance(kept, MappedFile):
        return kept
    try:
        kept.check()
    except SerdeError:
        return None
    return bytes(kept.data)
