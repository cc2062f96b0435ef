"""Network-namespace chores of the lab, done by the ``ip`` command instead of in-process netlink.

The lab process holds live gRPC connections (the kubelet simulators talk to the plugins). Creating
a namespace or opening a netlink socket inside one through pyroute2 forks the calling Python
process and runs Python in the child, and a child forked while gRPC threads are busy can abort
before it finishes. ``ip`` is started with ``vfork``+``exec`` (no Python runs in the child), so
the lab uses it for the few namespace operations it makes itself: create/remove a named
namespace, set a link up, create a veth pair, and read the links and addresses of a namespace.
The services (plugin, guard, lab CNI plugin) keep using :mod:`sriov_dra.host.netlink` in their
own processes.

Namespaces are named (``/var/run/netns/<name>``) or given by path (read through ``nsenter``).
Every failure is an :class:`IpError` naming the command and ``ip``'s message.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from collections.abc import Sequence
from pathlib import Path
from typing import Final

NETNS_DIR: Final = Path("/var/run/netns")


class IpError(RuntimeError):
    """An ``ip`` command failed; the message has the command line and its stderr."""


def _ip(args: Sequence[str], *, netns: str | None = None, timeout_s: float = 30.0) -> str:
    argv = ["ip", *args]
    if netns is not None:
        path = Path(netns)
        argv = (
            ["ip", "-n", path.name, *args]
            if path.parent == NETNS_DIR or path.parent == Path("/run/netns")
            else ["nsenter", f"--net={netns}", "--", "ip", *args]
        )
    proc = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout_s)
    if proc.returncode != 0:
        raise IpError(f"`{' '.join(argv)}` failed ({proc.returncode}): {proc.stderr.strip()}")
    return proc.stdout


def add_netns(name: str) -> str:
    """Create the named namespace and return its path. Raises: :class:`IpError` (also when it exists)."""
    _ip(["netns", "add", name])
    return str(NETNS_DIR / name)


def del_netns(name: str) -> None:
    """Remove the named namespace; absent is fine. Raises: :class:`IpError`."""
    if (NETNS_DIR / name).exists():
        _ip(["netns", "del", name])


def set_up(netns: str, link: str) -> None:
    """Set ``link`` up inside ``netns`` (a path). Raises: :class:`IpError`."""
    _ip(["link", "set", link, "up"], netns=netns)


def add_veth(netns: str, name: str, peer: str) -> None:
    """Create the veth pair ``name``/``peer`` inside ``netns``. Raises: :class:`IpError`."""
    _ip(["link", "add", name, "type", "veth", "peer", "name", peer], netns=netns)


def addresses(netns: str) -> dict[str, list[str]]:
    """``{interface: [CIDR, ...]}`` of every link in ``netns`` (link-local IPv6 left out).

    Raises: :class:`IpError` (for example when the namespace does not exist).
    """
    out: dict[str, list[str]] = {}
    for link in json.loads(_ip(["-j", "address", "show"], netns=netns) or "[]"):
        cidrs = []
        for info in link.get("addr_info") or []:
            cidr = f"{info.get('local')}/{info.get('prefixlen')}"
            if not ipaddress.ip_interface(cidr).ip.is_link_local:
                cidrs.append(cidr)
        out[str(link.get("ifname"))] = cidrs
    return out


def link_names(netns: str) -> set[str]:
    """Names of every link in ``netns``. Raises: :class:`IpError`."""
    return set(addresses(netns))
