"""Multus reports success without the managed networks; the guard refuses it.

Two real ways stock Multus v4.3.0 attaches only the primary:

* it reads an older copy of the Pod, from before the plugin's annotations (thick Multus's informer
  can lag; here thin Multus reads through a proxy that serves the older copy once);
* it has no API client (thin Multus with no kubeconfig silently runs only its delegates).

Either way the guard's post-ADD check finds the managed interfaces missing, runs Multus DEL for the
same container and fails the ADD, so the kubelet retries, and the retry attaches everything. The
apiserver audit log shows that neither Multus nor the guard read a ResourceClaim or ResourceSlice:
a shadow carries no ``resourceName`` key, so Multus performs no DRA lookup for it.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tests.cni.world import RAIL_A, RAIL_B, World
from tests.fakes import stale_apiserver

from sriov_dra.guard import decisions
from sriov_dra.host import netlink
from sriov_dra_lab import cni_node
from sriov_dra_lab.control_plane import ControlPlane

R = decisions.Reason
MULTUS_USER = "system:serviceaccount:kube-system:multus"
GUARD_USER = f"system:serviceaccount:{cni_node.GUARD_NAMESPACE}:sriov-dra-guard"


@pytest.fixture
def proxy(control_plane: ControlPlane) -> Iterator[stale_apiserver.StaleApiProxy]:
    p = stale_apiserver.StaleApiProxy(control_plane.kubeconfig).start()
    try:
        yield p
    finally:
        p.stop()


def _raw_pod(world: World, name: str) -> dict[str, Any]:
    data = client.CoreV1Api(world.api).read_namespaced_pod(name, world.namespace, _preload_content=False).data
    doc: dict[str, Any] = json.loads(data)
    return doc


def _assert_refused_and_undone(world: World, att: Any, result: Any) -> None:
    assert not result.ok
    error = result.error or {}
    assert error["msg"].startswith(f"multus-guard: {R.INTERFACES_MISSING}:"), error
    assert "dra0" in error["msg"] and "dra1" in error["msg"] and "Multus DEL succeeded" in error["details"]
    calls = [(c.plugin, c.command) for c in world.node.recorded(att.container_id)]
    assert ("multus", "ADD") in calls and ("multus", "DEL") in calls and ("macvlan", "DEL") in calls
    assert ("sriov", "ADD") not in calls  # Multus never saw the managed selections
    assert {vf.ifname for vf in world.vfs} <= netlink.link_names(None)
    assert set(netlink.link_names(att.netns)) == {"lo"}  # the primary was removed by the DEL


def test_multus_reading_an_older_pod_copy_is_turned_into_a_failed_add(
    world: World, proxy: stale_apiserver.StaleApiProxy, tmp_path: Path
) -> None:
    older: dict[str, Any] = {}
    pod = world.managed_pod(
        "stale", before_annotation=lambda p: older.update(_raw_pod(world, p["metadata"]["name"]))
    )
    assert "annotations" not in older["metadata"] or not older["metadata"]["annotations"]
    conf_dir = tmp_path / "net.d"
    world.node.install_guard(
        "thin",
        conf_dir=conf_dir,
        multus_keys={"kubeconfig": str(proxy.write_kubeconfig(tmp_path / "proxy.kubeconfig"))},
    )
    proxy.serve_stale(world.namespace, pod.name, older, times=1)

    att = world.attachment(pod.name, uid=pod.uid)
    _assert_refused_and_undone(world, att, world.add("thin", att, conf_dir=conf_dir))
    assert len(proxy.served_stale) == 1  # Multus read the older copy; the guard read the live Pod

    retry = world.attachment(pod.name, uid=pod.uid)  # the kubelet's next sandbox
    result = world.add("thin", retry, conf_dir=conf_dir)
    assert result.ok, result.stdout
    assert {"dra0", "dra1"} <= netlink.link_names(retry.netns)
    assert world.delete("thin", retry, conf_dir=conf_dir).ok
    assert world.host_local_files(RAIL_A) == [] and world.ippool_allocations(RAIL_B) == {}


def test_primary_only_multus_is_turned_into_a_failed_add(world: World, tmp_path: Path) -> None:
    stub = tmp_path / "multus-without-api"
    stub.write_text(
        f"#!{sys.executable}\n"
        "# Multus thin with no kubeconfig: no API client, so only the primary delegate runs.\n"
        "import json, os, subprocess, sys\n"
        "conf = json.load(sys.stdin)\n"
        "conf.pop('kubeconfig', None)\n"
        "env = {k: v for k, v in os.environ.items() if not k.startswith('KUBERNETES_')}\n"
        f"p = subprocess.run([{str(world.node.bin_dir / 'multus')!r}], input=json.dumps(conf).encode(),"
        " env=env, capture_output=True)\n"
        "sys.stdout.buffer.write(p.stdout); sys.stderr.buffer.write(p.stderr); sys.exit(p.returncode)\n"
    )
    stub.chmod(0o755)
    conf_dir = tmp_path / "net.d"
    world.node.install_guard("thin", conf_dir=conf_dir, multus_keys={"binary": str(stub)})
    pod = world.managed_pod("noapi")
    att = world.attachment(pod.name, uid=pod.uid)
    _assert_refused_and_undone(world, att, world.add("thin", att, conf_dir=conf_dir))


@pytest.mark.parametrize("mode", ["thin", "thick"])
def test_no_resource_claim_or_slice_is_read_for_shadows(
    world: World, control_plane: ControlPlane, mode: str
) -> None:
    pod = world.managed_pod("audited")
    att, added = world.attach(mode, pod.name, uid=pod.uid)
    assert added.ok, added.stdout
    assert world.delete(mode, att).ok
    events = [json.loads(line) for line in control_plane.audit_log.read_text().splitlines() if line.strip()]
    ours = [e for e in events if e.get("user", {}).get("username") in (MULTUS_USER, GUARD_USER)]
    dra = [e for e in ours if (e.get("objectRef") or {}).get("apiGroup") == "resource.k8s.io"]
    assert dra == [], [(e["user"]["username"], e["verb"], e["requestURI"]) for e in dra]
    # The audit log does see these identities (the assertion above is not vacuous).
    guard_nad_gets = [
        e
        for e in ours
        if e["user"]["username"] == GUARD_USER
        and e["verb"] == "get"
        and (e.get("objectRef") or {}).get("name") in {s["metadata"]["name"] for s in pod.shadows}
    ]
    assert len(guard_nad_gets) >= 2
    assert any(e["user"]["username"] == MULTUS_USER for e in ours)
