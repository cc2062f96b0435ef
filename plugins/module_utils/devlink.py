# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""A PF's eswitch mode as the kernel reports it, through iproute2's ``devlink`` command.

A managed node has no pyroute2, so ``sriov_facts`` runs ``devlink -j dev eswitch show
pci/<bdf>`` and maps the answer as the plugin's ``sriov_dra.host.devlink`` does: the mode named;
``legacy`` (said in the reason) when the kernel answers "Operation not supported" or "No such
device" (no eswitch to switch); ``None`` with the reason for anything else, never a guess. The
binary is looked up on ``PATH``, then ``/usr/sbin`` and ``/sbin`` (the lab's tests put a fake
first on ``PATH``). Standard library only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess

MODES = ("legacy", "switchdev")
"""The eswitch modes published (upstream ``consts.EswitchMode*``)."""

TIMEOUT_S = 10
"""How long one ``devlink`` call may take, in seconds."""

_NO_ESWITCH = ("Operation not supported", "No such device")
"""Kernel answers (strerror of EOPNOTSUPP, ENODEV) that mean the PF has no eswitch."""

_SBIN_DIRS = ("/usr/sbin", "/sbin")


def parse_eswitch_show(text, bdf):
    """The mode in ``devlink -j dev eswitch show pci/<bdf>`` output, or None when it names none.

    Shapes: ``text`` the command's stdout; returns ``"legacy"``, ``"switchdev"`` or None (not
    JSON, no entry for ``pci/<bdf>``, or a mode this code does not know). Never raises.
    """
    try:
        doc = json.loads(text)
    except (TypeError, ValueError, RecursionError):
        return None
    dev = doc.get("dev") if isinstance(doc, dict) else None
    entry = dev.get(f"pci/{bdf}") if isinstance(dev, dict) else None
    # Some iproute2 versions print a handle's attributes as a one-element list.
    if isinstance(entry, list) and len(entry) == 1:
        entry = entry[0]
    mode = entry.get("mode") if isinstance(entry, dict) else None
    return mode if mode in MODES else None


def classify_failure(stderr):
    """``(mode, reason)`` for a failed ``devlink`` call from its stderr.

    Returns ``("legacy", reason)`` for the kernel's "not supported"/"no such device" answers,
    else ``(None, reason)`` quoting what devlink said.
    """
    said = " ".join((stderr or "").split()) or "no message"
    for answer in _NO_ESWITCH:
        if answer in said:
            return "legacy", f"devlink: {answer} (no eswitch on this PF): legacy"
    return None, f"devlink failed: {said}"


def find_devlink():
    """The path of the ``devlink`` command (``PATH``, then ``/usr/sbin``, ``/sbin``), or None."""
    path = os.pathsep.join([os.environ.get("PATH", ""), *_SBIN_DIRS])
    return shutil.which("devlink", path=path)


def eswitch_mode(bdf, find=find_devlink, run=subprocess.run):
    """``(mode, reason)``: the PF's eswitch mode from the kernel, and why when it is not plain.

    Shapes: ``mode`` is ``"legacy"``, ``"switchdev"`` or None (unknown); ``reason`` is None when
    the kernel answered a mode, else a sentence (legacy by "not supported", or why unknown).
    Never raises: an unknown mode is a fact, not an error.
    """
    binary = find()
    if binary is None:
        return None, "devlink command not found (install iproute2): eswitch mode unknown"
    try:
        proc = run(
            [binary, "-j", "dev", "eswitch", "show", f"pci/{bdf}"],
            capture_output=True, text=True, timeout=TIMEOUT_S, check=False,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError) as exc:
        return None, f"devlink could not run ({exc}): eswitch mode unknown"
    if proc.returncode != 0:
        return classify_failure(proc.stderr)
    mode = parse_eswitch_show(proc.stdout, bdf)
    if mode is None:
        return None, f"devlink answered no known eswitch mode for pci/{bdf}: {proc.stdout.strip()[:200]!r}"
    return mode, None
