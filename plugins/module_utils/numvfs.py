# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Safe changes of a PF's VF count and of its VFs' driver, through sysfs under a root.

The rules of the ``sriov_numvfs`` module and of the boot program ``numvfs_boot.py``: :func:`plan`
and :func:`rebinds` refuse before any write (a count above ``sriov_totalvfs``; a PF with VFs
without ``drain_confirmed``), :func:`converge` writes, :func:`verify` checks. A failed write is
not retried; its first errno becomes an actionable message naming the PF and both counts
(openshift/sriov-network-operator #131). Every write goes through a ``writer(path, text)``
callable (default :func:`write_attribute`) so tests emulate the kernel. Standard library only.
"""

from __future__ import annotations

import errno
import os
import time

from ansible_collections.sriovnet.dra.plugins.module_utils import base

POLL_INTERVAL_S = 0.05

ERRNO_HINTS = {
    errno.EBUSY: (
        "the driver or firmware still holds VFs (VFs in use, or a reset in progress). Not retried: "
        "check dmesg, free the VFs (drain the node, stop DPDK users), then rerun"
    ),
    errno.ENOSPC: (
        "the device cannot provide that many VFs (firmware VF limit, MSI-X vectors or PCI bus "
        "numbers). Lower num_vfs, raise the firmware limit, or boot with pci=realloc"
    ),
    errno.ERANGE: "the kernel rejects the count as above sriov_totalvfs. Lower num_vfs to at most sriov_totalvfs",
    errno.ENOENT: (
        "the PF driver does not support setting VFs through sysfs (no sriov_configure), or the PF "
        "disappeared. Load a PF driver with SR-IOV support and check lspci -D"
    ),
    errno.ENOMEM: "there is not enough PCI MMIO space for the VF BARs. Enable SR-IOV in the BIOS and boot with pci=realloc",
}
"""Errno -> the cause and the fix, appended to every failed-write message."""


class NumVfsError(base.ModuleError):
    """A refused or failed change; ``errno`` is the first errno's name (``""`` when none)."""

    def __init__(self, msg, errno_name=""):
        super().__init__(msg, errno=errno_name)
        self.errno_name = errno_name


def write_attribute(path, text):
    """Write ``text`` to a sysfs attribute in one ``write`` call (the kernel's contract).

    ``O_TRUNC`` is what a shell's ``>`` does: sysfs ignores it, and a fake tree's plain file
    then holds exactly the value written.

    Raises: OSError exactly as the kernel reports it.
    """
    fd = os.open(path, os.O_WRONLY | os.O_TRUNC)
    try:
        os.write(fd, text.encode("ascii"))
    finally:
        os.close(fd)


def errno_text(err):
    """``EBUSY (Device or resource busy)`` for an errno number."""
    return "%s (%s)" % (errno.errorcode.get(err, str(err)), os.strerror(err))


def over_total_message(pf, bdf, desired, total):
    """Message for a request above ``sriov_totalvfs`` (nothing written)."""
    return (
        "PF %s (%s): %d VFs requested but sriov_totalvfs is %d; nothing was written. Request at most "
        "%d VFs, or raise the firmware VF limit and reboot." % (pf, bdf, desired, total, total)
    )


def drain_required_message(pf, bdf, current, desired):
    """Message for changing a PF that has VFs without ``drain_confirmed``
    (openshift/sriov-network-operator #131)."""
    then = "0" if desired == 0 else "0, then %d" % desired
    return (
        "PF %s (%s) has %d VFs and %d are requested; the kernel refuses to change a non-zero VF count "
        "directly (EBUSY) and removing VFs breaks the Pods that use them, so nothing was written. Drain "
        "the node (role sriovnet.dra.drain), then rerun with drain_confirmed=true: the module writes %s."
        % (pf, bdf, current, desired, then)
    )


def rebind_requires_drain_message(pf, bdf, pending, driver):
    """Message for rebinding existing VFs without ``drain_confirmed``."""
    vfs = ", ".join("%s (%s)" % (vf, current or "unbound") for _index, vf, current in pending)
    return (
        "PF %s (%s): VFs %s must be rebound to %s, which breaks the Pods that use them, so nothing was written. "
        "Drain the node (role sriovnet.dra.drain), then rerun with drain_confirmed=true."
        % (pf, bdf, vfs, driver)
    )


def write_failed_message(pf, bdf, path, value, current, desired, err, zeroed=False):
    """Message for a failed ``sriov_numvfs`` write: PF, both counts, the errno, cause and fix.

    ``zeroed``: ``0`` was written and verified before this write, so the message says that the PF
    is now at 0 VFs (the VFs it had are gone, not kept).
    """
    hint = ERRNO_HINTS.get(err, "check dmesg for the driver's reason")
    text = "PF %s (%s): writing %s to %s failed with %s while changing %d -> %d VFs: %s." % (
        pf,
        bdf,
        value,
        path,
        errno_text(err),
        current,
        desired,
        hint,
    )
    if zeroed:
        text += (
            " The PF is now at 0 VFs: 0 was written and verified first, so the %d VFs it had are gone "
            "until a rerun succeeds." % current
        )
    return text


def verify_failed_message(pf, bdf, value, timeout_s, numvfs, links, wrote=True):
    """Message for VFs that did not appear/disappear: after a write the kernel accepted, or (not
    ``wrote``) for a count that sysfs already showed but whose ``virtfn`` links do not match."""
    did = "wrote %s to sriov_numvfs" % value if wrote else "expected %s VFs" % value
    return (
        "PF %s (%s): %s but after %ss sysfs shows sriov_numvfs=%s and %d virtfn "
        "links; the PF driver did not create or remove the VFs. Check dmesg and the driver's SR-IOV "
        "support, then rerun." % (pf, bdf, did, timeout_s, numvfs, links)
    )


def wrong_driver_message(pf, bdf, wrong, driver):
    """Message for VFs that are not on the recorded driver when they are verified."""
    vfs = ", ".join("%s (%s)" % (vf, current or "unbound") for _index, vf, current in wrong)
    return "PF %s (%s): VFs %s are not on %s after binding; check dmesg and that %s accepts them." % (
        pf,
        bdf,
        vfs,
        driver,
        driver,
    )


def bind_failed_message(vf_bdf, index, pf, driver, path, err):
    """Message for a failed VF driver change."""
    return (
        "VF %d of PF %s (%s): binding to %s failed: writing %s failed with %s. Check dmesg and that %s accepts this device."
        % (index, pf, vf_bdf, driver, path, errno_text(err), driver)
    )


class Plan:
    """What :func:`plan` decided for one PF: read-only facts plus the writes to make."""

    def __init__(self, pf, bdf, current, total, desired):
        self.pf = pf
        self.bdf = bdf
        self.current = current
        self.total = total
        self.desired = desired

    @property
    def count_changes(self):
        """True when ``sriov_numvfs`` must be written."""
        return self.current != self.desired


def plan(sysfs, pf, desired, drain_confirmed):
    """Read the PF and decide; raise before any write when the change is not allowed.

    Raises: sysfs.SysfsError (unknown PF, no SR-IOV); NumVfsError (negative or above
    ``sriov_totalvfs``, unreadable counts, or a PF with VFs changed without ``drain_confirmed``).
    """
    bdf = sysfs.resolve_pf(pf)
    current = sysfs.numvfs(bdf)
    total = sysfs.totalvfs(bdf)
    if current is None or total is None:
        raise NumVfsError(
            "PF %s (%s): cannot read sriov_numvfs/sriov_totalvfs under %s; check host_root and that "
            "the PF driver is loaded" % (pf, bdf, sysfs.device_path(bdf))
        )
    if desired < 0:
        raise NumVfsError("PF %s (%s): num_vfs must be 0 or more, got %d" % (pf, bdf, desired))
    if desired > total:
        raise NumVfsError(over_total_message(pf, bdf, desired, total))
    if current not in (0, desired) and not drain_confirmed:
        raise NumVfsError(drain_required_message(pf, bdf, current, desired))
    return Plan(pf, bdf, current, total, desired)


def apply(sysfs, change, timeout_s, writer=None, sleep=time.sleep, clock=time.monotonic):
    """Write ``0`` (when the PF has VFs) and then the new count, verifying each step.

    An equal count is never written (some kernels answer EBUSY even to that); a PF that has VFs
    goes through ``0`` because the kernel refuses non-zero to non-zero (EBUSY). After each write
    ``sriov_numvfs`` and the ``virtfn<N>`` links must show the value within ``timeout_s`` (the
    kernel creates the links during the write; drivers may lag). A failure after ``0`` was
    written says that the PF is now at 0 VFs.
    Returns the list of ``"<path>=<value>"`` writes made. Ordering: never the new count before
    ``0`` was written and verified. Raises: NumVfsError with the first errno of a failed write
    (not retried) or a verification failure.
    """
    writer = writer or write_attribute
    path = sysfs.device_path(change.bdf, "sriov_numvfs")
    steps = [0] if change.desired == 0 else ([0, change.desired] if change.current else [change.desired])
    done = []
    try:
        for value in steps:
            try:
                writer(path, str(value))
            except OSError as exc:
                err = exc.errno or errno.EIO
                zeroed = value != 0 and bool(done)
                raise NumVfsError(
                    write_failed_message(
                        change.pf, change.bdf, path, value, change.current, change.desired, err, zeroed
                    ),
                    errno.errorcode.get(err, str(err)),
                )
            done.append("%s=%d" % (path, value))
            wait_for_count(sysfs, change, value, timeout_s, sleep, clock)
    except NumVfsError as exc:
        exc.extra["writes"] = done
        raise
    return done


def wait_for_count(sysfs, change, value, timeout_s, sleep=time.sleep, clock=time.monotonic, wrote=True):
    """Poll until ``sriov_numvfs`` and the ``virtfn`` links both show ``value``.

    ``wrote``: ``value`` was just written (else it is a count that should already be there).
    Raises: NumVfsError (:func:`verify_failed_message`) after ``timeout_s``.
    """
    deadline = clock() + timeout_s
    while True:
        numvfs = sysfs.numvfs(change.bdf)
        links = len(sysfs.virtfns(change.bdf))
        if numvfs == value and links == value:
            return
        if clock() >= deadline:
            raise NumVfsError(
                verify_failed_message(change.pf, change.bdf, value, timeout_s, numvfs, links, wrote)
            )
        sleep(POLL_INTERVAL_S)


def driver_changes(sysfs, change, vf_driver):
    """``[(index, vf_bdf, current_driver)]`` of VFs not bound to ``vf_driver`` (after the count)."""
    found = []
    for index, vf in sysfs.virtfns(change.bdf):
        current = sysfs.driver(vf)
        if current != vf_driver:
            found.append((index, vf, current))
    return found


def bind(sysfs, change, vf_driver, pending, timeout_s, writer=None, sleep=time.sleep, clock=time.monotonic):
    """Bind each pending VF to ``vf_driver``: override, unbind, bind, clear override, verify.

    Returns the writes made. Raises: NumVfsError for an unregistered driver (before any write),
    a failed write (first errno kept) or a VF that is not on ``vf_driver`` after ``timeout_s``.
    """
    writer = writer or write_attribute
    driver_dir = sysfs.sys_path("bus", "pci", "drivers", vf_driver)
    if pending and not os.path.isdir(driver_dir):
        raise NumVfsError(
            "PF %s (%s): VF driver %s is not registered (%s is missing); load it first, e.g. modprobe %s"
            % (change.pf, change.bdf, vf_driver, driver_dir, vf_driver.replace("-", "_"))
        )
    done = []
    try:
        _bind_all(sysfs, change, vf_driver, driver_dir, pending, timeout_s, writer, sleep, clock, done)
    except NumVfsError as exc:
        exc.extra["writes"] = done
        raise
    return done


def _bind_all(sysfs, change, vf_driver, driver_dir, pending, timeout_s, writer, sleep, clock, done):
    for index, vf, current in pending:
        ops = [(sysfs.device_path(vf, "driver_override"), vf_driver)]
        if current is not None:
            ops.append((sysfs.sys_path("bus", "pci", "drivers", current, "unbind"), vf))
        ops.append((driver_dir + "/bind", vf))
        ops.append((sysfs.device_path(vf, "driver_override"), "\n"))
        for path, value in ops:
            try:
                writer(path, value)
            except OSError as exc:
                err = exc.errno or errno.EIO
                raise NumVfsError(
                    bind_failed_message(vf, index, change.pf, vf_driver, path, err),
                    errno.errorcode.get(err, str(err)),
                )
            done.append("%s=%s" % (path, value.strip()))
        deadline = clock() + timeout_s
        while sysfs.driver(vf) != vf_driver:
            if clock() >= deadline:
                raise NumVfsError(
                    "VF %d of PF %s (%s): still on driver %s %ss after binding to %s; check dmesg"
                    % (index, change.pf, vf, sysfs.driver(vf), timeout_s, vf_driver)
                )
            sleep(POLL_INTERVAL_S)


def rebinds(sysfs, change, vf_driver, drain_confirmed):
    """``[(index, vf_bdf, current_driver)]`` of existing VFs to rebind to ``vf_driver``.

    Empty when ``vf_driver`` is not given, or when the count changes (every VF is then new and
    :func:`converge` binds it). Raises: NumVfsError (:func:`rebind_requires_drain_message`) when
    there are some and the drain was not confirmed, because rebinding breaks the VFs' users.
    """
    if change.count_changes or not vf_driver:
        return []
    pending = driver_changes(sysfs, change, vf_driver)
    if pending and not drain_confirmed:
        raise NumVfsError(rebind_requires_drain_message(change.pf, change.bdf, pending, vf_driver))
    return pending


def converge(sysfs, change, vf_driver, timeout_s, writer=None, sleep=time.sleep, clock=time.monotonic):
    """Make a planned change: the count (:func:`apply`) when it differs, then ``vf_driver``
    (:func:`bind`) on every VF not on it yet.

    Call :func:`plan` and :func:`rebinds` first: they refuse what needs a drain. Returns the writes
    made, in order. Raises: NumVfsError from either step; its ``extra["writes"]`` holds every write
    made before the failure.
    """
    writes = []
    try:
        if change.count_changes:
            writes += apply(sysfs, change, timeout_s, writer, sleep, clock)
        if vf_driver:
            pending = driver_changes(sysfs, change, vf_driver)
            writes += bind(sysfs, change, vf_driver, pending, timeout_s, writer, sleep, clock)
    except NumVfsError as exc:
        exc.extra["writes"] = writes + exc.extra.get("writes", [])
        raise
    return writes


def verify(sysfs, change, vf_driver, timeout_s, sleep=time.sleep, clock=time.monotonic):
    """Check that a PF is as planned, whether or not this run wrote anything.

    ``sriov_numvfs`` and the ``virtfn`` links must show ``change.desired`` within ``timeout_s``
    (links may still be appearing), and with ``vf_driver`` every VF must be bound to it.
    Raises: NumVfsError (:func:`verify_failed_message` with ``wrote=False``, or
    :func:`wrong_driver_message`).
    """
    wait_for_count(sysfs, change, change.desired, timeout_s, sleep, clock, wrote=False)
    wrong = driver_changes(sysfs, change, vf_driver) if vf_driver else []
    if wrong:
        raise NumVfsError(wrong_driver_message(change.pf, change.bdf, wrong, vf_driver))


def vf_list(sysfs, bdf):
    """``[{vf_id, pci_address, driver}]`` of a PF's VFs, sorted by VF index."""
    return [
        {"vf_id": index, "pci_address": vf, "driver": sysfs.driver(vf)} for index, vf in sysfs.virtfns(bdf)
    ]
