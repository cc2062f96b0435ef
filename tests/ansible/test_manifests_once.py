"""Every manifest is held once in git, by the role that applies it, and reaches everyone who reads it.

The roles own the files (``roles/<role>/files/manifests/<rel>``); ``runtime/sriov_dra/manifests/<rel>``
is a relative symlink to that file, so the cluster tests, the CLI and the lab read the same bytes from
a checkout, and the wheel (and the image, ``test_containerfile.py``) carries them dereferenced.
``ansible-galaxy collection build`` ignores ``runtime/``, so the tarball holds only the roles' real
files. These tests fail when a manifest's content exists twice in git, when a runtime manifest is not
a link into a role, when a role carries a manifest its tasks never apply, when the built tarball lacks
or changes a manifest a role applies, or when the plugin role's RBAC differs from docs/design.md#rbac.
"""

from __future__ import annotations

import hashlib
import re
import subprocess
import tarfile
from collections import defaultdict
from pathlib import Path

import pytest
import yaml
from tests.ansible import collection_build
from tests.ansible.conftest import REPO

RUNTIME_MANIFESTS = REPO / "runtime" / "sriov_dra" / "manifests"
APPLIED = re.compile(r"manifests/[A-Za-z0-9_./-]+\.ya?ml")
"""A manifest path as a role's tasks name it (relative to the role's ``files/``)."""


def _tracked() -> list[Path]:
    """Every file git tracks in the working tree (deleted-but-staged paths left out)."""
    out = subprocess.run(
        ["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True, text=True
    ).stdout
    paths = [REPO / p for p in out.split("\0") if p]
    return [p for p in paths if p.is_symlink() or p.is_file()]


def _is_manifest(path: Path) -> bool:
    return path.suffix in (".yaml", ".yml") and "manifests" in path.relative_to(REPO).parts


def _role_manifests() -> dict[str, dict[str, Path]]:
    """role -> {path relative to the role's ``files/``: file} for every manifest a role holds."""
    found: dict[str, dict[str, Path]] = defaultdict(dict)
    for path in sorted(REPO.glob("roles/*/files/manifests/**/*.y*ml")):
        role = path.relative_to(REPO).parts[1]
        found[role][path.relative_to(REPO / "roles" / role / "files").as_posix()] = path
    return dict(found)


def _applied(role: str) -> set[str]:
    """Every ``manifests/...`` path the role's tasks and templates name."""
    texts = [p.read_text() for p in sorted((REPO / "roles" / role).glob("t*/*")) if p.is_file()]
    return set(APPLIED.findall("\n".join(texts)))


def test_no_manifest_content_is_held_twice_in_git() -> None:
    by_hash: dict[str, list[str]] = defaultdict(list)
    for path in _tracked():
        if not path.is_symlink():
            by_hash[hashlib.sha256(path.read_bytes()).hexdigest()].append(path.relative_to(REPO).as_posix())
    manifests = [p for p in _tracked() if _is_manifest(p) and not p.is_symlink()]
    assert len(manifests) >= 11
    twice = {
        p.relative_to(REPO).as_posix(): copies
        for p in manifests
        if len(copies := by_hash[hashlib.sha256(p.read_bytes()).hexdigest()]) > 1
    }
    assert twice == {}, "keep the role's file and make the others symlinks to it"


def test_every_runtime_manifest_is_a_link_to_the_role_file_of_the_same_path() -> None:
    held = {rel: path for files in _role_manifests().values() for rel, path in files.items()}
    links = {}
    for path in sorted(RUNTIME_MANIFESTS.rglob("*")):
        if path.is_dir() and not path.is_symlink():
            continue
        rel = "manifests/" + path.relative_to(RUNTIME_MANIFESTS).as_posix()
        assert path.is_symlink(), f"{path.relative_to(REPO)} is a file; move it into the role that applies it"
        assert not Path(path.readlink()).is_absolute(), f"{path.relative_to(REPO)} must be a relative link"
        links[rel] = path.resolve()
    assert links == {rel: path.resolve() for rel, path in held.items()}


def test_every_role_manifest_is_applied_by_its_role() -> None:
    unused = [
        f"roles/{role} carries files/{rel} but no task applies it"
        for role, files in _role_manifests().items()
        for rel in files
        if rel not in _applied(role)
    ]
    assert unused == []


@pytest.fixture(scope="module")
def tarball(tmp_path_factory: pytest.TempPathFactory, ansible_env: dict[str, str]) -> Path:
    return collection_build.build(tmp_path_factory.mktemp("manifests") / "dist", ansible_env)


def test_the_built_tarball_carries_every_manifest_each_role_applies(tarball: Path) -> None:
    applied = {role: _applied(role) for role in sorted(p.name for p in (REPO / "roles").iterdir())}
    assert sum(map(len, applied.values())) >= 11
    with tarfile.open(tarball) as tf:
        members = {m.name: m for m in tf.getmembers()}
        missing, changed = [], []
        for role, rels in applied.items():
            for rel in sorted(rels):
                name = f"roles/{role}/files/{rel}"
                member = members.get(name)
                if member is None or not member.isfile():
                    missing.append(name)
                    continue
                extracted = tf.extractfile(member)
                assert extracted is not None
                if extracted.read() != (REPO / name).read_bytes():
                    changed.append(name)
    assert (missing, changed) == ([], [])


MANAGED_NETWORKS_RULES = [
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "patch"]},
    {
        "apiGroups": ["k8s.cni.cncf.io"],
        "resources": ["network-attachment-definitions"],
        "verbs": ["get", "list", "create", "patch", "delete"],
    },
]


def test_plugin_role_grants_exactly_the_managed_networks_rules_to_its_service_account() -> None:
    text = (REPO / "roles/plugin/files/manifests/plugin/rbac.yaml").read_text()
    docs = {(d["kind"], d["metadata"]["name"]): d for d in yaml.safe_load_all(text)}
    assert docs[("ClusterRole", "dra-sriov-managed-networks")]["rules"] == MANAGED_NETWORKS_RULES
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
