"""The whole lab on real kubelets (``LabStack`` with ``real_nodes``): the kubelet behaviour the design depends on.

One lab (control plane, two real nodes with kubelet v1.36 + containerd, the roles, Multus thin,
the guard and the plugin as their roles' DaemonSets; no operator) serves the module; each test applies its own workload and
deletes it, and checks that nothing is left (``sriov_dra_lab.leftovers``). Nothing stands in for
the kubelet or the container runtime.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tests.waiting import eventually

from sriov_dra.kube import resource_slices
from sriov_dra_lab import gpu_plugin
from sriov_dra_rules import names

PAIRS_POD = ("ai-workloads", "gpu-sriov-pairs-demo")
RAILS = {"dra0": "192.0.2.0/24", "dra1": "198.51.100.0/24"}


def _pairs_docs() -> list[dict[str, Any]]:
    from sriov_dra_lab import demo, workloads

    return workloads.load(demo.PAIRS)


def _start(lab: Any, docs: list[dict[str, Any]], namespace: str, name: str) -> dict[str, Any]:
    from sriov_dra_lab import workloads

    workloads.apply_docs(lab.api, [d for d in docs if d["kind"] != "Pod"])
    applied = time.monotonic()
    workloads.apply_docs(lab.api, [d for d in docs if d["kind"] == "Pod"])
    pod = workloads.wait_running(lab.api, namespace, name, timeout_s=180)
    print(f"{namespace}/{name} apply→Running {time.monotonic() - applied:.1f} s")  # measured, not asserted
    return pod


def _nothing_left(lab: Any) -> None:
    from sriov_dra_lab import leftovers

    def clean() -> bool:
        return leftovers.collect(lab).empty

    try:
        eventually("no leftovers", clean, timeout_s=90, interval_s=1)
    except BaseException:
        pytest.fail("leftovers: " + leftovers.collect(lab).describe())


def _finish(lab: Any, docs: list[dict[str, Any]]) -> None:
    from sriov_dra_lab import workloads

    workloads.delete_docs(lab.api, [d for d in docs if d["kind"] == "Pod"], timeout_s=180)
    workloads.delete_docs(lab.api, [d for d in docs if d["kind"] != "Pod"], timeout_s=180)
    _nothing_left(lab)


def _kubectl(lab: Any, *args: str) -> str:
    from sriov_dra_lab import binaries

    done = subprocess.run(
        [str(binaries.find("kubectl")), f"--kubeconfig={lab.cp.kubeconfig}", *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def _plugin_events(lab: Any, node: Any, msg: str, claim_uid: str | None = None) -> list[dict[str, Any]]:
    """Events ``msg`` (of ``claim_uid``, when given) in the log of ``node``'s plugin Pod (``kubectl logs``)."""
    out = []
    for line in lab.plugin_log(node):
        if line.startswith("{"):
            event = json.loads(line)
            if event.get("msg") == msg and claim_uid in (None, event.get("claim_uid")):
                out.append(event)
    return out


def _claim_uid(lab: Any, pod: dict[str, Any]) -> str:
    namespace = pod["metadata"]["namespace"]
    (status,) = pod["status"]["resourceClaimStatuses"]
    claim = client.ResourceV1Api(lab.api).read_namespaced_resource_claim(
        status["resourceClaimName"], namespace
    )
    return str(claim.metadata.uid)


def _shadows(lab: Any, namespace: str) -> dict[str, str]:
    nads = client.CustomObjectsApi(lab.api).list_namespaced_custom_object(
        "k8s.cni.cncf.io", "v1", namespace, "network-attachment-definitions"
    )
    return {
        n["metadata"]["name"]: n["metadata"]["resourceVersion"]
        for n in nads["items"]
        if n["metadata"]["name"].startswith("dra-sriov-")
    }


def _selections(lab: Any, namespace: str, name: str) -> str:
    pod = client.CoreV1Api(lab.api).read_namespaced_pod(name, namespace)
    return str((pod.metadata.annotations or {}).get("k8s.v1.cni.cncf.io/networks", ""))


