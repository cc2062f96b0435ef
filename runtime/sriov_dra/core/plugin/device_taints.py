"""Device taints from device health: which published VFs carry ``<driver>/unhealthy``, with hysteresis.

A VF is tainted at the first poll whose verdict is Unhealthy (so the scheduler hears within one
health period) with the verdict's cause as the value (``PfDown``, ``PfNoCarrier``, ...). The taint
stays, value unchanged, until the VF has been Healthy for ``clear_after_s`` without a break: an
Unhealthy or Unknown poll restarts that count. A flapping link is therefore tainted once and
untainted once, however often it flaps. Unknown alone never taints (the plugin could not read the
node; that says nothing about the link). A device no longer watched loses its state. The effect
is ``NoSchedule`` unless the plugin runs with ``NoExecute`` (docs/plugin.md#device-taints).
Pure: the caller passes the monotonic time.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from sriov_dra.core import device_health

TAINT_NAME: Final = "unhealthy"
"""The taint key's name part; the key is ``<driver name>/unhealthy``."""

UNHEALTHY_VALUE: Final = "Unhealthy"
"""The value of a taint whose verdict names no cause."""

DEFAULT_CLEAR_AFTER_S: Final = 30.0
"""Seconds a tainted VF must stay Healthy before its taint is removed."""


def taint_key(driver: str) -> str:
    """The key of the health taint for ``driver`` (a DNS subdomain): ``<driver>/unhealthy``."""
    return f"{driver}/{TAINT_NAME}"


class Effect(enum.StrEnum):
    """The effects this plugin publishes (the API also has ``None``, which it never uses)."""

    NO_SCHEDULE = "NoSchedule"
    NO_EXECUTE = "NoExecute"


@dataclass(frozen=True)
class DeviceTaint:
    """One taint of a published device, without ``timeAdded`` (the API server stamps it)."""

    key: str
    value: str
    effect: Effect

    def to_json(self) -> dict[str, Any]:
        """The API form ``{"key", "value", "effect"}``."""
        return {"key": self.key, "value": self.value, "effect": str(self.effect)}


@dataclass(frozen=True)
class TaintState:
    """A tainted device: the taint's value (the cause it was tainted for), and since when it is
    Healthy (None: not)."""

    value: str
    healthy_since: float | None = None


def step(
    states: Mapping[str, TaintState],
    verdicts: Mapping[str, device_health.Verdict],
    now: float,
    *,
    clear_after_s: float = DEFAULT_CLEAR_AFTER_S,
) -> dict[str, TaintState]:
    """The tainted devices after one health poll: the rule of this module's docstring.

    Shapes: ``states`` and the result by device name; ``verdicts`` every watched device's latest
    verdict; ``now`` and ``clear_after_s`` in seconds of one monotonic clock.
    """
    out: dict[str, TaintState] = {}
    for device, verdict in verdicts.items():
        old = states.get(device)
        if verdict.health is device_health.Health.UNHEALTHY:
            value = old.value if old is not None else str(verdict.cause or UNHEALTHY_VALUE)
            out[device] = TaintState(value)
        elif old is None:
            continue
        elif verdict.health is device_health.Health.HEALTHY:
            since = old.healthy_since if old.healthy_since is not None else now
            if now - since < clear_after_s:
                out[device] = TaintState(old.value, since)
        else:
            out[device] = TaintState(old.value)
    return out


def taints(states: Mapping[str, TaintState], *, driver: str, effect: Effect) -> dict[str, DeviceTaint]:
    """The taint each tainted device carries in the slice, by device name."""
    key = taint_key(driver)
    return {device: DeviceTaint(key, state.value, effect) for device, state in states.items()}
