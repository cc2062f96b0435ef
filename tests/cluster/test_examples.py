"""Every manifest under ``examples/`` passes server-side dry-run on the real API server.

The examples are what the README and the lab apply (docs/design.md#examples); a field the API
server or a shipped CRD schema would drop or refuse must fail here. Namespaces are created for
real (a dry-run create cannot hold objects inside it); everything else is dry-run only. Each
example folder also has its README.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from sriov_dra.kube import apply

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
CRDS = ROOT / "runtime" / "sriov_dra" / "manifests" / "crds"
FILES = sorted(EXAMPLES.glob("*/*.yaml"))


def _docs(path: Path) -> list[dict[str, Any]]:
    return [d for d in yaml.safe_load_all(path.read_text()) if isinstance(d, dict)]


@pytest.fixture(scope="module")
def crds(api: client.ApiClient) -> None:
    docs = [d for f in sorted(CRDS.glob("*.yaml")) for d in _docs(f)]
    apply.apply_objects(api, docs)
    apply.wait_crds_established(api, [d["metadata"]["name"] for d in docs])


def test_every_example_folder_has_a_readme_and_manifests() -> None:
    folders = sorted(p for p in EXAMPLES.iterdir() if p.is_dir())
    assert [f.name for f in folders] == [
        "device-plugin-resources",
        "gpu-nic-pairs",
        "one-network-deviceclass",
        "operator-two-rails",
    ]
    for folder in folders:
        assert (folder / "README.md").is_file(), f"{folder} needs a README"
        assert list(folder.glob("*.yaml")), f"{folder} has no manifest"


@pytest.mark.parametrize("path", FILES, ids=[str(p.relative_to(EXAMPLES)) for p in FILES])
def test_example_passes_server_dry_run(api: client.ApiClient, crds: None, path: Path) -> None:
    docs = _docs(path)
    namespaces = {d["metadata"]["namespace"] for d in docs if d.get("metadata", {}).get("namespace")}
    namespaces |= {"ai-workloads"}
    apply.apply_objects(
        api, [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in sorted(namespaces)]
    )
    core = client.CoreV1Api(api)
    for name in sorted(
        namespaces
    ):  # Pods are admitted only once the namespace's default ServiceAccount exists
        deadline = time.monotonic() + 60
        while not any(
            sa.metadata.name == "default" for sa in core.list_namespaced_service_account(name).items
        ):
            assert time.monotonic() < deadline, f"ServiceAccount {name}/default never appeared"
            threading.Event().wait(0.2)
    answers = apply.apply_objects(api, [d for d in docs if d["kind"] != "Namespace"], dry_run=True)
    for doc, answer in zip([d for d in docs if d["kind"] != "Namespace"], answers, strict=True):
        assert answer["kind"] == doc["kind"] and answer["metadata"]["name"] == doc["metadata"]["name"]
        if "spec" in doc and doc["kind"] not in ("Pod",):
            assert _kept(doc["spec"], answer["spec"]), (
                f"{doc['kind']}/{doc['metadata']['name']}: fields dropped"
            )


def _kept(sent: Any, stored: Any) -> bool:
    """Every field sent is still there (the server may add defaults, never drop what was sent)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(k in stored and _kept(v, stored[k]) for k, v in sent.items())
    if isinstance(sent, list):
        return isinstance(stored, list) and len(sent) == len(stored) and all(map(_kept, sent, stored))
    return bool(sent == stored)
