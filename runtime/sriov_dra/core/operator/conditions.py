"""``metav1.Condition`` values: reading them, deciding whether one must be written, building it.

A condition is written only when type, status, reason, message or observedGeneration differ
from the stored one, and ``lastTransitionTime`` is kept while the status is unchanged (as
upstream's ``pkg/status/patcher.go``), so status writes never loop. A reader counts someone
else's ``status=True`` only at the object's current ``metadata.generation``
(docs/design.md#operator-networks). No clock (callers pass ``now``), no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass


class Status(enum.StrEnum):
    """``metav1.ConditionStatus`` values."""

    TRUE = "True"
    FALSE = "False"
    UNKNOWN = "Unknown"


@dataclass(frozen=True)
class Condition:
    """The desired state of one condition, without its transition time.

    Shapes: ``reason`` CamelCase (``^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$``); ``message`` at most
    32768 characters (truncated by :func:`to_api`); ``observed_generation`` ≥ 0.
    """

    type: str
    status: Status
    reason: str
    message: str
    observed_generation: int


MESSAGE_MAX = 32768


def find(obj: Mapping[str, object], type_: str) -> Mapping[str, object] | None:
    """The stored condition of ``type_`` in ``obj["status"]["conditions"]``, or ``None``."""
    status = obj.get("status")
    items = status.get("conditions") if isinstance(status, Mapping) else None
    for item in items if isinstance(items, list) else []:
        if isinstance(item, Mapping) and item.get("type") == type_:
            return item
    return None


def current_true(obj: Mapping[str, object], type_: str) -> tuple[bool, str]:
    """Whether ``obj`` has ``type_=True`` for its current generation; else why not.

    Shapes: ``(True, "")`` or ``(False, reason text)`` such as ``"Ready is False
    (NamespaceNotFound: ...)"`` or ``"Ready was observed at generation 1, current generation 2"``.
    A Ready condition from an earlier generation is never accepted
    (docs/design.md#operator-networks).
    """
    cond = find(obj, type_)
    if cond is None:
        return False, f"no {type_} condition yet"
    meta = obj.get("metadata")
    generation = meta.get("generation") if isinstance(meta, Mapping) else None
    observed = cond.get("observedGeneration")
    if cond.get("status") != Status.TRUE:
        return False, f"{type_} is {cond.get('status')} ({cond.get('reason')}: {cond.get('message')})"
    if observed != generation:
        return False, f"{type_} was observed at generation {observed}, current generation {generation}"
    return True, ""


def needs_write(stored: Mapping[str, object] | None, desired: Condition) -> bool:
    """True when ``desired`` differs from ``stored`` in any compared field.

    Compared: type, status, reason, message (after truncation) and observedGeneration; the
    transition time never forces a write.
    """
    if stored is None:
        return True
    return (
        stored.get("type"),
        stored.get("status"),
        stored.get("reason"),
        stored.get("message"),
        stored.get("observedGeneration"),
    ) != (
        desired.type,
        desired.status.value,
        desired.reason,
        desired.message[:MESSAGE_MAX],
        desired.observed_generation,
    )


def to_api(desired: Condition, stored: Mapping[str, object] | None, *, now: str) -> dict[str, object]:
    """The API form of ``desired``, keeping the stored transition time when status is unchanged.

    Shapes: ``now`` is RFC 3339 with seconds, e.g. ``2026-01-02T03:04:05Z``.
    """
    transition = now
    if stored is not None and stored.get("status") == desired.status.value:
        kept = stored.get("lastTransitionTime")
        if isinstance(kept, str) and kept:
            transition = kept
    return {
        "type": desired.type,
        "status": desired.status.value,
        "reason": desired.reason,
        "message": desired.message[:MESSAGE_MAX],
        "observedGeneration": desired.observed_generation,
        "lastTransitionTime": transition,
    }


def without(items: Sequence[Mapping[str, object]], type_: str) -> list[Mapping[str, object]]:
    """``items`` minus the condition of ``type_``."""
    return [c for c in items if c.get("type") != type_]