def _ready_sandbox(node: Any, pod_uid: str) -> str | None:
    done = node.real.crictl("pods", "-q", "--state=ready", f"--label=io.kubernetes.pod.uid={pod_uid}")
    ids = done.stdout.split()
    return ids[0] if ids else None


def _recreate_sandbox(lab: Any, node: Any, pod: dict[str, Any]) -> str:
    """``crictl stopp`` + ``rmp`` the Pod's sandbox; wait for the kubelet to run a new one. Returns its id."""
    uid = pod["metadata"]["uid"]
    old = _ready_sandbox(node, uid)
    assert old is not None
    for args in (("stopp", old), ("rmp", old)):
        done = node.real.crictl(*args)
        assert done.returncode == 0, done.stderr
    new = eventually(
        "a new sandbox of the Pod",
        lambda: s if (s := _ready_sandbox(node, uid)) not in (None, old) else None,
        timeout_s=180,
        interval_s=1,
    )

    # The Pod stays Running in the API while its sandbox is recreated: wait for its container to run
    # in the new sandbox and for the Pod status to name that container.
    def running_in_new() -> bool:
        ids = node.real.crictl("ps", "-q", "--state=running", f"--pod={new}").stdout.split()
        got = client.CoreV1Api(lab.api).read_namespaced_pod(
            pod["metadata"]["name"], pod["metadata"]["namespace"]
        )
        named = {(c.container_id or "").split("//")[-1] for c in got.status.container_statuses or []}
        return bool(ids) and any(i in named for i in ids)

    eventually("the Pod's container running in the new sandbox", running_in_new, timeout_s=180, interval_s=1)
    return str(new)


def _pod_addresses(lab: Any, namespace: str, name: str) -> dict[str, str]:
    """``{ifname: address/prefix}`` of every IPv4 address in the container (``kubectl exec ip``)."""
    out = _kubectl(lab, "exec", "-n", namespace, name, "--", "ip", "-o", "-4", "addr", "show")
    found = {}
    for line in out.splitlines():
        match = re.match(r"\d+:\s+(\S+)\s+inet\s+(\S+)", line)
        if match:
            found[match.group(1)] = match.group(2)
    return found


def _assert_rails(addresses: dict[str, str]) -> None:
    for ifname, subnet in RAILS.items():
        assert ifname in addresses, addresses
        assert ipaddress.ip_interface(addresses[ifname]) in ipaddress.ip_network(subnet), addresses


@dataclass
class Running:
    """The gpu-nic-pairs Pod running on a real node, with what a test compares after a kubelet event."""

    docs: list[dict[str, Any]]
    pod: dict[str, Any]
    node: Any
    claim_uid: str
    prepared: int
    """``prepare done`` lines of the claim in the plugin's log so far."""
    shadows: dict[str, str]
    selections: str


@pytest.fixture
def pairs(real_lab: Any) -> Iterator[Running]:
    """The gpu-nic-pairs example running (unchanged); deleted afterwards, with nothing left (also after a failure)."""
    run = _running_pairs(real_lab)
    try:
        yield run
    finally:
        _finish(real_lab, run.docs)


def _running_pairs(lab: Any) -> Running:
    docs = _pairs_docs()
    pod = _start(lab, docs, *PAIRS_POD)
    node = lab.node(pod["spec"]["nodeName"])
    claim_uid = _claim_uid(lab, pod)
    return Running(
        docs=docs,
        pod=pod,
        node=node,
        claim_uid=claim_uid,
        prepared=len(_plugin_events(lab, node, "prepare done", claim_uid)),
        shadows=_shadows(lab, PAIRS_POD[0]),
        selections=_selections(lab, *PAIRS_POD),
    )


DEVICE_PLUGIN_POD = ("ai-workloads", "device-plugin-style")
DEVICE_PLUGIN_EXAMPLE = Path(__file__).resolve().parents[3] / "examples" / "device-plugin-resources"


