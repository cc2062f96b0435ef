"""VF driver binding: apply a VfConfig ``driver`` to a VF and restore the original on unprepare.

Upstream dra-driver-sriov's driver semantics (:meth:`DriverBinder.apply`), plus the managed-mode
check that a VF serves a kernel netdevice (:meth:`DriverBinder.check_netdevice`,
docs/design.md#prepare). Every write goes through the :class:`KernelPci` Protocol
(:class:`SysfsKernelPci` on a node; the lab passes a fake kernel) and is verified by reading
sysfs back; a failure after the first write tries to put the original driver back, then raises.
Never loads kernel modules, touches a PF, or decides policy (callers pass the driver).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

from sriov_dra.core import identities
from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra_rules import errors

LOG = logging.getLogger(__name__)

KEEP = ""
"""VfConfig ``driver`` value that leaves the VF's binding untouched."""

DEFAULT = "default"
"""VfConfig ``driver`` value that requests the kernel's default (netdevice) driver."""

DPDK_DRIVERS = frozenset({"vfio-pci", "uio_pci_generic", "igb_uio"})
"""Userspace drivers that expose no netdev (upstream ``IsDpdkDriver``)."""


class KernelPci(Protocol):
    """The four PCI writes that change a function's driver; each returns once the kernel acted.

    Raises: ``OSError`` as the kernel reports it (``ENODEV`` for a mismatch, ``ENOENT`` for an
    unregistered driver).
    """

    def set_driver_override(self, bdf: str, driver: str) -> None:
        """Write ``driver`` to ``driver_override``; ``""`` clears it."""
        ...

    def unbind(self, bdf: str, driver: str) -> None:
        """Write ``bdf`` to ``bus/pci/drivers/<driver>/unbind``."""
        ...

    def bind(self, bdf: str, driver: str) -> None:
        """Write ``bdf`` to ``bus/pci/drivers/<driver>/bind``."""
        ...

    def probe(self, bdf: str) -> None:
        """Write ``bdf`` to ``bus/pci/drivers_probe``."""
        ...


def write_attribute(path: os.PathLike[str] | str, value: str) -> None:
    """Write ``value`` to an existing sysfs attribute in one ``write`` call.

    Never creates the file: a missing attribute (an unregistered driver's ``bind``) is an error.
    Raises: ``OSError`` from ``open``/``write``.
    """
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, value.encode("ascii"))
    finally:
        os.close(fd)


class SysfsKernelPci:
    """Real :class:`KernelPci`: writes the kernel's PCI sysfs files under a sysfs root."""

    def __init__(self, sysfs: sysfs_mod.Sysfs) -> None:
        self._sysfs = sysfs

    def set_driver_override(self, bdf: str, driver: str) -> None:
        # "\n" clears the override (kernel driver_set_override); a name sets it.
        write_attribute(self._sysfs.pci_device_dir(bdf) / "driver_override", driver or "\n")

    def unbind(self, bdf: str, driver: str) -> None:
        write_attribute(self._sysfs.driver_dir(driver) / "unbind", bdf)

    def bind(self, bdf: str, driver: str) -> None:
        write_attribute(self._sysfs.driver_dir(driver) / "bind", bdf)

    def probe(self, bdf: str) -> None:
        write_attribute(self._sysfs.path("bus", "pci", "drivers_probe"), bdf)


class DriverBindError(errors.SriovDraError):
    """A bind, unbind or probe failed or did not take effect; hardware state may need a look."""

    default_reason = errors.Reason.VF_BIND_FAILED


class UnsupportedVfDriver(errors.InvalidSpec):
    """The VF's driver cannot provide the kernel netdevice that managed mode needs."""

    default_reason = errors.Reason.UNSUPPORTED_VF_DRIVER


@dataclass(frozen=True)
class BindRecord:
    """What :meth:`DriverBinder.apply` did, enough to restore it later (persist it).

    Shapes: ``requested`` is the VfConfig value (``""``, ``"default"`` or a driver name);
    ``original_driver``/``driver`` are None for an unbound VF; ``changed`` says whether any
    write happened.
    """

    pci_address: identities.PciAddress
    requested: str
    original_driver: str | None
    driver: str | None
    changed: bool


