"""Per-device claim conditions: ``Ready`` at prepare, ``NetworkReady`` once Multus attached the VF.

The ``status.devices[].conditions`` of this driver's entries (docs/design.md#device-conditions):
``metav1.Condition`` objects keyed by ``type``. A merge keeps every condition of another type in
place and keeps ``lastTransitionTime`` while a condition's status stays the same, so a repeated
write with the same facts changes nothing. Pure: the caller passes the time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

READY: Final = "Ready"
NETWORK_READY: Final = "NetworkReady"
PREPARED: Final = "Prepared"
NETWORK_ATTACHED: Final = "NetworkAttached"
NOT_ATTACHED: Final = "NotAttached"


def condition(type_: str, status: bool, reason: str, message: str, now: str) -> dict[str, object]:
    """One ``metav1.Condition``; ``now`` is RFC 3339 UTC (``2026-12-06T07:00:00Z``)."""
    return {
        "type": type_,
        "status": "True" if status else "False",
        "reason": reason,
        "message": message,
        "lastTransitionTime": now,
    }


def ready(now: str) -> dict[str, object]:
    """``Ready=True``: the VF is prepared (auto-attach: its shadow exists and the Pod selects it)."""
    return condition(READY, True, PREPARED, "the VF is prepared for the Pod", now)


def network_ready(interface: str | None, now: str) -> dict[str, object]:
    """``NetworkReady``: True once network-status shows the VF's interface, else False."""
    if interface:
        return condition(NETWORK_READY, True, NETWORK_ATTACHED, f"Multus attached {interface}", now)
    return condition(NETWORK_READY, False, NOT_ATTACHED, "no network-status entry names this VF", now)


def has(existing: object, type_: str) -> bool:
    """Whether the ``conditions`` list ``existing`` holds one of ``type_``."""
    return isinstance(existing, list) and any(
        isinstance(c, Mapping) and c.get("type") == type_ for c in existing
    )


def merge(existing: object, wanted: Sequence[Mapping[str, object]]) -> list[dict[str, object]]:
    """``existing`` conditions with ``wanted`` set by type.

    A wanted condition replaces the one of its type in place (appended when new); when the status
    is unchanged the old ``lastTransitionTime`` stays. Other types are kept as read.
    """
    out = [dict(c) for c in existing if isinstance(c, Mapping)] if isinstance(existing, list) else []
    for want in wanted:
        new = dict(want)
        for index, old in enumerate(out):
            if old.get("type") == new.get("type"):
                if old.get("status") == new.get("status") and "lastTransitionTime" in old:
                    new["lastTransitionTime"] = old["lastTransitionTime"]
                out[index] = new
                break
        else:
            out.append(new)
    return out
