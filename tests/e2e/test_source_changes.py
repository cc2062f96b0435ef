"""A source NAD edited or deleted after prepare (docs/design.md#source-changes): prepared Pods keep their frozen config.

An existing Pod's shadow keeps the bytes rendered at its first prepare and its interface keeps
the old subnet; a new Pod renders the edited template; after the template is deleted a new Pod
fails to prepare with ``MissingNetworkTemplate`` (a kubelet Warning Event) while the running
Pods keep running and still tear down cleanly.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from kubernetes import client
from tests.e2e.helpers import (
    SRIOV_CLASS,
    claim_template,
    in_namespace,
    interfaces,
    on_pf,
    shadows_of,
    template,
    vf_pod,
    wait_clean,
)

from sriov_dra.kube import objects
from sriov_dra_lab import workloads


def _in(cidr: str, subnet: str) -> bool:
    return ipaddress.ip_interface(cidr).ip in ipaddress.ip_network(subnet)


def test_edited_then_deleted_template(lab: Any, rails: Any, namespace: str) -> None:
    old = {"type": "host-local", "ranges": [[{"subnet": "10.80.0.0/24"}]]}
    new = {"type": "host-local", "ranges": [[{"subnet": "10.81.0.0/24"}]]}
    rail_a = in_namespace(namespace, template("rail-a-net", f"{namespace}-a", old))[0]
    base = in_namespace(
        namespace, claim_template("rail-a-vf", [("vf", SRIOV_CLASS)], selector=on_pf("ens1f0"))
    )
    workloads.apply_docs(lab.api, [rail_a, *base, *in_namespace(namespace, vf_pod("first", "rail-a-vf"))])
    first = workloads.wait_running(lab.api, namespace, "first")
    [frozen] = shadows_of(lab, first)
    [address] = interfaces(lab, first)["dra0"]
    assert _in(address, "10.80.0.0/24")

    edited = in_namespace(namespace, template("rail-a-net", f"{namespace}-a", new))[0]
    workloads.apply_docs(lab.api, [edited])
    workloads.apply_docs(lab.api, in_namespace(namespace, vf_pod("second", "rail-a-vf")))
    second = workloads.wait_running(lab.api, namespace, "second")
    assert _in(interfaces(lab, second)["dra0"][0], "10.81.0.0/24"), "a new Pod renders the edited template"
    [still] = shadows_of(lab, first)
    assert still["spec"]["config"] == frozen["spec"]["config"], (
        "the prepared Pod's shadow keeps its frozen bytes"
    )
    assert interfaces(lab, first)["dra0"] == [address]

    objects.Objects(lab.api, field_manager="e2e").delete(objects.NAD, "rail-a-net", namespace)
    workloads.apply_docs(lab.api, in_namespace(namespace, vf_pod("third", "rail-a-vf")))
    warnings = workloads.eventually(
        "third's prepare to fail",
        lambda: [w for w in workloads.warnings(lab.api, namespace, "third") if "MissingNetworkTemplate" in w],
        timeout_s=90,
    )
    assert warnings[0].startswith("FailedPrepareDynamicResources"), warnings
    core = client.CoreV1Api(lab.api)
    assert core.read_namespaced_pod("third", namespace).status.phase == "Pending"
    for name in ("first", "second"):
        assert core.read_namespaced_pod(name, namespace).status.phase == "Running"

    workloads.delete_docs(
        lab.api, in_namespace(namespace, *(vf_pod(n, "rail-a-vf") for n in ("first", "second", "third")))
    )
    found = wait_clean(lab)
    assert found.empty, found.describe()