class DriverBinder:
    """Applies and restores VF driver bindings through a :class:`KernelPci`.

    Not thread-safe for one VF: callers hold the per-claim operation lock.
    """

    def __init__(
        self,
        sysfs: sysfs_mod.Sysfs,
        *,
        kernel: KernelPci,
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] = LOG,
    ) -> None:
        self._sysfs = sysfs
        self._kernel = kernel
        self._log = log

    def current_driver(self, bdf: str) -> str | None:
        """The VF's bound driver now, or None when unbound."""
        return self._sysfs.current_driver(bdf)

    def apply(self, bdf: str, requested: str, *, require_netdevice: bool = False) -> BindRecord:
        """Bind ``bdf`` as the VfConfig ``driver`` value ``requested`` says, then verify.

        ``""`` (:data:`KEEP`) leaves the VF as it is; ``"default"`` (:data:`DEFAULT`) keeps a VF
        already on a kernel (non-DPDK) driver, else unbinds it, clears ``driver_override`` and
        writes the BDF to ``bus/pci/drivers_probe``; any other name X writes X to
        ``driver_override``, unbinds, writes the BDF to ``bus/pci/drivers/X/bind`` and clears the
        override (upstream writes the override after the unbind).
        Order: validate (and, with ``require_netdevice``, refuse a DPDK request) before any
        write; then the writes; then read back; then the netdevice check.
        Raises: InvalidSpec (reason InvalidVfConfig) for a malformed driver name;
        UnsupportedVfDriver when a netdevice is required and the VF cannot have one (after
        restoring the original driver if this call changed it); DriverBindError when a write
        fails or does not take effect (after trying to restore the original driver).
        Source: upstream dra-driver-sriov's VfConfig ``driver``; docs/design.md#prepare.
        """
        _check_driver_name(bdf, requested)
        original = self.current_driver(bdf)
        original_override = self._sysfs.driver_override(bdf)
        if require_netdevice and requested in DPDK_DRIVERS:
            raise UnsupportedVfDriver(
                f"VF {bdf}: VfConfig driver {requested!r} is a userspace (DPDK) driver, but managed "
                'mode attaches kernel netdevice VFs only; set the VfConfig driver to "" or '
                '"default", or use a claim without managed networking for VFIO/DPDK'
            )
        changed = _needs_change(requested, original)
        if changed:
            self._change(bdf, requested, original, original_override)
        record = BindRecord(
            identities.PciAddress(bdf), requested, original, self.current_driver(bdf), changed
        )
        if require_netdevice:
            try:
                self.check_netdevice(bdf)
            except UnsupportedVfDriver:
                if changed:
                    self._rollback(bdf, original, original_override)
                raise
        if changed:
            self._log.info("vf driver bound", extra={"pci": bdf, "op": "bind", "outcome": record.driver})
        return record

    def restore(self, bdf: str, *, requested: str, original_driver: str | None) -> bool:
        """Put back the driver recorded before :meth:`apply`; idempotent; True if it wrote.

        Nothing happens for ``requested == ""`` or when the VF is already on ``original_driver``.
        An originally unbound VF is unbound again (override cleared, no probe); upstream binds the
        default driver instead, conflating "unbound" with "keep".
        Raises: DriverBindError when a write fails or does not take effect.
        """
        if requested == KEEP:
            return False
        current = self.current_driver(bdf)
        if current == original_driver:
            return False
        if original_driver is not None:
            self._bind_named(bdf, original_driver, current)
        elif current is not None:
            self._write(bdf, "unbind", lambda: self._kernel.unbind(bdf, current))
            self._clear_override(bdf)
            self._verify(bdf, None, f"unbinding it from {current}")
        self._log.info("vf driver restored", extra={"pci": bdf, "op": "restore", "outcome": original_driver})
        return True

    def check_netdevice(self, bdf: str) -> str | None:
        """Return the VF's netdev name, or refuse a VF that cannot serve a kernel netdevice.

        Returns None for a VF whose netdev lives in another network namespace (a Pod's, for a VF
        in use): the kernel keeps a function's ``net/`` class directory while any of its netdevs
        exists, in any namespace, but sysfs lists only the netdevs of the namespace it was
        mounted in, so the host sees ``net/`` present and empty. A driver that created no netdev
        leaves no ``net/`` at all. Both facts are measured on real igbvf VFs (tests/realvf).
        An unbound VF, one on a userspace/DPDK driver or one whose driver made no netdev is refused
        also when the VfConfig driver was omitted; a VF in use passes, so the host stage can be
        re-run for it (docs/design.md#prepare).
        Raises: UnsupportedVfDriver naming the VF, its driver and the fix.
        """
        driver = self.current_driver(bdf)
        fix = (
            'set the VfConfig driver to "default" (rebinds the kernel VF driver), or bind it by hand: '
            f"echo {bdf} > /sys/bus/pci/drivers/<driver>/unbind; echo {bdf} > /sys/bus/pci/drivers_probe"
        )
        if driver is None:
            raise UnsupportedVfDriver(
                f"VF {bdf} is not bound to any driver, so it has no network interface; {fix}"
            )
        if driver in DPDK_DRIVERS:
            raise UnsupportedVfDriver(
                f"VF {bdf} is bound to {driver}, a userspace (DPDK) driver, but managed mode needs a "
                f"kernel netdevice VF; {fix}, or exclude VFIO VFs from the SriovResourcePolicy"
            )
        netdevs = self._sysfs.netdevs(bdf)
        if not netdevs and (self._sysfs.pci_device_dir(bdf) / "net").is_dir():
            self._log.info(
                "vf netdev in another network namespace",
                extra={"pci": bdf, "op": "check_netdevice", "outcome": driver},
            )
            return None
        if not netdevs:
            raise UnsupportedVfDriver(
                f"VF {bdf} is bound to {driver}, which created no network interface; bind a "
                f"netdevice VF driver (e.g. iavf, mlx5_core) or {fix}"
            )
        return netdevs[0]

    # --- internals ---------------------------------------------------------------------------

    def _change(self, bdf: str, requested: str, original: str | None, original_override: str | None) -> None:
        try:
            if requested == DEFAULT:
                if original is not None:
                    self._write(bdf, "unbind", lambda: self._kernel.unbind(bdf, original))
                self._clear_override(bdf)
                self._write(bdf, "probe", lambda: self._kernel.probe(bdf))
                driver = self.current_driver(bdf)
                if driver is None or driver in DPDK_DRIVERS:
                    raise DriverBindError(
                        f"VF {bdf}: drivers_probe left it on {driver or 'no driver'} instead of a kernel "
                        "VF driver; load the VF driver module (e.g. modprobe iavf or mlx5_core) and check "
                        "that no driver_override or new_id claims the device"
                    )
            else:
                self._bind_named(bdf, requested, original)
        except DriverBindError:
            self._rollback(bdf, original, original_override)
            raise

    def _bind_named(self, bdf: str, driver: str, current: str | None) -> None:
        if not self._sysfs.driver_dir(driver).is_dir():
            raise DriverBindError(
                f"VF {bdf}: driver {driver!r} is not registered (no {self._sysfs.driver_dir(driver)}); "
                f"load it first, e.g. modprobe {driver.replace('-', '_')}"
            )
        if self._sysfs.driver_override(bdf) is None:
            raise DriverBindError(
                f"VF {bdf}: the kernel has no driver_override file for it (needs Linux 3.16 or later); "
                f"bind {driver} by hand or upgrade the kernel"
            )
        self._write(bdf, "set_driver_override", lambda: self._kernel.set_driver_override(bdf, driver))
        if current is not None:
            self._write(bdf, "unbind", lambda: self._kernel.unbind(bdf, current))
        self._write(bdf, "bind", lambda: self._kernel.bind(bdf, driver))
        self._clear_override(bdf)
        self._verify(bdf, driver, f"binding it to {driver}")

    def _clear_override(self, bdf: str) -> None:
        if self._sysfs.driver_override(bdf):
            self._write(bdf, "set_driver_override", lambda: self._kernel.set_driver_override(bdf, ""))

    def _write(self, bdf: str, op: str, action: Callable[[], None]) -> None:
        try:
            action()
        except OSError as exc:
            raise DriverBindError(
                f"VF {bdf}: {op} failed: {exc.strerror or exc}; check dmesg for the driver's message "
                "and that the plugin runs privileged with the host /sys mounted read-write"
            ) from exc

    def _verify(self, bdf: str, expected: str | None, what: str) -> None:
        actual = self.current_driver(bdf)
        if actual != expected:
            raise DriverBindError(
                f"VF {bdf}: after {what} it is on {actual or 'no driver'}, expected "
                f"{expected or 'no driver'}; check dmesg, IOMMU settings (for vfio-pci) and driver_override"
            )

    def _rollback(self, bdf: str, original: str | None, original_override: str | None) -> None:
        """Best effort after a failed apply: original driver back, then the override it had."""
        try:
            self.restore(bdf, requested=DEFAULT, original_driver=original)
            override = self._sysfs.driver_override(bdf)
            if original_override is not None and override != original_override:
                self._write(
                    bdf,
                    "set_driver_override",
                    lambda: self._kernel.set_driver_override(bdf, original_override),
                )
        except DriverBindError as exc:
            self._log.error(
                "vf driver rollback failed", extra={"pci": bdf, "op": "rollback", "reason": str(exc)}
            )


def _needs_change(requested: str, original: str | None) -> bool:
    """False for keep, for "default" on a kernel driver, and for a name already bound."""
    if requested == KEEP:
        return False
    if requested == DEFAULT:
        return original is None or original in DPDK_DRIVERS
    return original != requested


def _check_driver_name(bdf: str, requested: object) -> None:
    if not isinstance(requested, str):
        raise errors.InvalidSpec(
            f"VF {bdf}: VfConfig driver must be a string, got {type(requested).__name__}",
            reason=errors.Reason.INVALID_VF_CONFIG,
        )
    if requested in (KEEP, DEFAULT):
        return
    if requested in (".", "..") or any(c in requested for c in "/\0") or any(c.isspace() for c in requested):
        raise errors.InvalidSpec(
            f'VF {bdf}: VfConfig driver {requested!r} is not a driver name; use "", "default" or a name '
            "such as vfio-pci",
            reason=errors.Reason.INVALID_VF_CONFIG,
        )
