"""Which plugin instance of a node may own it during a rolling update: the newest one.

docs/plugin.md#rolling-update: each instance (a Pod UID) is appended to an ordered record in the
node's state directory the first time it starts, after every instance recorded before it; a
restarted container keeps its place. The record's order is the instances' age, decided on the node
alone (no API server, no clock). The node goes only from an instance to a newer one. Pure.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

RECORD_KEPT: Final = 16
"""How many instances the record keeps (the newest): a rollout runs two at a time."""


def recorded(record: Sequence[str], instance: str) -> tuple[str, ...]:
    """``record`` with ``instance`` appended unless it is in it already, the newest :data:`RECORD_KEPT` kept."""
    entries = tuple(record) if instance in record else (*record, instance)
    return entries[-RECORD_KEPT:]


def newer(record: Sequence[str], instance: str) -> tuple[str, ...]:
    """The instances recorded after ``instance``; every recorded one when it is not in the record
    (an instance dropped as the oldest, or started before the record existed)."""
    if instance not in record:
        return tuple(record)
    return tuple(record[list(record).index(instance) + 1 :])


def older(record: Sequence[str], instance: str) -> tuple[str, ...]:
    """The instances recorded before ``instance`` (none when it is not in the record): the ones it
    superseded, which idle until their Pods are deleted."""
    if instance not in record:
        return ()
    return tuple(record[: list(record).index(instance)])


def may_hand_over(record: Sequence[str], owner: str) -> bool:
    """Whether the owning instance may hand the node to the instance asking for it.

    Only the newest recorded instance ever asks (an older one idles, see :func:`newer`), so a
    request counts only while an instance newer than ``owner`` is recorded. An owner without a
    Pod UID (``""``, shared socket names) is not ordered: it hands over to any request.
    """
    return not owner or bool(newer(record, owner))


def confirmed(owner_now: str | None, handing_over: str, owner_before: str | None) -> bool:
    """Whether the owner record names the instance that took the node over from ``handing_over``.

    ``owner_before`` is what the record named when the writer lock was released (``None``: no
    record; ``handing_over`` itself once it wrote its own name there just before); the successor
    writes its own name once it serves the node, so any other name confirms.
    """
    return owner_now is not None and owner_now not in (handing_over, owner_before)
