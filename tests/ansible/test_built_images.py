"""lab.images reads the index tools/build-image.sh writes and names each image as the roles and the CRI need."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra_lab import images

HOSTS = st.from_regex(r"[a-z]{1,8}\.[a-z]{2,4}(:[0-9]{2,5})?", fullmatch=True)
PATHS = st.from_regex(r"[a-z][a-z0-9-]{0,8}(/[a-z][a-z0-9-]{0,8}){0,2}", fullmatch=True)
TAGS = st.from_regex(r"[a-z0-9][a-z0-9.-]{0,9}", fullmatch=True)
DIGEST = "sha256:" + "ab" * 32


def _index(tmp_path: Path, **entry: str) -> Path:
    archive = tmp_path / "x.oci.tar"
    archive.write_bytes(b"")
    doc = {
        "key": "sriov-dra",
        "name": "sriov-dra.local/sriov-dra:0.1.0",
        "digest": DIGEST,
        "archive": str(archive),
    }
    path = tmp_path / "images.json"
    path.write_text(json.dumps({"images": [doc | entry]}))
    return path


@given(host=HOSTS, repo=PATHS, tag=TAGS)
def test_a_built_image_is_named_repository_tag_at_digest_and_repository_at_digest(
    host: str, repo: str, tag: str
) -> None:
    image = images.BuiltImage(key="k", name=f"{host}/{repo}:{tag}", digest=DIGEST, archive=Path("a"))
    assert image.repository == f"{host}/{repo}"
    assert image.reference == f"{host}/{repo}:{tag}@{DIGEST}"
    assert image.digest_name == f"{host}/{repo}@{DIGEST}"


def test_built_images_reads_every_entry_of_the_index_by_key(tmp_path: Path) -> None:
    found = images.built_images(_index(tmp_path))
    assert list(found) == [images.PRODUCT]
    assert found[images.PRODUCT].reference == f"sriov-dra.local/sriov-dra:0.1.0@{DIGEST}"
    assert found[images.PRODUCT].archive == tmp_path / "x.oci.tar"


def test_a_missing_index_is_refused_saying_how_to_build_the_images(tmp_path: Path) -> None:
    with pytest.raises(images.ImageError, match=r"images\.json does not exist; build them with `make setup`"):
        images.built_images(tmp_path / "images.json")


def test_an_index_entry_without_a_sha256_digest_is_refused_naming_the_image_and_value(tmp_path: Path) -> None:
    with pytest.raises(images.ImageError, match=r"sriov-dra\.local/sriov-dra:0\.1\.0 has digest 'latest'"):
        images.built_images(_index(tmp_path, digest="latest"))


def test_an_index_entry_whose_archive_is_gone_is_refused_naming_the_archive(tmp_path: Path) -> None:
    with pytest.raises(images.ImageError, match=r"gone\.oci\.tar\) is missing; build them"):
        images.built_images(_index(tmp_path, archive=str(tmp_path / "gone.oci.tar")))


def test_a_malformed_index_is_refused_naming_the_file(tmp_path: Path) -> None:
    path = tmp_path / "images.json"
    path.write_text('{"images": [{"key": "x"}]}')
    with pytest.raises(images.ImageError, match=r"cannot read the built-image index .*images\.json"):
        images.built_images(path)
