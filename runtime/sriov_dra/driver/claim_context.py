"""Everything prepare and unprepare work with, and the small interfaces at their boundaries.

The :class:`ClaimContext` bundle the claim handler is built from, and the Protocols of the parts
tests replace: the claim API (``driver.managed.seams.ClaimStatusApi``, ``kube.claims.ClaimClient``), the discovered
inventory (:class:`Inventory`) and the metrics sink (:class:`ClaimMetrics`). Host parts are the
real ``sriov_dra.host`` classes (tests build them on a fake sysfs tree). No state, no work.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from sriov_dra.core import attributes
from sriov_dra.driver import faults, locks
from sriov_dra.driver.managed import seams
from sriov_dra.driver.managed import service as managed_service
from sriov_dra.host import cdi, checkpoint, device_metadata_files, discovery, vf_driver_binding
from sriov_dra.host import sysfs as sysfs_mod


class Inventory(Protocol):
    """The node's full discovered VF inventory (not only the advertised policy set)."""

    def vfs(self) -> Mapping[str, discovery.DiscoveredVf]:
        """Discovered VFs keyed by DRA device name (read-only snapshot)."""
        ...


class ClaimMetrics(Protocol):
    """Where the handler reports each claim operation."""

    def observe_claim(self, operation: str, outcome: str, reason: str, seconds: float) -> None:
        """Record one prepare/unprepare of one claim.

        Shapes: ``operation`` ``prepare``/``unprepare``; ``outcome`` ``ok``/``error``;
        ``reason`` a bounded ``sriov_dra_rules.errors.Reason`` value or an error class name.
        Units: ``seconds`` wall time of the operation.
        """
        ...


class NoMetrics:
    """A :class:`ClaimMetrics` that records nothing."""

    def observe_claim(self, operation: str, outcome: str, reason: str, seconds: float) -> None:
        """Ignore the observation."""


@dataclass(frozen=True)
class ClaimContext:
    """What the claim handler needs; built once by the entrypoint (or a test).

    Shapes: ``node_name`` is also the pool name of every device this plugin publishes;
    ``require_netdevice`` is true in auto-attach (managed) mode, where every VF must be a
    kernel netdevice VF (docs/design.md#prepare); manual MULTUS mode keeps upstream's behaviour.
    """

    driver_name: str
    node_name: str
    claims: seams.ClaimStatusApi
    inventory: Inventory
    store: checkpoint.CheckpointStore
    binder: vf_driver_binding.DriverBinder
    cdi: cdi.CdiSpecs
    sysfs: sysfs_mod.Sysfs
    require_netdevice: bool = False
    claim_locks: locks.KeyedLocks = field(default_factory=lambda: locks.KeyedLocks("claim"))
    pod_locks: locks.KeyedLocks = field(default_factory=lambda: locks.KeyedLocks("pod"))
    tickets: locks.PrepareTickets = field(default_factory=locks.PrepareTickets)
    """Running prepares an unprepare of their claim overtook (``locks.PrepareTickets``)."""
    fault: faults.FaultHook = faults.NO_FAULTS
    metrics: ClaimMetrics = field(default_factory=NoMetrics)
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("sriov_dra.driver.claims"))
    managed: managed_service.ManagedAttach | None = None
    """Auto-attach (``--multus-auto-attach``): shadows, Pod selections and release; ``None`` off."""
    gate_closed: str = ""
    """Release-only mode (``core.plugin.auto_attach_gate``): why the node's auto-attach gate is closed
    while bindings are recorded; a claim without a record is then refused (``AutoAttachGateClosed``),
    recorded ones are prepared again and released. Empty: the gate is open."""
    metadata: device_metadata_files.DeviceMetadataFiles | None = None
    """Device metadata files and their mounts (docs/design.md#device-metadata); ``None`` writes none."""
    published: Callable[[str], Mapping[str, attributes.AttributeValue] | None] | None = None
    """A device's published attributes now (discovery plus policy); ``None``: discovery's only."""
