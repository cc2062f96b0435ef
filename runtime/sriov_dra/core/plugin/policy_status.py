"""One node's entry in the status of a SriovResourcePolicy or DeviceAttributes: what it found.

Every node's plugin evaluates the same objects, so each owns one entry of ``status.nodes`` (a
list map keyed by ``node``, applied server-side under the node's own field manager): nodes never
overwrite one another, need no read-modify-write, and one node's fix does not hide another
node's problem (a PF name can be wrong on one node only). The entry carries one condition,
:data:`CONDITION_TYPE`, False with the first finding's reason while the node finds problems in
the object, True once they are gone. Pure: the caller passes the time; nothing here writes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from sriov_dra.core import policy_findings
from sriov_dra_rules import names

CONDITION_TYPE: Final = names.POLICY_STATUS_CONDITION
NO_FINDINGS: Final = "NoFindings"
MESSAGE_LIMIT: Final = 32768
"""``metav1.Condition.message`` is at most 32768 characters."""


def entry_of(obj: Mapping[str, Any], node: str) -> Mapping[str, Any] | None:
    """This node's entry in ``obj``'s ``status.nodes``, or ``None``."""
    status = obj.get("status")
    entries = status.get("nodes") if isinstance(status, Mapping) else None
    for entry in entries if isinstance(entries, list) else ():
        if isinstance(entry, Mapping) and entry.get("node") == node:
            return entry
    return None


def node_entry(
    node: str,
    generation: int,
    findings: Sequence[policy_findings.Diagnostic],
    previous: Mapping[str, Any] | None,
    now: str,
) -> dict[str, Any] | None:
    """The entry this node should apply, or ``None`` when there is nothing to write.

    Nothing to write: no finding and no earlier entry of this node (a healthy object gets no
    status), or ``previous`` already says the same for this ``generation``. The transition time
    is kept while the condition's status holds.
    Shapes: ``findings`` are this object's, in evaluation order; ``now`` RFC 3339 (seconds).
    """
    if not findings and previous is None:
        return None
    status = "False" if findings else "True"
    reason = findings[0].reason.value if findings else NO_FINDINGS
    message = "; ".join(f"{d.path}: {d.message}" for d in findings) or "no problem found on this node"
    if len(message) > MESSAGE_LIMIT:
        message = message[: MESSAGE_LIMIT - 3] + "..."
    old = _condition(previous)
    if (
        previous is not None
        and previous.get("observedGeneration") == generation
        and old is not None
        and (old.get("status"), old.get("reason"), old.get("message")) == (status, reason, message)
    ):
        return None
    since = old.get("lastTransitionTime") if old is not None and old.get("status") == status else None
    condition = {
        "type": CONDITION_TYPE,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": since or now,
        "observedGeneration": generation,
    }
    return {"node": node, "observedGeneration": generation, "conditions": [condition]}


def _condition(entry: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
    conditions = entry.get("conditions") if entry is not None else None
    for c in conditions if isinstance(conditions, list) else ():
        if isinstance(c, Mapping) and c.get("type") == CONDITION_TYPE:
            return c
    return None
