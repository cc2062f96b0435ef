"""Each DRA policy's DRAConfigurationReady verdict: the problems found, which one it reports, and why.

Problems are collected as reason → detail → nodes while planning; the reported reason is the
first in :data:`PRECEDENCE`; :data:`WITHHOLDING` reasons withhold the policy's DeviceAttributes;
the message names every problem with at most five nodes each (docs/design.md#operator-status).
Decides nothing about what to generate; reports no reason outside :data:`PRECEDENCE`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from sriov_dra.core.operator import conditions, node_policy
from sriov_dra_rules import errors

CONDITION_TYPE: Final = "DRAConfigurationReady"
READY_REASON: Final = "DRAConfigurationApplied"
_R = errors.Reason
PRECEDENCE: Final = (
    _R.DRA_INACTIVE,
    _R.INVALID_DRA_ATTRIBUTE,
    _R.SOURCE_ACCESS_DENIED,
    _R.SRIOV_NETWORK_NOT_FOUND,
    _R.SRIOV_NETWORK_NOT_READY,
    _R.SOURCE_NAD_NOT_READY,
    _R.DRA_CONFIGURATION_SYNC_FAILED,
    _R.UNSUPPORTED_MANAGED_SELECTOR,
    _R.CONFLICTING_DRA_MAPPING,
)
"""Which reason a policy reports when several apply (earlier wins)."""
WITHHOLDING: Final = frozenset(PRECEDENCE[:7])
"""Reasons that withhold the policy's DeviceAttributes (its devices stay claimed and blocked)."""
_NODES_SHOWN: Final = 5


@dataclass(frozen=True)
class PolicyOutcome:
    """The DRAConfigurationReady verdict for one policy with a ``dra`` block.

    ``attributes_name`` is set when its DeviceAttributes is published; ``nodes`` names the
    SriovResourcePolicies whose configs carry its filter.
    """

    policy: str
    uid: str
    generation: int
    reason: errors.Reason | None
    message: str
    attributes_name: str | None
    nodes: tuple[str, ...]

    def condition(self) -> conditions.Condition:
        """The ``DRAConfigurationReady`` condition for this outcome."""
        if self.reason is None:
            return conditions.Condition(
                CONDITION_TYPE, conditions.Status.TRUE, READY_REASON, self.message, self.generation
            )
        return conditions.Condition(
            CONDITION_TYPE, conditions.Status.FALSE, self.reason.value, self.message, self.generation
        )


@dataclass
class Issues:
    """Per-policy problems collected while planning: reason → {detail → nodes}."""

    by_reason: dict[errors.Reason, dict[str, list[str]]] = field(default_factory=dict)

    def add(self, reason: errors.Reason, detail: str, node: str = "") -> None:
        """Record ``detail`` under ``reason``, on ``node`` when given (repeats kept for counting)."""
        nodes = self.by_reason.setdefault(reason, {}).setdefault(detail, [])
        if node:
            nodes.append(node)

    def verdict(self) -> tuple[errors.Reason | None, str]:
        """The reason by :data:`PRECEDENCE` and every detail in order; ``(None, "")`` when clean."""
        present = [r for r in PRECEDENCE if r in self.by_reason]
        if not present:
            return None, ""
        parts = []
        for reason in present:
            for detail, nodes in sorted(self.by_reason[reason].items()):
                parts.append(f"{detail} on node(s) {_fmt(nodes)}" if nodes else detail)
        return present[0], "; ".join(parts)


def outcomes(
    parsed: Sequence[node_policy.NodePolicy],
    issues: Mapping[str, Issues],
    published: Mapping[str, str],
    policy_nodes: Mapping[str, list[str]],
) -> dict[str, PolicyOutcome]:
    """The outcome of every DRA policy in ``parsed``, keyed by policy name.

    Shapes: ``published`` maps a policy to its published DeviceAttributes name; ``policy_nodes``
    to the nodes whose SriovResourcePolicy carries its config.
    """
    out: dict[str, PolicyOutcome] = {}
    for p in parsed:
        if not p.has_dra:
            continue
        reason, message = issues[p.name].verdict()
        nodes = tuple(sorted(policy_nodes.get(p.name, ())))
        name = published.get(p.name)
        if reason is None:
            message = (
                f"DeviceAttributes {name} is generated and selected by the SriovResourcePolicy of "
                f"{len(nodes)} node(s)"
            )
        out[p.name] = PolicyOutcome(p.name, p.uid, p.generation, reason, message, name, nodes)
    return out


def _fmt(nodes: Sequence[str]) -> str:
    unique = sorted(set(nodes))
    shown = ", ".join(unique[:_NODES_SHOWN])
    return shown if len(unique) <= _NODES_SHOWN else f"{shown} (+{len(unique) - _NODES_SHOWN} more)"
