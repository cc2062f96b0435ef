"""``tools/push-image.sh`` against a real registry that asks for credentials (the distribution registry).

The push keeps the image's digest (skopeo ``--preserve-digests``: the manifest bytes are copied as
they are), reads the manifest back by digest, prints ``repository:version@sha256:<digest>`` and writes it,
with the Multus image it pinned, into ``group_vars/all`` beside the user's inventory, where
``ansible-inventory`` reads it. Without credentials, with a tagged repository, an inventory inside the
tree or a Multus digest the registry does not serve, it stops naming the fix, and nothing is pushed
or written. The archive is given with ``--archive`` (building the product image is ``make image``'s
job); its layers are the lab's uncompressed ones, which a re-compressing copy would change.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from tests import tiers

from sriov_dra_lab import images, push_registry

REPO = Path(__file__).resolve().parents[2]
PUSH = REPO / "tools" / "push-image.sh"
USER, PASSWORD = "platform", "s3cret-for-the-lab"
VERSION = "0.1.0"


@pytest.fixture(scope="module")
def registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[push_registry.PushRegistry]:
    missing = push_registry.missing_tools(credentials=True)
    if missing:
        tiers.unavailable("host", "the push test needs " + ", ".join(missing))
    reg = push_registry.PushRegistry(tmp_path_factory.mktemp("registry"), users={USER: PASSWORD}).start()
    try:
        yield reg
    finally:
        reg.stop()


def _archive(directory: Path, name: str, payload: bytes) -> tuple[Path, str]:
    spec = images.ImageSpec(name=name, files=(images.FileEntry("payload", payload),))
    return images.write_archive(spec, directory)


def _env(home: Path) -> dict[str, str]:
    """No credentials but the ones a test gives (skopeo's default auth file and docker's live under HOME)."""
    env = {k: v for k, v in os.environ.items() if k not in ("REGISTRY_AUTH_FILE", "DOCKER_CONFIG")}
    return {**env, "HOME": str(home), "XDG_RUNTIME_DIR": str(home / "run")}


def _push(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(PUSH), *args], env=_env(home), capture_output=True, text=True, timeout=120, check=False
    )


def _get(registry: push_registry.PushRegistry, path: str) -> tuple[bytes, Any]:
    """GET ``/v2/<path>`` with the registry's credentials; the body and the headers."""
    request = urllib.request.Request(f"http://{registry.host}/v2/{path}")
    token = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    request.add_header("Authorization", f"Basic {token}")
    request.add_header("Accept", images.MEDIA_MANIFEST)
    with urllib.request.urlopen(request, timeout=10) as answer:
        return answer.read(), answer.headers


