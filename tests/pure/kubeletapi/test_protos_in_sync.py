"""The checked-in gRPC stubs are exactly what ``python -m sriov_dra.kubeletapi.generate`` writes."""

from __future__ import annotations

from pathlib import Path

import pytest

from sriov_dra.kubeletapi import generate

PACKAGE_DIR = generate.PACKAGE_DIR


@pytest.fixture(scope="module")
def regenerated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("kubeletapi-stubs")
    generate.generate(out)
    return out


@pytest.mark.parametrize("name", generate.generated_names(), ids=generate.generated_names())
def test_checked_in_stub_matches_regenerated_bytes(regenerated: Path, name: str) -> None:
    fresh = (regenerated / name).read_bytes()
    checked_in = (PACKAGE_DIR / name).read_bytes()
    assert checked_in == fresh, (
        f"runtime/sriov_dra/kubeletapi/{name} is out of date with proto/; "
        "run `python -m sriov_dra.kubeletapi.generate` and commit the result"
    )


def test_no_stale_generated_files_in_package() -> None:
    on_disk = sorted(p.name for p in PACKAGE_DIR.iterdir() if "_pb2" in p.name and p.is_file())
    assert on_disk == generate.generated_names()


def test_generated_grpc_modules_import_messages_package_relatively(regenerated: Path) -> None:
    for name in generate.generated_names():
        if name.endswith("_pb2_grpc.py"):
            text = (regenerated / name).read_text()
            stem = name.removesuffix("_grpc.py")
            assert f"from . import {stem} as " in text
            assert f"\nimport {stem} as " not in text


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import dra_v1_pb2 as dra__v1__pb2\n", "from . import dra_v1_pb2 as dra__v1__pb2\n"),
        ("import grpc\nimport warnings\n", "import grpc\nimport warnings\n"),
        ("    import dra_v1_pb2 as x\n", "    import dra_v1_pb2 as x\n"),
    ],
    ids=["sibling-pb2-import-becomes-relative", "library-imports-untouched", "indented-import-untouched"],
)
def test_make_imports_relative(source: str, expected: str) -> None:
    assert generate.make_imports_relative(source) == expected


def test_missing_proto_dir_is_actionable(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="--proto-dir"):
        generate.generate(tmp_path / "out", proto_dir=tmp_path / "nowhere")
