"""Regenerate caffe2_pb2.py/.pyi and metanet_pb2.py/.pyi from the .proto sources.

The .proto files are the source of truth; the generated modules are checked in so that users
need no compiler. protoc must see the files under ``graphtools/proto/`` (their descriptor path),
so this script builds that tree in a temporary folder, runs grpcio-tools' bundled protoc there
and copies the outputs back beside the sources.

Usage: ``python proto/regen.py [--check]`` (``--check`` compares instead of writing, exit 1 on a
difference).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

PROTO_DIR = Path(__file__).resolve().parent
SOURCES = (
    "caffe2.proto",
    "metanet.proto",
    "netdef_lite.proto",
    "netdef_check.proto",
    "onnx_lite.proto",
    "onnx_check.proto",
)


def generate(out_dir: Path) -> list[Path]:
    """Compile the schemas into ``out_dir`` and return the generated files."""
    from grpc_tools import protoc  # imported here: only contributors need grpcio-tools

    with tempfile.TemporaryDirectory() as tmp:
        tree = Path(tmp) / "graphtools" / "proto"
        tree.mkdir(parents=True)
        for name in SOURCES:
            shutil.copyfile(PROTO_DIR / name, tree / name)
        args = ["protoc", f"-I{tmp}", f"--python_out={tmp}", f"--pyi_out={tmp}"]
        args += [f"graphtools/proto/{name}" for name in SOURCES]
        if protoc.main(args) != 0:
            raise RuntimeError("protoc failed: " + " ".join(args))
        produced = []
        for name in SOURCES:
            stem = name.removesuffix(".proto")
            for suffix in ("_pb2.py", "_pb2.pyi"):
                target = out_dir / f"{stem}{suffix}"
                shutil.copyfile(tree / f"{stem}{suffix}", target)
                produced.append(target)
        return produced


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    options = parser.parse_args()
    if not options.check:
        for path in generate(PROTO_DIR):
            print(f"wrote {path.relative_to(PROTO_DIR.parent)}")
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        stale = [
            path.name
            for path in generate(Path(tmp))
            if path.read_bytes() != (PROTO_DIR / path.name).read_bytes()
        ]
    if stale:
        print("out of date: " + ", ".join(stale) + " (run python proto/regen.py)")
        return 1
    print("generated files are up to date")
    return 0


if __name__ == "__main__":
    sys.exit(main())