def test_a_pod_asking_only_a_device_plugin_resource_runs_with_dra0_on_its_rail_and_leaves_nothing(
    real_lab: Any,
) -> None:
    from sriov_dra_lab import workloads

    docs = workloads.load(DEVICE_PLUGIN_EXAMPLE / "rails.yaml") + workloads.load(
        DEVICE_PLUGIN_EXAMPLE / "pod.yaml"
    )
    (spec,) = [d for d in docs if d["kind"] == "Pod"]
    assert "resourceClaims" not in spec["spec"] and "annotations" not in spec["metadata"]
    assert [c["resources"] for c in spec["spec"]["containers"]] == [{"limits": {"openshift.io/rail_b": 1}}]
    try:
        pod = _start(real_lab, docs, *DEVICE_PLUGIN_POD)
        extended = pod["status"]["extendedResourceClaimStatus"]
        assert [(m["containerName"], m["resourceName"]) for m in extended["requestMappings"]] == [
            ("workload", "openshift.io/rail_b")
        ]
        claim = client.ResourceV1Api(real_lab.api).read_namespaced_resource_claim(
            extended["resourceClaimName"], DEVICE_PLUGIN_POD[0]
        )
        assert claim.metadata.annotations["resource.kubernetes.io/extended-resource-claim"] == "true"
        (owner,) = claim.metadata.owner_references
        assert (owner.kind, owner.uid, owner.controller) == ("Pod", pod["metadata"]["uid"], True)
        node = real_lab.node(pod["spec"]["nodeName"])
        assert _plugin_events(real_lab, node, "prepare done", str(claim.metadata.uid))
        assert len(_shadows(real_lab, DEVICE_PLUGIN_POD[0])) == 1
        addresses = {
            k: v for k, v in _pod_addresses(real_lab, *DEVICE_PLUGIN_POD).items() if k.startswith("dra")
        }
        assert list(addresses) == ["dra0"], addresses
        rail_b = ipaddress.ip_network("198.51.100.0/24")  # rail-b-net's range in rails.yaml
        assert ipaddress.ip_interface(addresses["dra0"]) in rail_b, addresses
    finally:
        _finish(
            real_lab, docs
        )  # Pod first, then the rest; then no shadow, checkpoint record or IPAM allocation


def test_managed_pairs_pod_on_real_kubelets_shows_dra0_dra1_with_the_rails_addresses_and_every_vfs_cdi_edit(
    real_lab: Any, pairs: Running
) -> None:
    run = pairs
    node = run.node
    _assert_rails(_pod_addresses(real_lab, *PAIRS_POD))
    env = set(_kubectl(real_lab, "exec", "-n", PAIRS_POD[0], PAIRS_POD[1], "--", "env").splitlines())
    specs = [json.loads(p.read_text()) for p in sorted(Path(node.layout.cdi_root).glob("*.json"))]
    edits = [e for s in specs for d in s["devices"] for e in d["containerEdits"].get("env", [])]
    vf_devices = [e for e in edits if e.startswith("SRIOVNETWORK_VF_DEVICE_")]
    assert len(vf_devices) == 2, edits  # one per prepared VF
    assert set(edits) <= env, sorted(set(edits) - env)
    _finish(real_lab, run.docs)


def test_sandbox_recreated_without_a_new_prepare_keeps_the_frozen_shadows_and_selections(
    real_lab: Any, pairs: Running
) -> None:
    run = pairs
    assert len(run.shadows) == 2 and run.selections
    _recreate_sandbox(real_lab, run.node, run.pod)
    # The kubelet's prepare cache: no NodePrepare for a recreated sandbox
    # (docs/design.md#lifecycle).
    assert len(_plugin_events(real_lab, run.node, "prepare done", run.claim_uid)) == run.prepared
    assert _shadows(real_lab, PAIRS_POD[0]) == run.shadows
    assert _selections(real_lab, *PAIRS_POD) == run.selections
    _assert_rails(_pod_addresses(real_lab, *PAIRS_POD))
    _finish(real_lab, run.docs)


