"""lab.images writes OCI image layout archives that resolve from index to layer, the same bytes every time."""

from __future__ import annotations

import hashlib
import io
import json
import tarfile

from hypothesis import given
from hypothesis import strategies as st

from sriov_dra_lab import images

NAMES = st.from_regex(r"[a-z][a-z0-9]{0,8}(/[a-z][a-z0-9]{0,8}){0,2}:[a-z0-9]{1,6}", fullmatch=True)
FILES = st.lists(
    st.tuples(st.from_regex(r"[a-z]{1,6}(/[a-z]{1,6}){0,2}", fullmatch=True), st.binary(max_size=64)),
    min_size=1,
    max_size=5,
    unique_by=lambda f: f[0],
)


def _members(archive: bytes) -> dict[str, bytes]:
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        out = {}
        for m in tar.getmembers():
            f = tar.extractfile(m)
            out[m.name] = f.read() if f else b""
        return out


def _blob(members: dict[str, bytes], digest: str) -> bytes:
    data = members[f"blobs/sha256/{digest.removeprefix('sha256:')}"]
    assert "sha256:" + hashlib.sha256(data).hexdigest() == digest
    return data


@given(NAMES, FILES)
def test_layout_resolves_index_to_manifest_config_and_layer_by_digest_and_names_the_image(
    name: str, files: list[tuple[str, bytes]]
) -> None:
    leaves = {p for p, _ in files}
    files = [(p, d) for p, d in files if not any(other.startswith(p + "/") for other in leaves)]
    spec = images.ImageSpec(
        name=name, files=tuple(images.FileEntry(p, d) for p, d in files), entrypoint=("/x",)
    )
    archive, digest = images.layout_archive(spec)
    members = _members(archive)
    assert json.loads(members["oci-layout"]) == {"imageLayoutVersion": "1.0.0"}
    (desc,) = json.loads(members["index.json"])["manifests"]
    assert desc["digest"] == digest
    assert desc["annotations"]["io.containerd.image.name"] == name
    assert desc["annotations"]["org.opencontainers.image.ref.name"] == name.rsplit(":", 1)[1]
    manifest = json.loads(_blob(members, digest))
    config = json.loads(_blob(members, manifest["config"]["digest"]))
    layer = _blob(members, manifest["layers"][0]["digest"])
    assert config["rootfs"]["diff_ids"] == [manifest["layers"][0]["digest"]]
    assert config["config"]["Entrypoint"] == ["/x"]
    in_layer = _members(layer)
    assert all(in_layer[path] == data for path, data in files)


@given(NAMES, FILES)
def test_layout_archive_is_byte_identical_for_the_same_spec(
    name: str, files: list[tuple[str, bytes]]
) -> None:
    spec = images.ImageSpec(name=name, files=tuple(images.FileEntry(p, d) for p, d in files))
    assert images.layout_archive(spec) == images.layout_archive(spec)
