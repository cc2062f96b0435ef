"""The one-network-deviceclass, device-plugin-resources and operator-two-rails examples on the lab.

one-network-deviceclass: one NAD named once in a DeviceClass's VfConfig; the VF gets ``dra0`` on
rail A's subnet. operator-two-rails: SriovNetwork + SriovNetworkNodePolicy (``spec.dra``) through
the operator, the plugins on the operator's namespace (an operator-managed install), the
gpu-nic-pairs workload unchanged; the
operator's generated attributes carry the NAD reference and not its own input keys; the Pod gets
both rails. device-plugin-resources: a Pod asking only ``resources.limits: {openshift.io/rail_b: 1}``
gets ``dra0`` on rail B's subnet through the DeviceClass whose ``extendedResourceName`` that is.

Both replace the session's direct gpu-nic-pairs policies while they run (overlapping policies must not be
combined) and restore them afterwards. Each example is removed as its README says, ``kubectl delete
-f`` on its files, which leaves the install namespaces, the plugin and the guard.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.e2e.helpers import EXAMPLES, delete_example, wait_clean

from sriov_dra.cli import inspect, inspect_rows, inspect_table
from sriov_dra.kube import objects
from sriov_dra_lab import stack_base, workloads


def _rows(lab: Any, namespace: str, name: str) -> list[inspect_rows.Row]:
    pod = workloads.wait_running(lab.api, namespace, name, timeout_s=180)
    netns = lab.pod_netns(pod)
    assert netns is not None, f"{namespace}/{name} has no ready sandbox"
    client = objects.Objects(lab.api, field_manager="e2e")
    return inspect_rows.inspect_pod(client, namespace, name, netns=netns, read_netns=inspect.read_netns)


def test_one_nad_for_a_device_class(lab: Any, without_direct_policies: None) -> None:
    folder = EXAMPLES / "one-network-deviceclass"
    files = (folder / "one-network.yaml", folder / "pod.yaml")
    workloads.apply_docs(lab.api, [d for f in files for d in workloads.load(f)])
    try:
        [row] = _rows(lab, "ai-workloads", "one-network-demo")
        assert row.ok, inspect_table.render_table([row])
        assert (row.interface, row.subnet, row.source) == ("dra0", "192.0.2.0/24", "ai-workloads/rail-a-net")
        assert row.vf_pci.startswith("0000:03:"), "the policy advertises ens1f0 only"
    finally:
        delete_example(lab, *files)
    found = wait_clean(lab)
    assert found.empty, found.describe()


def test_a_device_plugin_style_pod_gets_dra0_on_its_rail_through_an_extended_resource(
    lab: Any, without_direct_policies: None
) -> None:
    folder = EXAMPLES / "device-plugin-resources"
    files = (folder / "rails.yaml", folder / "pod.yaml")
    workloads.apply_docs(lab.api, [d for f in files for d in workloads.load(f)])
    try:
        [row] = _rows(lab, "ai-workloads", "device-plugin-style")
        assert row.ok, inspect_table.render_table([row])
        assert (row.interface, row.subnet, row.source) == (
            "dra0",
            "198.51.100.0/24",
            "ai-workloads/rail-b-net",
        )
        assert row.request == "container-0-request-0" and row.vf_pci.startswith("0000:81:"), "a VF of ens2f0"
    finally:
        delete_example(lab, folder / "pod.yaml", folder / "rails.yaml")
    found = wait_clean(lab)
    assert found.empty, found.describe()


@pytest.fixture
def operator_managed(lab: Any, without_direct_policies: None) -> Iterator[None]:
    """Plugins on the operator's namespace for one test (a DaemonSet rollout on real nodes), then back."""
    lab.switch_plugin_policy_namespace(stack_base.OPERATOR_NAMESPACE)
    try:
        yield
    finally:
        lab.switch_plugin_policy_namespace(stack_base.POLICY_NAMESPACE)


def _ready(client: objects.Objects) -> bool:
    wanted = {objects.NODE_POLICY: "DRAConfigurationReady", objects.SRIOV_NETWORK: "Ready"}
    states = [
        {c["type"]: c["status"] for c in (o.get("status") or {}).get("conditions") or []}.get(kind)
        for res, kind in wanted.items()
        for o in client.list(res, stack_base.OPERATOR_NAMESPACE).items
    ]
    return len(states) == 4 and all(s == "True" for s in states)