def test_kubelet_restart_then_sandbox_recreation_reprepares_idempotently(
    real_lab: Any, pairs: Running
) -> None:
    run = pairs
    before = _pod_addresses(real_lab, *PAIRS_POD)
    run.node.real.restart_kubelet()
    _recreate_sandbox(real_lab, run.node, run.pod)
    # K7: the restored checkpoint resets the kubelet's prepared flag, so the new sandbox prepares again.
    assert len(_plugin_events(real_lab, run.node, "prepare done", run.claim_uid)) > run.prepared
    assert _shadows(real_lab, PAIRS_POD[0]) == run.shadows
    assert _selections(real_lab, *PAIRS_POD) == run.selections
    after = _pod_addresses(real_lab, *PAIRS_POD)
    assert {k: before[k] for k in RAILS} == {k: after.get(k) for k in RAILS}
    # The restarted kubelet wiped every ResourceSlice of its node; both drivers publish theirs again,
    # so the node stays schedulable for the next VF + GPU Pod.
    for driver in (names.DRIVER_NAME, gpu_plugin.DRIVER):
        eventually(
            f"{driver} slices of {run.node.name} after the kubelet restart",
            lambda driver=driver: resource_slices.list_slices(
                real_lab.api, driver=driver, node=run.node.name
            ),
            timeout_s=90,
            interval_s=1,
        )
    _finish(real_lab, run.docs)


def _stamp(text: str) -> dt.datetime:
    head, _, frac = text.rstrip("Z").partition(".")
    return dt.datetime.fromisoformat(f"{head}.{(frac or '0')[:6]:0<6}+00:00")


def _checkpoint(node: Any) -> dict[str, Any]:
    """The plugin's checkpoint on ``node``, read on the node's disk (the DaemonSet's ``<kubelet>/plugins/<driver>``)."""
    data: dict[str, Any] = json.loads((node.layout.plugin_state_dir / "checkpoint.json").read_text())
    return data


def test_plugin_pod_deleted_by_hand_is_restarted_by_its_daemonset_and_recovers_from_its_checkpoint(
    real_lab: Any, pairs: Running
) -> None:
    run = pairs
    node = run.node
    before = _checkpoint(node)
    assert run.claim_uid in json.dumps(before)  # the claim's record is on the node's disk
    old_uid = real_lab.delete_plugin_pod(node)  # waits for the DaemonSet's new Pod, Ready and registered
    # Repair (docs/design.md#repair): the new Pod loads the same checkpoint (one claim) and rewrites nothing it holds.
    (loaded,) = _plugin_events(real_lab, node, "checkpoint loaded")
    assert loaded["claims"] == 1 and loaded["path"].endswith(
        "/plugins/" + names.DRIVER_NAME + "/checkpoint.json"
    )
    assert _checkpoint(node) == before
    assert _shadows(real_lab, PAIRS_POD[0]) == run.shadows  # no shadow rewritten or recreated
    assert _selections(real_lab, *PAIRS_POD) == run.selections
    _assert_rails(_pod_addresses(real_lab, *PAIRS_POD))
    # The new Pod, not the deleted one, releases the claim: NodeUnprepare reaches it and nothing is left.
    from sriov_dra_lab import plugin_pods

    pod = plugin_pods.node_pod(real_lab.api, "dra-driver-sriov", node.name)
    assert pod is not None and pod.metadata.uid != old_uid
    client.CoreV1Api(real_lab.api).delete_namespaced_pod(*reversed(PAIRS_POD))
    eventually(
        "NodeUnprepareResources by the new plugin Pod",
        lambda: _plugin_events(real_lab, node, "unprepare done", run.claim_uid),
        timeout_s=180,
        interval_s=1,
    )
    _finish(real_lab, run.docs)


@pytest.mark.parametrize("propagation", ["Foreground", "Background"])
def test_pod_deletion_tears_down_sandbox_and_cni_before_node_unprepare_and_leaves_nothing(
    real_lab: Any, pairs: Running, propagation: str
) -> None:
    run = pairs
    node, claim_uid = run.node, run.claim_uid
    sandbox = _ready_sandbox(node, run.pod["metadata"]["uid"])
    client.CoreV1Api(real_lab.api).delete_namespaced_pod(
        PAIRS_POD[1], PAIRS_POD[0], body=client.V1DeleteOptions(propagation_policy=propagation)
    )
    unprepared = eventually(
        "NodeUnprepareResources",
        lambda: _plugin_events(real_lab, node, "unprepare done", claim_uid),
        timeout_s=180,
        interval_s=1,
    )
    log = (node.real.logs / "containerd.log").read_text(errors="replace")
    teardown = [
        line
        for line in log.splitlines()
        if f'TearDown network for sandbox \\"{sandbox}\\" successfully' in line
    ]
    assert teardown, f"containerd tore down the network (CNI DEL) of sandbox {sandbox}"
    stamp = re.search(r'time="([^"]+)"', teardown[0])
    assert stamp is not None
    assert _stamp(stamp.group(1)) < _stamp(unprepared[0]["ts"]), (
        "StopPodSandbox + CNI DEL before NodeUnprepare (K13)"
    )
    _finish(real_lab, run.docs)


