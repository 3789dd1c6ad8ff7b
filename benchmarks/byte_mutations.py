"""Byte-level mutations of a serialized file, shared by the fuzzers of NetDefs
(``fuzz_nets.py``) and of ONNX models (``fuzz_onnx.py``): what a damaged download or a
half-written file looks like to a loader."""

from __future__ import annotations

import random
from collections.abc import Callable


def flip(rng: random.Random, data: bytes) -> bytes:
    """One to four bytes set to random values."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 4)):
        if out:
            out[rng.randrange(len(out))] = rng.randrange(256)
    return bytes(out)


def truncate(rng: random.Random, data: bytes) -> bytes:
    """The file cut short at a random length."""
    return data[: rng.randrange(max(1, len(data)))]


def splice(rng: random.Random, data: bytes) -> bytes:
    """A run of up to 64 bytes copied to a random place."""
    if len(data) < 4:
        return data + data
    a = rng.randrange(len(data))
    b = min(len(data), a + rng.randint(1, 64))
    at = rng.randrange(len(data))
    return data[:at] + data[a:b] + data[at:]


def delete(rng: random.Random, data: bytes) -> bytes:
    """A run of up to 32 bytes removed."""
    if len(data) < 4:
        return b""
    a = rng.randrange(len(data))
    return data[:a] + data[min(len(data), a + rng.randint(1, 32)) :]


BYTE_MUTATIONS: tuple[tuple[str, Callable[[random.Random, bytes], bytes]], ...] = (
    ("flip", flip),
    ("truncate", truncate),
    ("splice", splice),
    ("delete", delete),
)
"""Each mutation by the name a fuzzer's report gives it."""
