"""Regenerate the checked-in gRPC stubs of this package from ``proto/``.

The one recipe for ``<name>_pb2.py``, ``_pb2.pyi`` and ``_pb2_grpc.py``, including the fix that
makes the grpc modules import their message modules package-relatively. A unit test regenerates
into a temporary directory and compares bytes. Run ``python -m sriov_dra.kubeletapi.generate``
from the repository root (needs the dev extra's pinned ``grpcio-tools``). A build tool: runtime
code never imports it.
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

# The four kubelet plugin protocols. Distinct file names keep the descriptor-pool file names
# distinct (upstream names all four "api.proto").
PROTO_FILES = (
    "dra_v1.proto",
    "dra_v1beta1.proto",
    "pluginregistration_v1.proto",
    "drahealth_v1alpha1.proto",
)
PACKAGE_DIR = Path(__file__).resolve().parent
DEFAULT_PROTO_DIR = PACKAGE_DIR.parents[2] / "proto"

_TOP_LEVEL_IMPORT = re.compile(r"^import (\w+_pb2) as (\w+)$", re.MULTILINE)


def make_imports_relative(source: str) -> str:
    """Rewrite ``import x_pb2 as y`` lines of a generated module to ``from . import x_pb2 as y``.

    protoc emits top-level imports for sibling generated modules; inside a package those only
    work if the package directory is on ``sys.path``, which it must not be.

    Shapes: ``source`` is the text of one generated ``*_pb2_grpc.py`` or ``*_pb2.py`` file.
    """
    return _TOP_LEVEL_IMPORT.sub(r"from . import \1 as \2", source)


def generated_names(proto_files: Sequence[str] = PROTO_FILES) -> list[str]:
    """File names that :func:`generate` writes for ``proto_files``, sorted.

    Shapes: ``["dra_v1_pb2.py", "dra_v1_pb2.pyi", "dra_v1_pb2_grpc.py", ...]``.
    """
    names: list[str] = []
    for proto in proto_files:
        stem = proto.removesuffix(".proto")
        names += [f"{stem}_pb2.py", f"{stem}_pb2.pyi", f"{stem}_pb2_grpc.py"]
    return sorted(names)


def generate(out_dir: Path, proto_dir: Path = DEFAULT_PROTO_DIR) -> list[Path]:
    """Compile every proto of :data:`PROTO_FILES` from ``proto_dir`` into ``out_dir``.

    Runs protoc from ``grpcio-tools`` in a scratch directory, fixes the imports, then writes
    each file into ``out_dir`` (created if missing), overwriting what is there.

    Shapes: returns the written paths, sorted by name.
    Raises: ``FileNotFoundError`` if a proto is missing; ``RuntimeError`` if protoc fails (its
    messages are on stderr).
    Source: grpcio-tools ``grpc_tools.protoc.main``.
    """
    from grpc_tools import protoc  # dev-only dependency; imported here on purpose

    for proto in PROTO_FILES:
        if not (proto_dir / proto).is_file():
            raise FileNotFoundError(
                f"proto file {proto_dir / proto} is missing; run from the repository root or "
                "pass --proto-dir pointing at the project's proto/ directory"
            )
    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="sriov-dra-protoc-") as scratch:
        args = [
            "grpc_tools.protoc",
            f"--proto_path={proto_dir}",
            f"--python_out={scratch}",
            f"--pyi_out={scratch}",
            f"--grpc_python_out={scratch}",
            *PROTO_FILES,
        ]
        code = protoc.main(args)
        if code != 0:
            raise RuntimeError(f"protoc exited with {code} compiling {list(PROTO_FILES)} from {proto_dir}")
        written: list[Path] = []
        for name in generated_names():
            text = (Path(scratch) / name).read_text(encoding="utf-8")
            target = out_dir / name
            target.write_text(make_imports_relative(text), encoding="utf-8")
            written.append(target)
    return written


def main(argv: Sequence[str] | None = None) -> int:
    """Command line entry: regenerate the stubs into this package (or ``--out-dir``)."""
    parser = argparse.ArgumentParser(prog="python -m sriov_dra.kubeletapi.generate", description=__doc__)
    parser.add_argument("--proto-dir", type=Path, default=DEFAULT_PROTO_DIR)
    parser.add_argument("--out-dir", type=Path, default=PACKAGE_DIR)
    args = parser.parse_args(argv)
    for path in generate(args.out_dir, args.proto_dir):
        print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