def test_two_rails_through_the_operator(lab: Any, operator_managed: None) -> None:
    folder = EXAMPLES / "operator-two-rails"
    networks = workloads.load(folder / "sriov-networks-and-policies.yaml")
    workload = workloads.load(folder / "workload.yaml")
    client = objects.Objects(lab.api, field_manager="e2e")
    workloads.apply_docs(lab.api, [d for d in workload if d["kind"] == "Namespace"])
    workloads.apply_docs(lab.api, networks)
    try:
        workloads.eventually("node policies and networks Ready", lambda: _ready(client), timeout_s=90)
        generated = client.list(objects.DEVICE_ATTRIBUTES, stack_base.OPERATOR_NAMESPACE).items
        refs = sorted(
            (
                a["spec"]["attributes"]["sriovnetwork.k8snetworkplumbingwg.io/netAttachDefName"]["string"],
                a["spec"]["attributes"]["sriovnetwork.k8snetworkplumbingwg.io/netAttachDefNamespace"][
                    "string"
                ],
            )
            for a in generated
        )
        assert refs == [("rail-a-net", "ai-workloads"), ("rail-b-net", "ai-workloads")]
        assert not any(
            "sriovnetwork.openshift.io/sriovNetworkName" in a["spec"]["attributes"] for a in generated
        )

        workloads.apply_docs(lab.api, [d for d in workload if d["kind"] != "Namespace"])
        rows = _rows(lab, "ai-workloads", "gpu-sriov-pairs-demo")
        assert [r.interface for r in rows] == ["dra0", "dra1"] and all(r.ok for r in rows), (
            inspect_table.render_table(rows)
        )
        assert sorted(r.subnet for r in rows) == ["192.0.2.0/24", "198.51.100.0/24"]
    finally:
        delete_example(lab, folder / "workload.yaml", folder / "sriov-networks-and-policies.yaml")
    found = wait_clean(lab)
    assert found.empty, found.describe()


def test_the_operator_serves_its_policies_resource_name_to_a_device_plugin_style_pod(
    lab: Any, operator_managed: None
) -> None:
    folder = EXAMPLES / "operator-two-rails"
    (namespace,) = [d for d in workloads.load(folder / "workload.yaml") if d["kind"] == "Namespace"]
    # The same unchanged Pod, asking for the resource name both of the example's node policies share.
    pod = workloads.load(
        EXAMPLES / "device-plugin-resources" / "pod.yaml", {"openshift.io/rail_b": "openshift.io/sriov_vfs"}
    )
    client = objects.Objects(lab.api, field_manager="e2e")
    workloads.apply_docs(lab.api, [namespace])
    workloads.apply_docs(lab.api, workloads.load(folder / "sriov-networks-and-policies.yaml"))
    try:
        workloads.eventually("node policies and networks Ready", lambda: _ready(client), timeout_s=90)
        served = workloads.eventually(
            "the operator's DeviceClass sriov-vfs",
            lambda: client.get_or_none(objects.DEVICE_CLASS, "sriov-vfs"),
            timeout_s=60,
        )
        assert served["spec"]["extendedResourceName"] == "openshift.io/sriov_vfs"
        workloads.apply_docs(lab.api, pod)
        [row] = _rows(lab, "ai-workloads", "device-plugin-style")
        assert row.ok, inspect_table.render_table([row])
        assert row.interface == "dra0" and row.subnet in ("192.0.2.0/24", "198.51.100.0/24")
    finally:
        workloads.delete_docs(lab.api, pod)
        delete_example(lab, folder / "sriov-networks-and-policies.yaml")
        workloads.delete_docs(lab.api, [namespace])
    found = wait_clean(lab)
    assert found.empty, found.describe()
    workloads.eventually(
        "the operator to delete its DeviceClass once no policy names the resource",
        lambda: client.get_or_none(objects.DEVICE_CLASS, "sriov-vfs") is None,
        timeout_s=60,
    )
