"""The images ``tools/build-image.sh`` builds run on a real kubelet, referenced by digest as the roles render them.

The product image is ``collection/image/Containerfile`` built by buildah on a Debian bookworm base
(mmdebstrap); Multus thin and thick are assembled from the pinned binaries under upstream's names.
They are loaded into the real node's containerd with ``ctr images import`` (no registry is
reachable) by :func:`sriov_dra_lab.images.import_built`, and every Pod here names them
``repository[:tag]@sha256:<digest>``. The tests skip with a printed reason (fail when
``SRIOV_DRA_REQUIRE_TIERS`` names ``e2e``) when the images were not built (``make setup``).
"""

from __future__ import annotations

import gzip
import io
import json
import re
import tarfile
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tests import tiers
from tests.ansible.test_product_wheel import LAB_ONLY_NAMES
from tests.e2e.realnode.pods import busybox_pod
from tests.waiting import eventually

REPO = Path(__file__).resolve().parents[3]
# The lab's stand-ins and fault hooks, as the wheel test names them. sriov_dra/driver/faults.py is product
# code (the named step boundaries and the no-op hook the product wires).
LAB_ONLY_MODULES = LAB_ONLY_NAMES


@pytest.fixture(scope="module")
def built() -> dict[str, Any]:
    """The built images by key (skips the tier with the reason when they were not built)."""
    from sriov_dra_lab import images

    try:
        return dict(images.built_images())
    except images.ImageError as exc:
        tiers.unavailable("e2e", str(exc))
        raise


@pytest.fixture(scope="module")
def loaded(real_node: Any, built: dict[str, Any]) -> dict[str, Any]:
    """The built images, imported into the real node's containerd under their names and digest names."""
    from sriov_dra_lab import images

    for image in built.values():
        started = time.monotonic()
        images.import_built(real_node.ctr, image)
        print(f"imported {image.reference} into {real_node.name} in {time.monotonic() - started:.1f}s")
    return built


def _finished_pod(core: client.CoreV1Api, namespace: str, pod: dict[str, Any]) -> client.V1Pod:
    """Create ``pod`` (restartPolicy Never) and wait until it Succeeded or Failed."""
    name = pod["metadata"]["name"]
    core.create_namespaced_pod(namespace, pod)

    def finished() -> client.V1Pod | None:
        got = core.read_namespaced_pod(name, namespace)
        return got if got.status.phase in ("Succeeded", "Failed") else None

    return eventually(f"Pod {namespace}/{name} to finish", finished, timeout_s=180, interval_s=0.5)


def _exit_codes(pod: client.V1Pod) -> dict[str, int | None]:
    statuses = (pod.status.init_container_statuses or []) + (pod.status.container_statuses or [])
    return {s.name: s.state.terminated.exit_code if s.state.terminated else None for s in statuses}


def _pod(name: str, node: str, containers: list[dict[str, Any]], **spec: Any) -> dict[str, Any]:
    """A run-once Pod on ``node`` with ``containers`` (and more ``spec`` fields)."""
    pod = busybox_pod(name, node, "true")
    pod["spec"].update(restartPolicy="Never", containers=containers, **spec)
    return pod


def test_a_pod_referencing_the_product_image_by_digest_runs_every_service_entrypoint_help_with_exit_0(
    real_node: Any, loaded: dict[str, Any], api: client.ApiClient, namespace: str
) -> None:
    from sriov_dra_lab import images

    product = loaded[images.PRODUCT]
    assert re.fullmatch(r"[^@\s]+@sha256:[0-9a-f]{64}", product.digest_name)
    core = client.CoreV1Api(api)
    pod = _pod(
        "product-help",
        real_node.name,
        [
            # repository@digest and repository:tag@digest: both forms the roles accept.
            {"name": "cli", "image": product.digest_name, "command": ["sriov-dra", "--help"]},
            {"name": "plugin", "image": product.reference, "command": ["sriov-dra-plugin", "--help"]},
            # The other two services the roles run from the same image.
            {"name": "guard", "image": product.reference, "command": ["sriov-dra-guard", "--help"]},
            {"name": "operator", "image": product.reference, "command": ["sriov-dra-operator", "--help"]},
        ],
    )
    for container in pod["spec"]["containers"]:
        container["imagePullPolicy"] = "IfNotPresent"
    done = _finished_pod(core, namespace, pod)
    logs = {
        c: core.read_namespaced_pod_log("product-help", namespace, container=c)
        for c in ("cli", "plugin", "guard", "operator")
    }
    assert done.status.phase == "Succeeded", (_exit_codes(done), logs)
    assert _exit_codes(done) == {"cli": 0, "plugin": 0, "guard": 0, "operator": 0}
    assert all(s.image_id.endswith(product.digest) for s in done.status.container_statuses)
    assert "usage: sriov-dra" in logs["cli"]
    assert "usage: sriov-dra-plugin" in logs["plugin"]


