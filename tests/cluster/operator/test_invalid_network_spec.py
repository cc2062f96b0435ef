"""Cluster tier: SriovNetworks whose spec cannot be rendered, through the operator's network reconcile.

On a real kube-apiserver, for each refused input (``spec.ipam`` that is JSON but
not an object, text that would add a second ``vlan`` key, a repeated key) the network controller
writes no NAD (none created; an existing one keeps its content and resourceVersion, and the API
server's audit log shows no NAD write), sets ``Ready=False`` with reason ``InvalidNetworkSpec`` and
a message naming the SriovNetwork, the field and the problem, and records a Warning Event of that
reason on the SriovNetwork. String fields that could break out of a pasted template reach
the NAD as exactly one string each.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from tests.cluster.operator.conftest import Harness, audit_writes, line_count
from tests.fakes import operator_objects as oo

from sriov_dra.core.operator import network_config
from sriov_dra.kube import objects
from sriov_dra_lab.control_plane import ControlPlane
from sriov_dra_rules import strict_json


@pytest.fixture
def harness_with_events(
    api: client.ApiClient, namespace: str, operator_crds: list[dict[str, Any]]
) -> Iterator[Harness]:
    """A harness whose status writer records Events, as the running operator's does."""
    h = Harness(api, namespace, recorder=True)
    try:
        yield h
    finally:
        h.cleanup()


def warnings_about(h: Harness, network: str) -> list[tuple[str, str]]:
    return [
        (e["reason"], e["note"])
        for e in h.admin.list(objects.EVENT, h.ns).items
        if e["type"] == "Warning"
        and e["regarding"]["kind"] == "SriovNetwork"
        and e["regarding"]["name"] == network
    ]


def assert_refused(h: Harness, network: str, problem: str) -> None:
    ready = h.ready(network)
    assert ready is not None
    assert (ready["status"], ready["reason"]) == ("False", "InvalidNetworkSpec")
    assert ready["message"].startswith(f"SriovNetwork {h.ns}/{network} cannot be rendered: {problem}")
    assert ("InvalidNetworkSpec", ready["message"]) in warnings_about(h, network)


@pytest.mark.parametrize(
    ("spec", "problem"), list(oo.UNRENDERABLE_SPECS.values()), ids=list(oo.UNRENDERABLE_SPECS)
)
def test_unrenderable_network_gets_no_nad_and_ready_false_invalid_network_spec(
    harness_with_events: Harness, control_plane: ControlPlane, spec: dict[str, Any], problem: str
) -> None:
    h = harness_with_events
    h.create_namespace(h.target_ns)
    h.network("rail-a-net", **spec)
    audit_from = line_count(control_plane.audit_log)
    assert [r.outcome for r in h.reconcile_networks()] == ["invalid"]
    assert h.admin.get_or_none(objects.NAD, "rail-a-net", h.target_ns) is None
    assert audit_writes(control_plane.audit_log, audit_from, {h.ns, h.target_ns}) == []
    assert_refused(h, "rail-a-net", problem)


def test_existing_nad_is_left_exactly_as_it_is_when_the_spec_turns_invalid(
    harness_with_events: Harness, control_plane: ControlPlane
) -> None:
    h = harness_with_events
    h.create_namespace(h.target_ns)
    h.network("rail-a-net")
    assert [r.outcome for r in h.reconcile_networks()] == ["created"]
    before = h.admin.get(objects.NAD, "rail-a-net", h.target_ns)
    net = h.admin.get(objects.SRIOV_NETWORK, "rail-a-net", h.ns)
    net["spec"]["ipam"] = "[]"
    h.admin.replace(objects.SRIOV_NETWORK, net)
    audit_from = line_count(control_plane.audit_log)
    assert [r.outcome for r in h.reconcile_networks()] == ["invalid"]
    after = h.admin.get(objects.NAD, "rail-a-net", h.target_ns)
    assert after == before  # content, annotations, owner and resourceVersion
    assert audit_writes(control_plane.audit_log, audit_from, {h.ns, h.target_ns}) == []
    assert_refused(h, "rail-a-net", "spec.ipam: expected a JSON object, got a list")
    ready = h.ready("rail-a-net")
    assert ready is not None and ready["observedGeneration"] == 2


def test_string_fields_that_broke_out_of_the_template_stay_one_string_in_the_nad(harness: Harness) -> None:
    h = harness
    h.create_namespace(h.target_ns)
    h.network("log-net", vlan=100, logFile='/var/log/a","vlan":7,"x":"y')
    h.network("win-net", logFile="C:\\new\\tmp.log")
    assert [r.outcome for r in h.reconcile_networks()] == ["created", "created"]
    for name, log_file, vlan in (
        ("log-net", '/var/log/a","vlan":7,"x":"y', 100),
        ("win-net", "C:\\new\\tmp.log", 0),
    ):
        nad = h.admin.get(objects.NAD, name, h.target_ns)
        config: Any = strict_json.decode(nad["spec"]["config"])  # strict: a second vlan key is refused
        assert (config["logFile"], config["vlan"], "x" in config) == (log_file, vlan, False)
        net = h.admin.get(objects.SRIOV_NETWORK, name, h.ns)
        assert nad["spec"]["config"] == network_config.render_config(net)
        ready = h.ready(name)
        assert ready is not None and ready["status"] == "True"
