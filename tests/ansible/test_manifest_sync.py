"""The roles apply exactly the manifests shipped with the services, and the spec §12.3 RBAC.

``collection/sync_manifests.py`` keeps byte copies of ``runtime/sriov_dra/manifests`` in the roles
that apply them; these tests fail when a copy is missing, stale or orphaned, when a role carries a
copy its tasks never apply, or when the plugin role's managed-networks ClusterRole differs from
spec §12.3.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def _sync_module():
    spec = importlib.util.spec_from_file_location("sync_manifests", REPO / "collection" / "sync_manifests.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_role_copies_equal_the_shipped_manifests() -> None:
    problems = _sync_module().problems()
    assert problems == [], "run python collection/sync_manifests.py:\n" + "\n".join(problems)


def test_every_role_copy_is_applied_by_its_role() -> None:
    unused = []
    for copy in sorted(REPO.glob("roles/*/files/manifests/**/*.yaml")):
        role = copy.relative_to(REPO).parts[1]
        rel = copy.relative_to(REPO / "roles" / role / "files").as_posix()
        tasks = "\n".join(p.read_text() for p in (REPO / "roles" / role / "tasks").glob("*.yml"))
        if rel not in tasks:
            unused.append(f"roles/{role} carries {rel} but no task applies it")
    assert unused == []


def test_every_shipped_service_manifest_has_an_owner_role() -> None:
    sync = _sync_module()
    orphans = [
        p.relative_to(sync.SOURCE).as_posix()
        for p in sorted(sync.SOURCE.rglob("*.yaml"))
        if sync.owner(p.relative_to(sync.SOURCE).as_posix()) is None
        and not p.relative_to(sync.SOURCE).as_posix().startswith("lab/")
    ]
    assert orphans == [], "add these to OWNERS in collection/sync_manifests.py"


SPEC_12_3_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]},
    {
        "apiGroups": ["k8s.cni.cncf.io"],
        "resources": ["network-attachment-definitions"],
        "verbs": ["get", "list", "create", "patch", "delete"],
    },
]


def test_plugin_role_grants_exactly_the_spec_12_3_rules_to_its_service_account() -> None:
    text = (REPO / "roles/plugin/files/manifests/plugin/rbac.yaml").read_text()
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(text)}
    assert docs[("ClusterRole", "dra-sriov-managed-networks")]["rules"] == SPEC_12_3_RULES
    binding = docs[("ClusterRoleBinding", "dra-sriov-managed-networks")]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "dra-driver-sriov", "namespace": "dra-driver-sriov"}
    ]
    assert binding["roleRef"] == {
        "apiGroup": "rbac.authorization.k8s.io",
        "kind": "ClusterRole",
        "name": "dra-sriov-managed-networks",
    }
    daemonset = (REPO / "roles/plugin/templates/daemonset.yaml.j2").read_text()
    assert "serviceAccountName: dra-driver-sriov\n" in daemonset
