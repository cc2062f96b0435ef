"""The gpu-nic-pairs Pod variants the real-node Pod-start benchmarks compare, and their cleanup.

``bench/pod_start.py`` (one Pod at a time) and ``bench/pod_burst.py`` (many at once) start the
gpu-nic-pairs example's Pod (examples/gpu-nic-pairs) as it is (**managed**: the plugin prepares
both VFs and names a shadow NAD per VF) and as the best a user can do without this project
(**hand-written**: one NAD per VF, the rail's source config plus that VF's ``deviceID`` read from
the node's ResourceSlice, named in a networks annotation; the same GPUs through a GPU-only
claim). Both are pinned to one node; a start counts only when Multus's network-status names both
rails' interfaces (:func:`attached`), and after each the lab is checked for leftovers.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Collection
from typing import Any, Final

from kubernetes import client, watch

from sriov_dra_lab import leftovers, stack, workloads

NAMESPACE: Final = "ai-workloads"
DRIVER: Final = "sriovnetwork.k8snetworkplumbingwg.io"
ATTR: Final = f"{DRIVER}/"
RAIL_PFS: Final = (("rail-a-net", "ens1f0", "dra0"), ("rail-b-net", "ens2f0", "dra1"))
"""(source NAD, PF, interface) of each rail, in the order the example's Pod gets them."""
PAIRS_TEMPLATE: Final = "gpu-nic-pairs"
GPU_TEMPLATE: Final = "gpu-pairs-gpus-only"


def pinned(pod: dict[str, Any], node: str) -> dict[str, Any]:
    """``pod`` with ``kubernetes.io/hostname: node`` added to its nodeSelector (a deep copy)."""
    out = copy.deepcopy(pod)
    out["spec"]["nodeSelector"] = {**out["spec"].get("nodeSelector", {}), "kubernetes.io/hostname": node}
    return out


def node_vf_lists(api: client.ApiClient, node: str) -> dict[str, list[str]]:
    """``{PFName: [pciAddress, ...]}`` of ``node``'s VFs in its ResourceSlices, by device name."""
    out: dict[str, list[str]] = {}
    for rs in client.ResourceV1Api(api).list_resource_slice().items:
        if rs.spec.driver != DRIVER or rs.spec.node_name != node:
            continue
        for dev in sorted(rs.spec.devices or [], key=lambda d: d.name):
            attrs = {k.removeprefix(ATTR): (v.string or v.int) for k, v in (dev.attributes or {}).items()}
            pf, pci = attrs.get("PFName"), attrs.get("pciAddress")
            if pf and pci:
                out.setdefault(str(pf), []).append(str(pci))
    return out


def node_vfs(api: client.ApiClient, node: str) -> dict[str, str]:
    """``{PFName: pciAddress}`` of the first VF (by device name) of each PF in ``node``'s ResourceSlices."""
    return {pf: vfs[0] for pf, vfs in node_vf_lists(api, node).items()}


def gpu_only_template(docs: list[dict[str, Any]]) -> dict[str, Any]:
    """The example's claim template with its GPU requests only (:data:`GPU_TEMPLATE`)."""
    template = copy.deepcopy(next(d for d in docs if d["metadata"]["name"] == PAIRS_TEMPLATE))
    template["metadata"]["name"] = GPU_TEMPLATE
    requests = template["spec"]["spec"]["devices"]["requests"]
    template["spec"]["spec"]["devices"] = {"requests": [r for r in requests if r["name"].startswith("gpu-")]}
    return template


def hand_nads(docs: list[dict[str, Any]], vfs: dict[str, str]) -> tuple[list[dict[str, Any]], str]:
    """One NAD per rail for the VFs ``{PFName: pciAddress}`` and the networks annotation naming them."""
    by_name = {d["metadata"]["name"]: d for d in docs}
    nads, selections = [], []
    for source, pf, ifname in RAIL_PFS:
        if pf not in vfs:
            raise SystemExit(f"no VF of PF {pf} in the node's ResourceSlice (found {sorted(vfs)})")
        nad = copy.deepcopy(by_name[source])
        config = json.loads(nad["spec"]["config"])
        config["deviceID"] = vfs[pf]
        name = f"{source}-{vfs[pf].replace(':', '-').replace('.', '-')}"
        nad["metadata"] = {"name": name, "namespace": NAMESPACE}
        nad["spec"]["config"] = json.dumps(config)
        nads.append(nad)
        selections.append({"name": name, "interface": ifname})
    return nads, json.dumps(selections)