def _layer_paths(archive: Path, digest: str) -> list[str]:
    """Every path in every layer of the manifest ``digest`` of the OCI archive ``archive``."""
    paths: list[str] = []
    with tarfile.open(archive) as outer:

        def blob(d: str) -> bytes:
            member = outer.extractfile(f"blobs/sha256/{d.removeprefix('sha256:')}")
            assert member is not None
            return member.read()

        manifest = json.loads(blob(digest))
        for layer in manifest["layers"]:
            data = blob(layer["digest"])
            if layer["mediaType"].endswith("+gzip"):
                data = gzip.decompress(data)
            with tarfile.open(fileobj=io.BytesIO(data)) as inner:
                paths += [m.name.removeprefix("./") for m in inner.getmembers()]
    return paths


def test_the_product_image_holds_no_lab_package_no_fake_sysfs_or_fault_modules_and_no_cryptography(
    built: dict[str, Any],
) -> None:
    from sriov_dra_lab import images

    product = built[images.PRODUCT]
    paths = _layer_paths(product.archive, product.digest)
    site = [p for p in paths if "/site-packages/" in p]
    # Not vacuous: the runtime and the shared rules are there.
    assert any(p.endswith("site-packages/sriov_dra/driver/main.py") for p in site)
    assert any(p.endswith("site-packages/sriov_dra_rules/__init__.py") for p in site)
    lab = [p for p in paths if re.search(r"(^|/)sriov_dra_lab|sriov_dra/lab/|sriov_dra_lab-", p)]
    crypto = [p for p in site if re.search(r"site-packages/cryptography([-/]|$)", p)]
    own = [p for p in site if "/site-packages/sriov_dra/" in p]
    fakes = [
        p
        for p in own
        if Path(p).stem.split(".")[0] in LAB_ONLY_MODULES or "/fakes/" in p or p.endswith("/fakes")
    ]
    assert lab == [], lab[:10]
    assert crypto == [], crypto[:10]
    assert fakes == [], fakes[:10]


def multus_commands() -> dict[str, list[str]]:
    """The container commands the multus role renders, by container name (its directory defaults)."""
    values = {"multus_cni_bin_dir": "/opt/cni/bin", "multus_cni_conf_dir": "/etc/cni/net.d"}
    found: dict[str, list[str]] = {}
    for template in sorted((REPO / "roles" / "multus" / "templates").glob("multus-*.yaml.j2")):
        text = re.sub(
            r"\{\{\s*(\w+)\s*\}\}", lambda m: values.get(m.group(1), m.group(1)), template.read_text()
        )
        for name, command in re.findall(r"- name: (\S+)\n\s+image: .*\n\s+command: (\[.*\])", text):
            found[name] = json.loads(command)
    return found


def test_the_multus_thick_and_thin_images_run_the_commands_the_multus_role_renders(
    real_node: Any, loaded: dict[str, Any], api: client.ApiClient, namespace: str
) -> None:
    from sriov_dra_lab import images

    thick, thin = loaded[images.MULTUS_THICK], loaded[images.MULTUS_THIN]
    assert thick.name.endswith(":v4.3.0-thick") and thin.name.endswith(":v4.3.0")
    commands = multus_commands()
    assert {"install-multus-shim", "multus-daemon", "kube-multus"} <= set(commands)
    install = commands["install-multus-shim"]  # /install_multus -d /host/opt/cni/bin -t thick
    daemon = commands["multus-daemon"][0]
    assert commands["kube-multus"] == ["/thin_entrypoint"]
    bin_dir = install[install.index("-d") + 1]
    mount = {"name": "cnibin", "mountPath": bin_dir}
    pod = _pod(
        "multus-images",
        real_node.name,
        [
            {
                "name": "check",
                "image": images.BUSYBOX_IMAGE,
                "imagePullPolicy": "Never",
                "command": [
                    "sh",
                    "-c",
                    f"{bin_dir}/multus -version && test -x {bin_dir}/multus-shim && test -x {bin_dir}/passthru",
                ],
                "volumeMounts": [mount],
            }
        ],
        initContainers=[
            {"name": "thick-install", "image": thick.reference, "command": install, "volumeMounts": [mount]},
            {
                "name": "thin-install",
                "image": thin.reference,
                "command": ["/install_multus", "-d", bin_dir, "-t", "thin"],
                "volumeMounts": [mount],
            },
            {"name": "thick-daemon", "image": thick.reference, "command": [daemon, "-help"]},
        ],
        volumes=[{"name": "cnibin", "emptyDir": {}}],
    )
    core = client.CoreV1Api(api)
    done = _finished_pod(core, namespace, pod)
    codes = _exit_codes(done)
    logs = {
        c: core.read_namespaced_pod_log("multus-images", namespace, container=c)
        for c, rc in codes.items()
        if rc is not None
    }
    assert done.status.phase == "Succeeded", (codes, logs)
    assert _exit_codes(done) == {"thick-install": 0, "thin-install": 0, "thick-daemon": 0, "check": 0}
    assert "version:v4.3.0" in logs["check"]
