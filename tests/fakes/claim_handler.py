"""FAKE ClaimHandler for the kubelet plugin server tests: records calls, fails on request.

This is a test fake, not a driver: it prepares nothing. It satisfies
``sriov_dra.kubeletapi.dra_service.ClaimHandler`` and lets a test choose, per claim UID, a success
with given devices, a returned ``ClaimError``, a returned exception, or an exception raised
for any batch that contains the claim. Calls can be held on an event to test shutdown grace.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from sriov_dra.kubeletapi import messages

_Ok = TypeVar("_Ok")


@dataclass
class FakeClaimHandler:
    """FAKE handler. ``devices``: claim UID → devices returned on prepare (default: one device
    named after the claim). ``fail``: UID → message returned as ``ClaimError``. ``returned_exception``:
    UIDs whose value is an exception object. ``raise_for``: UIDs that make the whole call raise.
    ``omit``: UIDs left out of the result map. ``hold``: when set, each call waits for ``release``.
    """

    devices: dict[str, tuple[messages.Device, ...]] = field(default_factory=dict)
    fail: dict[str, str] = field(default_factory=dict)
    returned_exception: set[str] = field(default_factory=set)
    raise_for: set[str] = field(default_factory=set)
    omit: set[str] = field(default_factory=set)
    hold: bool = False
    prepare_calls: list[tuple[messages.ClaimRef, ...]] = field(default_factory=list)
    unprepare_calls: list[tuple[messages.ClaimRef, ...]] = field(default_factory=list)
    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)

    def _enter(self, claims: Sequence[messages.ClaimRef]) -> None:
        self.entered.set()
        if self.hold:
            self.release.wait(30)
        for claim in claims:
            if claim.uid in self.raise_for:
                raise RuntimeError(f"fake handler exploded on {claim.uid}")

    def prepare_resources(
        self, claims: Sequence[messages.ClaimRef]
    ) -> Mapping[str, messages.Prepared | messages.ClaimError | Exception]:
        self.prepare_calls.append(tuple(claims))
        self._enter(claims)

        def prepared(claim: messages.ClaimRef) -> messages.Prepared:
            default = (messages.Device(pool_name="pool-a", device_name=f"dev-{claim.name}"),)
            return messages.Prepared(self.devices.get(claim.uid, default))

        return self._answers(claims, prepared)

    def unprepare_resources(
        self, claims: Sequence[messages.ClaimRef]
    ) -> Mapping[str, messages.ClaimError | Exception | None]:
        self.unprepare_calls.append(tuple(claims))
        self._enter(claims)
        return self._answers(claims, lambda _claim: None)

    def _answers(
        self, claims: Sequence[messages.ClaimRef], ok: Callable[[messages.ClaimRef], _Ok]
    ) -> dict[str, _Ok | messages.ClaimError | Exception]:
        """Per claim UID: nothing for ``omit``, the scripted error or exception, else ``ok(claim)``."""
        out: dict[str, _Ok | messages.ClaimError | Exception] = {}
        for claim in claims:
            if claim.uid in self.omit:
                continue
            if claim.uid in self.fail:
                out[claim.uid] = messages.ClaimError(self.fail[claim.uid])
            elif claim.uid in self.returned_exception:
                out[claim.uid] = ValueError(f"fake value error for {claim.uid}")
            else:
                out[claim.uid] = ok(claim)
        return out
