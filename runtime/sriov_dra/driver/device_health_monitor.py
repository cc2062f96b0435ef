"""The plugin's device health monitor: which VFs to watch, a poll of the node, transitions logged.

Watched: the advertised VFs plus every prepared one (a VF a running Pod holds stays watched after
a policy change), each with the driver it must have (``core.device_health.expected_driver``).
Every ``poll_s`` the node is read and each VF decided (``core.device_health.decide``); each
transition is logged once and, when any health or reason changed, ``on_change`` makes the open
health streams report at once; ``on_poll`` sees every poll's verdicts (the device taints). :meth:`reports` serves the latest verdicts without touching the
node. A poll that fails as a whole turns every VF Unknown with that reason; polling goes on.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Protocol

from sriov_dra.core import device_health
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.host import discovery
from sriov_dra.kubeletapi import messages

LOG = logging.getLogger(__name__)

DEFAULT_POLL_S = 2.0
"""Seconds between two reads of the node: how late at most a link change reaches the kubelet."""


class Reader(Protocol):
    """What the monitor reads the node with (``host.vf_health_reader.VfHealthReader``)."""

    def read(self, targets: Iterable[device_health.HealthTarget]) -> Mapping[str, device_health.VfReading]:
        """Return the reading of every target by device name."""
        ...


def watch_targets(
    pool: str,
    inventory: Mapping[str, discovery.DiscoveredVf],
    published: Iterable[str],
    claims: Iterable[model.ClaimRecord],
) -> list[device_health.HealthTarget]:
    """The devices to watch: ``published`` names and every prepared device of ``pool``, sorted.

    Shapes: ``inventory`` discovered VFs by device name; ``claims`` the checkpoint's records. A
    name missing from ``inventory`` is left out (nothing to read it by). A device prepared by
    several claims takes the first claim's requested driver in record order.
    """
    requested: dict[str, str] = {}
    for record in claims:
        for device in record.devices:
            if device.pool == pool:
                value = device.vf_config.get("driver")
                requested.setdefault(device.device, value if isinstance(value, str) else "")
    out = []
    for name in sorted(set(published) | set(requested)):
        vf = inventory.get(name)
        if vf is None:
            continue
        out.append(
            device_health.HealthTarget(
                pool=pool,
                device=name,
                pci_address=vf.pci_address,
                pf_pci_address=vf.pf_pci_address,
                pf_name=vf.pf_name,
                expect=device_health.expected_driver(vf.driver, requested.get(name)),
            )
        )
    return out


class DeviceHealthMonitor:
    """Polls the node for the health of ``targets()`` and keeps the latest verdict of each.

    ``targets`` returns the devices to watch now (:func:`watch_targets` over the publisher's
    snapshot and the checkpoint); ``reader`` reads them; ``on_change`` runs after a poll that
    changed any verdict (health or reason), ``on_poll`` after every poll with all verdicts by
    device name. Units: ``poll_s`` seconds.
    """

    def __init__(
        self,
        *,
        targets: Callable[[], Sequence[device_health.HealthTarget]],
        reader: Reader,
        poll_s: float = DEFAULT_POLL_S,
        on_change: Callable[[], None] | None = None,
        on_poll: Callable[[Mapping[str, device_health.Verdict]], None] | None = None,
    ) -> None:
        self._targets = targets
        self._reader = reader
        self._poll_s = poll_s
        self._on_change = on_change
        self._on_poll = on_poll
        self._lock = threading.Lock()
        self._watched: dict[str, device_health.HealthTarget] = {}
        self._verdicts: dict[str, device_health.Verdict] = {}

    def poll(self) -> tuple[device_health.Transition, ...]:
        """Read the node once, keep the verdicts, log the transitions; returns them.

        Never raises for a node or watch-list failure (that turns every watched device Unknown).
        """
        try:
            targets = {t.device: t for t in self._targets()}
            readings = self._reader.read(targets.values())
            verdicts = {name: device_health.decide(t, readings[name]) for name, t in targets.items()}
        except Exception as exc:
            LOG.exception("device health poll failed; every watched device is Unknown until the next poll")
            with self._lock:
                targets = dict(self._watched)
            why = f"the plugin could not read the node's device health: {exc}"
            verdicts = {name: device_health.Verdict(device_health.Health.UNKNOWN, why) for name in targets}
        with self._lock:
            before = self._verdicts
            self._watched, self._verdicts = targets, verdicts
        changes = device_health.transitions(before, verdicts)
        for change in changes:
            self._log(targets[change.device], change)
        if verdicts != before and self._on_change is not None:
            self._on_change()
        if self._on_poll is not None:
            self._on_poll(verdicts)
        return changes

    def reports(self) -> list[messages.DeviceHealthReport]:
        """The latest verdict of every watched device as health stream entries (no node access)."""
        with self._lock:
            return [
                messages.DeviceHealthReport(
                    messages.DeviceId(self._watched[name].pool, name), verdict.health, verdict.reason
                )
                for name, verdict in sorted(self._verdicts.items())
            ]

    def run(self, stop: threading.Event) -> None:
        """Poll every ``poll_s`` seconds until ``stop`` is set (a worker thread's body; poll once first)."""
        while not stop.wait(self._poll_s):
            self.poll()

    @staticmethod
    def _log(target: device_health.HealthTarget, change: device_health.Transition) -> None:
        healthy = change.after.health is device_health.Health.HEALTHY
        (LOG.info if healthy else LOG.warning)(
            "device health changed",
            extra={
                "op": "health",
                "device": change.device,
                "pci": target.pci_address,
                "pf": target.pf_name,
                "outcome": f"{change.before.health if change.before else 'new'} -> {change.after.health}",
                "reason": change.after.reason,
            },
        )


def for_node(
    pool: str,
    *,
    snapshot: Callable[[], tuple[Mapping[str, discovery.DiscoveredVf], Iterable[str]]],
    claims: Callable[[], Iterable[model.ClaimRecord]],
    reader: Reader,
    on_change: Callable[[], None],
    on_poll: Callable[[Mapping[str, device_health.Verdict]], None] | None,
) -> DeviceHealthMonitor:
    """The plugin's monitor over the advertised and prepared VFs of ``pool``, polled once now.

    ``snapshot`` returns the discovered VFs and the advertised device names (the publisher's);
    ``claims`` the checkpoint's records (:func:`watch_targets`).
    """

    def targets() -> list[device_health.HealthTarget]:
        inventory, published = snapshot()
        return watch_targets(pool, inventory, published, claims())

    monitor = DeviceHealthMonitor(targets=targets, reader=reader, on_change=on_change, on_poll=on_poll)
    monitor.poll()
    return monitor
