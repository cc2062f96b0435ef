# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The boot program of role ``sriovnet.dra.vfs``: the ``sriov_numvfs`` module's rules, run by systemd.

No VF count survives a reboot, so the role's unit ``sriov-dra-vfs.service`` (ordered before the
kubelet) sets them again with :func:`main`; the role copies this file and the module_utils it
imports onto the node. Arguments: ``[--root /] [--timeout 30] [--drain-confirmed]
PF=COUNT[:DRIVER] ...``. Output: one line per PF on stdout (as planned) or stderr (the module's
message), then a summary; exit :data:`EXIT_OK`, :data:`EXIT_FAILED` or :data:`EXIT_USAGE`.
Standard library and sibling module_utils only.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
import traceback

from ansible_collections.sriovnet.dra.plugins.module_utils import base, numvfs
from ansible_collections.sriovnet.dra.plugins.module_utils import sysfs as sysfs_mod

PROG = "sriov-dra-vfs"
EXIT_OK = 0
"""Every PF is as planned."""
EXIT_FAILED = 1
"""At least one PF is not as planned (each one was tried)."""
EXIT_USAGE = 2
"""The arguments are malformed; nothing was read or written (argparse's status)."""

_COUNT_RE = re.compile(r"0|[1-9][0-9]*")
_DRIVER_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")
_EXAMPLE = "e.g. 0000:03:00.0=8 or ens1f0=4:vfio-pci"


class PfSpec:
    """One PF argument: ``pf`` as given, ``num_vfs`` and ``vf_driver`` (None keeps the drivers)."""

    def __init__(self, pf, num_vfs, vf_driver=None):
        self.pf = pf
        self.num_vfs = num_vfs
        self.vf_driver = vf_driver


def parse_spec(text):
    """``PF=COUNT`` or ``PF=COUNT:DRIVER`` -> :class:`PfSpec`.

    Shapes: PF is everything before the last ``=`` (a PCI address has ``:`` but no ``=``), COUNT
    a decimal without sign or leading zero, DRIVER a driver name (no ``/``).
    Raises: argparse.ArgumentTypeError naming the argument, the problem and the expected form.
    """
    pf, sep, rest = text.rpartition("=")
    count, colon, driver = rest.partition(":")
    problem = None
    if not sep or not pf:
        problem = "expected PF=COUNT or PF=COUNT:DRIVER"
    elif "/" in pf or any(char.isspace() for char in pf):
        problem = "the PF must be a PCI address or a netdev name (no '/', no spaces)"
    elif not _COUNT_RE.fullmatch(count):
        problem = "the VF count %r is not a number 0 or more" % count
    elif colon and not _DRIVER_RE.fullmatch(driver):
        problem = "the VF driver %r is not a driver name" % driver
    if problem:
        raise argparse.ArgumentTypeError("%r: %s, %s" % (text, problem, _EXAMPLE))
    return PfSpec(pf, int(count), driver or None)


def _seconds(text):
    if not _COUNT_RE.fullmatch(text):
        raise argparse.ArgumentTypeError("%r is not a whole number of seconds 0 or more" % text)
    return int(text)


def build_parser():
    """The command line of :func:`main` (``--help`` shows it)."""
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Set the SR-IOV VF count and VF driver of each PF, then verify them (the boot unit "
        "of role sriovnet.dra.vfs; the rules of module sriovnet.dra.sriov_numvfs).",
    )
    parser.add_argument("--root", default="/", help="directory that stands for the host's / (default: /)")
    parser.add_argument(
        "--timeout",
        type=_seconds,
        default=30,
        help="seconds sysfs may take to show each change (default: 30)",
    )
    parser.add_argument(
        "--drain-confirmed",
        action="store_true",
        help="no workload uses these PFs' VFs (true at boot, before the kubelet): a PF that has "
        "other VFs is set to 0 and then to its count, VFs on another driver are rebound",
    )
    parser.add_argument(
        "pfs",
        nargs="*",
        type=parse_spec,
        metavar="PF=COUNT[:DRIVER]",
        help="a PF (PCI address or netdev name), its VF count and optionally its VFs' driver",
    )
    return parser