def test_whereabouts_rail_addresses_are_unique_across_the_two_nodes_and_host_local_stays_per_node(
    real_lab: Any,
) -> None:
    import copy

    from sriov_dra_lab import workloads

    docs = _pairs_docs()
    (template,) = [d for d in docs if d["kind"] == "Pod"]
    pods = []
    for node in real_lab.nodes:
        pod = copy.deepcopy(template)
        pod["metadata"]["name"] = f"pairs-{node.name}"
        pod["spec"]["nodeSelector"] = {**pod["spec"]["nodeSelector"], "kubernetes.io/hostname": node.name}
        pods.append(pod)
    both = [*(d for d in docs if d["kind"] != "Pod"), *pods]
    workloads.apply_docs(real_lab.api, both)
    rails: dict[str, list[str]] = {ifname: [] for ifname in RAILS}
    for pod, node in zip(pods, real_lab.nodes, strict=True):
        live = workloads.wait_running(real_lab.api, "ai-workloads", pod["metadata"]["name"], timeout_s=180)
        # host-local: the primary address comes from this node's own Pod range.
        assert ipaddress.ip_address(live["status"]["podIP"]) in ipaddress.ip_network(node.real.pod_subnet)
        addresses = _pod_addresses(real_lab, "ai-workloads", pod["metadata"]["name"])
        _assert_rails(addresses)
        for ifname in RAILS:
            rails[ifname].append(addresses[ifname])
    # whereabouts: one cluster-wide pool per rail, so the two nodes never hand out the same address.
    assert all(len(set(found)) == len(real_lab.nodes) for found in rails.values()), rails
    _finish(real_lab, both)


# Counts the modules a fresh interpreter compiles from source: a module whose .pyc is valid never reaches
# SourceLoader.source_to_code. Imports the three services' entry modules as their entrypoints do.
_COMPILED_PROBE = """
import importlib._bootstrap_external as bootstrap, json, sys
compiled = []
original = bootstrap.SourceLoader.source_to_code
def counting(self, data, path, *args, **kwargs):
    compiled.append(path)
    return original(self, data, path, *args, **kwargs)
bootstrap.SourceLoader.source_to_code = counting
import sriov_dra.driver.main, sriov_dra.guard.main, sriov_dra.operator.app
print(json.dumps({"modules": len(sys.modules), "optimize": sys.flags.optimize, "compiled": compiled}))
"""


def test_the_images_services_load_every_module_from_its_bytecode_and_compile_none_at_start(
    real_lab: Any,
) -> None:
    """In the plugin's container (the product image as the DaemonSet runs it), importing the plugin's, the
    guard's and the operator's modules compiles nothing: the image's .opt-2.pyc files (venv and standard
    library) are valid there, checked by source hash. With mtime-checked bytecode a copied source one
    second newer than its .pyc made every start recompile ~1,600 modules (+28 MiB RSS, +1.7 s)."""
    from sriov_dra_lab import plugin_pods

    node = real_lab.nodes[0].name
    pod = plugin_pods.node_pod(real_lab.api, "dra-driver-sriov", node)
    assert pod is not None
    out = _kubectl(
        real_lab, "exec", "-n", "dra-driver-sriov", pod.metadata.name, "-c", "plugin", "--",
        "python3", "-c", _COMPILED_PROBE,
    )  # fmt: skip
    found = json.loads(out.strip().splitlines()[-1])
    assert found["optimize"] == 2  # the image's PYTHONOPTIMIZE reached the process
    assert found["modules"] > 1000  # not vacuous: the kubernetes client and the stdlib were imported
    assert found["compiled"] == []