def _authfile(registry: push_registry.PushRegistry, home: Path) -> Path:
    path = home / "auth.json"
    done = subprocess.run(
        [
            "skopeo",
            "login",
            "--tls-verify=false",
            "--authfile",
            str(path),
            "-u",
            USER,
            "--password-stdin",
            registry.host,
        ],
        input=PASSWORD,
        env=_env(home),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return path


def test_push_keeps_the_digest_and_writes_both_pinned_images_beside_the_inventory(
    registry: push_registry.PushRegistry, tmp_path: Path
) -> None:
    archive, digest = _archive(tmp_path, "sriov-dra.local/sriov-dra:0.1.0", b"the product")
    multus_archive, multus_digest = _archive(
        tmp_path / "multus", "sriov-dra.local/multus-cni:v4.3.0", b"multus"
    )
    auth = _authfile(registry, tmp_path)
    copied = subprocess.run(
        [
            "skopeo",
            "copy",
            "--quiet",
            "--preserve-digests",
            "--dest-tls-verify=false",
            "--authfile",
            str(auth),
            f"oci-archive:{multus_archive}",
            f"docker://{registry.host}/multus-cni:v4.3.0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert copied.returncode == 0, copied.stderr
    inventory = tmp_path / "site" / "inventory.yml"
    inventory.parent.mkdir()
    inventory.write_text("all:\n  children:\n    sriov_dra_nodes:\n      hosts:\n        worker-1:\n")

    repository = f"{registry.host}/platform/sriov-dra"
    done = _push(
        tmp_path,
        repository,
        "--archive", str(archive), "--insecure", "--authfile", str(auth),
        "--inventory", str(inventory), "--multus", f"{registry.host}/multus-cni:v4.3.0",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr

    reference = f"{repository}:{VERSION}@{digest}"
    assert done.stdout.splitlines()[-1] == reference
    manifest, headers = _get(registry, f"platform/sriov-dra/manifests/{digest}")
    assert "sha256:" + hashlib.sha256(manifest).hexdigest() == digest == headers["Docker-Content-Digest"]
    tagged, _ = _get(registry, f"platform/sriov-dra/manifests/{VERSION}")
    assert tagged == manifest
    written = yaml.safe_load((inventory.parent / "group_vars" / "all" / "sriov-dra-images.yml").read_text())
    multus = f"{registry.host}/multus-cni:v4.3.0@{multus_digest}"
    assert written == {"sriov_dra_image": reference, "multus_image": multus}
    listed = subprocess.run(
        [str(Path(sys.executable).parent / "ansible-inventory"), "-i", str(inventory), "--host", "worker-1"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    seen = json.loads(listed.stdout)
    assert (seen["sriov_dra_image"], seen["multus_image"]) == (reference, multus)

    again = _push(tmp_path, repository, "--archive", str(archive), "--insecure", "--authfile", str(auth),
                  "--inventory", str(inventory))  # fmt: skip
    assert again.returncode == 0, again.stderr
    kept = yaml.safe_load((inventory.parent / "group_vars" / "all" / "sriov-dra-images.yml").read_text())
    assert kept == written, "a push without --multus keeps the pinned Multus image"


def test_push_without_credentials_names_skopeo_login_and_writes_nothing(
    registry: push_registry.PushRegistry, tmp_path: Path
) -> None:
    archive, _ = _archive(tmp_path, "sriov-dra.local/sriov-dra:0.1.0", b"no credentials")
    inventory = tmp_path / "inventory.yml"
    inventory.write_text("all: {}\n")
    done = _push(tmp_path, f"{registry.host}/platform/anonymous", "--archive", str(archive), "--insecure",
                 "--inventory", str(inventory))  # fmt: skip
    assert done.returncode == 1
    assert f"for credentials run 'skopeo login {registry.host}' or pass --authfile" in done.stderr
    assert not (tmp_path / "group_vars").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["{host}/platform/refused:1.0"], "has a tag; give the repository only"),
        (["sriov-dra"], "names no registry host"),
        (["{host}/platform/refused", "--inventory", str(REPO / "playbooks" / "inventory" / "example.yml")],
         "is inside this tree, which a collection build packs; keep it outside"),
        (["{host}/platform/refused", "--inventory", "{tmp}/missing/inventory.yml"],
         "copy playbooks/inventory/example.yml there first"),
        (["{host}/platform/refused", "--multus", "{host}/multus-cni:v4.3.0@sha256:" + "0" * 64],
         "cannot read the manifest of"),
    ],
    ids=["tagged", "no-registry", "inventory-in-tree", "no-inventory", "multus-digest-not-served"],
)  # fmt: skip
def test_push_refuses_before_pushing(
    registry: push_registry.PushRegistry, tmp_path: Path, args: list[str], message: str
) -> None:
    archive, _ = _archive(tmp_path, "sriov-dra.local/sriov-dra:0.1.0", b"refused")
    auth = _authfile(registry, tmp_path)
    argv = [a.format(host=registry.host, tmp=tmp_path) for a in args]
    done = _push(tmp_path, *argv, "--archive", str(archive), "--insecure", "--authfile", str(auth))
    assert done.returncode == 1 and message in done.stderr, done.stderr
    catalog, _ = _get(registry, "_catalog")
    assert "platform/refused" not in json.loads(catalog)["repositories"]
