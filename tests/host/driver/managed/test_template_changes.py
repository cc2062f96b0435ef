"""A Pod whose shadow was frozen from a template that renders differently now gets a Warning Event
from the repair pass saying to recreate it; the shadow itself keeps its frozen config
(docs/design.md#source-changes). On a fake node (real checkpoint and CDI; FAKE API objects).
"""

from __future__ import annotations

import json

from tests.fakes import managed_node as mn

from sriov_dra.driver.managed import template_changes
from sriov_dra.kubeletapi import messages


def _prepared(node: mn.ManagedNode) -> messages.ClaimRef:
    ref = node.add_consumer([("nic", mn.DEV_A0)])
    assert isinstance(node.prepare(ref), messages.Prepared)
    return ref


def _events(node: mn.ManagedNode) -> list[tuple[str, str, str, bool]]:
    return [e for e in node.events.items if e[2] == template_changes.REASON_TEMPLATE_CHANGED]


def test_a_template_fixed_after_the_first_prepare_is_reported_on_the_pod_to_recreate_it(
    node: mn.ManagedNode,
) -> None:
    _prepared(node)
    frozen = [s["spec"]["config"] for s in node.kube.shadows()]
    fixed = mn.sriov_source("rail-a-net", "ai-workloads-rail-a", "192.0.2.0/25")  # the range was corrected
    node.kube.nads[(mn.NS, "rail-a-net")]["spec"] = fixed["spec"]
    node.worker().run_once()
    assert _events(node) == [("Pod", f"{mn.NS}/consumer", template_changes.REASON_TEMPLATE_CHANGED, True)]
    assert [s["spec"]["config"] for s in node.kube.shadows()] == frozen  # never re-rendered


def test_an_unchanged_or_only_relabelled_template_reports_nothing(node: mn.ManagedNode) -> None:
    _prepared(node)
    node.kube.nads[(mn.NS, "rail-a-net")]["metadata"]["labels"] = {"team": "a"}
    config = json.loads(node.kube.nads[(mn.NS, "rail-a-net")]["spec"]["config"])
    node.kube.nads[(mn.NS, "rail-a-net")]["spec"]["config"] = json.dumps(config, indent=4)  # same rendering
    node.worker().run_once()
    assert _events(node) == []


def test_a_template_that_is_gone_or_no_longer_renders_reports_nothing(node: mn.ManagedNode) -> None:
    _prepared(node)
    node.kube.nads[(mn.NS, "rail-a-net")]["spec"]["config"] = "{"
    node.worker().run_once()
    del node.kube.nads[(mn.NS, "rail-a-net")]
    node.worker().run_once()
    assert _events(node) == []
