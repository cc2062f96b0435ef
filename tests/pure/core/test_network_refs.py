"""Tests for sriov_dra.core.operator.network_refs: the networkNamespace rule and the owner-ref marker."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import operator_objects as oo

from sriov_dra.core.operator import network_refs
from sriov_dra_rules import errors

R = errors.Reason
OP = oo.OP_NS


@pytest.mark.parametrize(
    ("namespace", "network_namespace", "ok"),
    [(OP, "ai-workloads", True), ("tenant", None, True), ("tenant", "ai-workloads", False)],
    ids=["operator-namespace-may-redirect", "tenant-without-redirect", "tenant-redirect-refused"],
)
def test_network_namespace_rule(namespace: str, network_namespace: str | None, ok: bool) -> None:
    net = oo.sriov_network("n", namespace=namespace, network_namespace=network_namespace)
    problem = network_refs.namespace_rule_problem(net, OP)
    assert (problem is None) is ok
    if not ok:
        assert problem is not None and "cannot be set" in problem and OP in problem


@given(
    st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?", fullmatch=True),
    st.from_regex(r"[a-z][-a-z0-9.]{0,30}", fullmatch=True),
)
def test_owner_marker_round_trips(namespace: str, name: str) -> None:
    ref = network_refs.ObjectRef(namespace, name)
    assert network_refs.parse_owner_marker(network_refs.owner_marker(ref)) == ref


@pytest.mark.parametrize(
    "value",
    [
        "",
        "SriovNetwork.networkrefs.openshift.io/ns",
        "OVSNetwork.networkrefs.openshift.io/a/b",
        None,
        3,
        "x/y/z",
    ],
    ids=["empty", "missing-name", "other-kind", "none", "not-string", "foreign"],
)
def test_foreign_markers_name_no_network(value: object) -> None:
    assert network_refs.parse_owner_marker(value) is None
