"""The collection's ``sriov_vf_plan`` filter and the operator's DRA plan share one node-policy rule
(``sriov_dra_rules.node_policies``). It lives here because the filter is imported as the collection,
which ``tests/pure/plugins/conftest.py`` sets up (``ansible_collections.sriovnet.dra``)."""

from __future__ import annotations

from pathlib import Path

from ansible_collections.sriovnet.dra.plugins.filter import sriov

from sriov_dra.core.operator import node_policy
from sriov_dra_rules import node_policies


def test_the_operator_plan_and_the_vf_plan_filter_use_this_one_rule() -> None:
    assert Path(sriov.node_policies.__file__).samefile(node_policies.__file__)
    policy = node_policy.parse_policy(
        {"metadata": {"name": "p"}, "spec": {"nodeSelector": {"rail": "a"}, "priority": True}},
        prefix="",
        nic_ids=(),
    )
    assert policy.priority == node_policies.DEFAULT_PRIORITY
    assert policy.selects({"rail": "a"}) and not policy.selects({"rail": "b"})
