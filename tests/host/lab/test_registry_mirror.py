"""The lab's read-only registry mirror: it serves exactly the images it was given, by tag and by digest."""

from __future__ import annotations

import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra_lab import images, registry

SPEC = images.ImageSpec(
    name="quay.io/org/tool:1.0", files=(images.FileEntry("bin/tool", b"#!/bin/sh\necho hi\n"),), cmd=("tool",)
)


def _mirror() -> registry.Mirror:
    mirror = registry.Mirror("127.0.0.1", [SPEC])
    for spec in mirror.specs:  # what start() assembles, without a socket
        host, repo, tag = registry.split_reference(spec.name)
        mirror.registries.add(host)
        mirror._images[(repo, tag)] = registry._unpack(spec)
    return mirror


def test_image_reference_splits_into_registry_repository_and_tag() -> None:
    assert registry.split_reference("quay.io/schseba/toolbox:latest") == (
        "quay.io",
        "schseba/toolbox",
        "latest",
    )
    assert registry.split_reference("localhost:5000/a/b") == ("localhost:5000", "a/b", "latest")


def test_image_reference_without_a_registry_is_refused_naming_it() -> None:
    with pytest.raises(ValueError, match="'busybox:1' names no registry"):
        registry.split_reference("busybox:1")


@given(st.from_regex(r"[a-z]{1,8}\.[a-z]{2,4}/[a-z]{1,8}(/[a-z]{1,8})?:[a-z0-9]{1,8}", fullmatch=True))
def test_split_reference_round_trips(name: str) -> None:
    host, repo, tag = registry.split_reference(name)
    assert f"{host}/{repo}:{tag}" == name


def test_manifest_is_served_by_tag_and_by_digest_and_its_blobs_hash_to_their_digests() -> None:
    mirror = _mirror()
    assert mirror.lookup("/v2/")[0] == 200
    status, media, manifest = mirror.lookup("/v2/org/tool/manifests/1.0")
    assert (status, media) == (200, images.MEDIA_MANIFEST)
    digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
    assert mirror.lookup(f"/v2/org/tool/manifests/{digest}")[2] == manifest
    doc = json.loads(manifest)
    for descriptor in [doc["config"], *doc["layers"]]:
        status, _media, blob = mirror.lookup(f"/v2/org/tool/blobs/{descriptor['digest']}")
        assert status == 200
        assert "sha256:" + hashlib.sha256(blob).hexdigest() == descriptor["digest"]


def test_unknown_repository_tag_or_blob_is_404_with_the_distribution_error_code() -> None:
    mirror = _mirror()
    for path, code in (
        ("/v2/org/other/manifests/1.0", "MANIFEST_UNKNOWN"),
        ("/v2/org/tool/manifests/2.0", "MANIFEST_UNKNOWN"),
        ("/v2/org/tool/blobs/sha256:" + "0" * 64, "BLOB_UNKNOWN"),
    ):
        status, _media, body = mirror.lookup(path)
        assert (status, json.loads(body)["errors"][0]["code"]) == (404, code)


def test_containerd_hosts_file_resolves_and_pulls_only_through_the_mirror() -> None:
    mirror = _mirror()
    mirror.port = 5000
    text = mirror.hosts_toml("quay.io")
    assert 'server = "https://quay.io"' in text
    assert '[host."http://127.0.0.1:5000"]\n  capabilities = ["pull", "resolve"]' in text


def test_toolbox_stand_in_has_a_bash_that_runs_the_busybox_shell() -> None:
    if not images.BUSYBOX.exists():
        pytest.skip(f"{images.BUSYBOX} missing (Debian's busybox-static)")
    spec = registry.toolbox_spec()
    files = {f.path: f for f in spec.files}
    assert spec.name == registry.TOOLBOX_IMAGE
    assert files["bin/bash"].data == registry.BASH_SHIM
    assert files["bin/sh"].link == "busybox"
