"""The guard's minimal permissions, and a hard failure naming what is missing (multus-cni #667).

The session's guard runs with exactly the shipped ``sriov-dra-guard`` ClusterRole (get pods, get
NADs); every attach test proves that is enough. Here a guard whose role lacks one verb fails the
ADD before any delegate runs, naming the verb, the resource and the namespace; it never falls back
to a primary-only attachment.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests.cni.world import World

from sriov_dra.guard import decisions, install
from sriov_dra_lab import guard, multus
from sriov_dra_lab.cni_node import GUARD_NAMESPACE, CniNode

R = decisions.Reason


def _role_without(resource: str) -> dict[str, Any]:
    role = multus.guard_cluster_role()
    name = f"sriov-dra-guard-without-{resource}"
    return {
        **role,
        "metadata": {"name": name},
        "rules": [r for r in role["rules"] if resource not in r["resources"]],
    }


@pytest.fixture(scope="module", params=["pods", "network-attachment-definitions"])
def limited_guard(request: pytest.FixtureRequest, cni_node: CniNode) -> Iterator[tuple[str, Path]]:
    """A second guard daemon whose identity lacks ``get`` on one resource; yields (resource, conf dir)."""
    resource = request.param
    workdir = cni_node.workdir / f"guard-without-{resource}"
    assert cni_node.api is not None
    kubeconfig = multus.service_account_kubeconfig(
        cni_node.api,
        namespace=GUARD_NAMESPACE,
        name=f"guard-without-{resource}"[:63],
        role=_role_without(resource),
        server=cni_node.cp.server,
        ca_cert=cni_node.cp.ca_cert,
        path=workdir / "guard.kubeconfig",
    )
    daemon = guard.GuardDaemon(
        socket_path=workdir / "guard.sock", kubeconfig=kubeconfig, log_path=workdir / "guard.log"
    )
    daemon.start()
    doc = json.loads((cni_node.conf_dirs["thin"] / install.CONFLIST_NAME).read_text())
    doc["plugins"][0]["guard"]["socket"] = str(daemon.socket_path)
    conf_dir = workdir / "net.d"
    conf_dir.mkdir(parents=True)
    (conf_dir / install.CONFLIST_NAME).write_text(json.dumps(doc))
    try:
        yield resource, conf_dir
    finally:
        daemon.stop()


def test_missing_verb_is_a_hard_failure_naming_verb_resource_namespace(
    world: World, limited_guard: tuple[str, Path]
) -> None:
    resource, conf_dir = limited_guard
    pod = world.managed_pod("p")
    att = world.attachment(pod.name, uid=pod.uid)
    result = world.add("thin", att, conf_dir=conf_dir)
    error = result.error or {}
    assert error.get("msg", "").startswith(f"multus-guard: {R.API_FORBIDDEN}:"), error
    assert (
        f"get {resource}" in error["msg"]
        and world.namespace in error["msg"]
        and "forbidden" in error["msg"].lower()
    )
    assert "sriov-dra-guard" in error["msg"] and "no delegate ran" in error["details"]
    assert world.node.recorded(att.container_id) == []