def hand_pod(managed_pod: dict[str, Any], name: str, networks: str, labels: dict[str, str]) -> dict[str, Any]:
    """The managed Pod renamed, with ``networks`` as its annotation and the GPU-only claim."""
    pod = copy.deepcopy(managed_pod)
    pod["metadata"]["name"] = name
    pod["metadata"]["labels"] = labels
    pod["metadata"]["annotations"] = {"k8s.v1.cni.cncf.io/networks": networks}
    pod["spec"]["resourceClaims"] = [{"name": "devices", "resourceClaimTemplateName": GPU_TEMPLATE}]
    return pod


def handwritten(
    docs: list[dict[str, Any]], managed_pod: dict[str, Any], vfs: dict[str, str], name: str
) -> list[dict[str, Any]]:
    """The hand-written variant's objects for VFs ``vfs``: its NADs, the GPU-only template, Pod ``name``."""
    nads, networks = hand_nads(docs, vfs)
    return [*nads, gpu_only_template(docs), hand_pod(managed_pod, name, networks, {"app": name})]


def follow(
    api: client.ApiClient, seen: Callable[[Any, float], bool], *, timeout_s: float, **selector: str
) -> threading.Event:
    """Watch :data:`NAMESPACE`'s Pods matching ``selector`` (``field_selector``/``label_selector``)
    from now on a thread, calling ``seen(pod, monotonic now)`` per event until it returns True;
    the returned event is set when the watch ends. Established when this returns."""
    core = client.CoreV1Api(api)
    rv = core.list_namespaced_pod(NAMESPACE).metadata.resource_version
    done = threading.Event()

    def run() -> None:
        w = watch.Watch()
        for event in w.stream(
            core.list_namespaced_pod,
            NAMESPACE,
            resource_version=rv,
            timeout_seconds=int(timeout_s),
            **selector,
        ):
            if seen(event["object"], time.monotonic()):
                break
        w.stop()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    time.sleep(0.2)  # the watch starts from ``rv``: no event is missed either way
    return done


def attached(pod: Any) -> None:
    """Stop the bench unless Multus's network-status on ``pod`` names every rail's interface: a Pod
    that runs without its VFs (auto-attach off, a selection missing) is no start to compare."""
    status = (pod.metadata.annotations or {}).get("k8s.v1.cni.cncf.io/network-status", "[]")
    found = {entry.get("interface") for entry in json.loads(status)}
    missing = [ifname for _, _, ifname in RAIL_PFS if ifname not in found]
    if missing:
        raise SystemExit(
            f"Pod {NAMESPACE}/{pod.metadata.name} runs without {', '.join(missing)} "
            f"(network-status: {sorted(str(i) for i in found)}); is auto-attach on for its node?"
        )


def remove(lab: stack.LabStack, names: Collection[str], *, timeout_s: float = 180) -> None:
    """Delete Pods ``names`` (1 s grace), wait until they are gone and nothing of them is left on the lab."""
    core = client.CoreV1Api(lab.api)
    for name in names:
        try:
            core.delete_namespaced_pod(name, NAMESPACE, grace_period_seconds=1)
        except client.ApiException as exc:
            if exc.status != 404:
                raise

    def clean() -> bool:
        present = {p.metadata.name for p in core.list_namespaced_pod(NAMESPACE).items}
        return not present & set(names) and settled(lab).empty

    try:
        workloads.eventually(
            f"Pods {', '.join(sorted(names))} gone with nothing left",
            lambda: clean() or None,
            timeout_s=timeout_s,
            poll_s=0.5,
        )
    except workloads.WaitTimeout:
        raise SystemExit("leftovers: " + settled(lab).describe()) from None


def settled(lab: stack.LabStack) -> leftovers.Leftovers:
    """The lab's leftovers, except stopped sandboxes (the kubelet's GC removes those within a minute)."""
    found = leftovers.collect(lab)
    found.sandboxes = [box for box in found.sandboxes if not box.endswith("SANDBOX_NOTREADY")]
    return found