def set_pf(sysfs, spec, timeout_s, drain_confirmed, writer=None, sleep=time.sleep, clock=time.monotonic):
    """Plan, converge and verify one PF; return its report line.

    PF is a PCI address (the role writes addresses, so nothing depends on netdev names at boot) or
    a netdev name, resolved to its address; it is read and written at
    ``<root>/sys/bus/pci/devices/<address>/``:

    1. plan (``numvfs.plan``, ``numvfs.rebinds``): a count above ``sriov_totalvfs`` is refused
       before any write, and so is a PF that has other VFs (or VFs on another driver) unless
       ``drain_confirmed`` (the unit passes it: it runs before the kubelet, so no Pod uses a VF);
    2. converge (``numvfs.converge``): write the count when it differs (``0`` first when the PF
       has VFs), then bind every VF not on DRIVER (``driver_override``, unbind, bind, cleared
       override);
    3. verify (``numvfs.verify``): ``sriov_numvfs`` and the ``virtfn<N>`` links show COUNT, and
       every VF is on DRIVER.

    Shapes: ``PF <pf> (<address>): <n> VFs[ on <driver>] as planned (<what was done>)``.
    Raises: base.ModuleError (``numvfs.NumVfsError``, ``sysfs.SysfsError``) with the module's message.
    """
    change = numvfs.plan(sysfs, spec.pf, spec.num_vfs, drain_confirmed)
    numvfs.rebinds(sysfs, change, spec.vf_driver, drain_confirmed)
    writes = numvfs.converge(sysfs, change, spec.vf_driver, timeout_s, writer, sleep, clock)
    numvfs.verify(sysfs, change, spec.vf_driver, timeout_s, sleep, clock)
    done = "had %d, %d sysfs writes" % (change.current, len(writes)) if writes else "nothing written"
    driver = " on %s" % spec.vf_driver if spec.vf_driver else ""
    return "PF %s (%s): %d VFs%s as planned (%s)" % (spec.pf, change.bdf, change.desired, driver, done)


def run(
    root, specs, timeout_s, drain_confirmed, out, err, writer=None, sleep=time.sleep, clock=time.monotonic
):
    """:func:`set_pf` for every spec in order, each one even when an earlier one failed.

    ``writer`` is ``numvfs``'s sysfs write seam (tests emulate the kernel with it). Returns
    :data:`EXIT_OK` or :data:`EXIT_FAILED`; never raises for one PF's failure: an expected one is
    reported with its message, an unexpected exception with its traceback (a bug in one PF's path
    must not leave the next PF without VFs).
    """
    sysfs = sysfs_mod.Sysfs(root)
    failed = []
    for spec in specs:
        try:
            _say(out, set_pf(sysfs, spec, timeout_s, drain_confirmed, writer, sleep, clock))
        except base.ModuleError as exc:
            failed.append(spec.pf)
            _say(err, exc.msg)
        except Exception as exc:  # pylint: disable=broad-exception-caught
            failed.append(spec.pf)
            _say(
                err,
                "PF %s: unexpected %s: %s\n%s" % (spec.pf, type(exc).__name__, exc, traceback.format_exc()),
            )
    if failed:
        _say(
            err,
            "%s: %d of %d PFs are not as planned: %s" % (PROG, len(failed), len(specs), ", ".join(failed)),
        )
        return EXIT_FAILED
    _say(out, "%s: %d PFs as planned" % (PROG, len(specs)))
    return EXIT_OK


def _say(stream, line):
    stream.write(line.rstrip("\n") + "\n")
    stream.flush()  # stdout and stderr reach the journal in the order written


def main(argv=None, writer=None, out=None, err=None):
    """Parse ``argv`` (default ``sys.argv[1:]``) and :func:`run`; return the exit status.

    Raises: SystemExit(:data:`EXIT_USAGE`) from argparse for malformed arguments (nothing read).
    """
    args = build_parser().parse_args(argv)
    return run(
        args.root, args.pfs, args.timeout, args.drain_confirmed, out or sys.stdout, err or sys.stderr, writer
    )
