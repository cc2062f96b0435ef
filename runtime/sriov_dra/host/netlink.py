"""Netlink access to network namespaces: list a namespace's links, and the few link edits the lab needs.

This module is the one gate to pyroute2 (STYLE.md §1). Every call opens its netlink socket *inside*
the target namespace: pyroute2 forks a short-lived helper that enters the namespace, creates the
socket and passes its file descriptor back, so the calling thread never changes namespace (a
leaked ``setns`` would corrupt every later call on a daemon thread). A namespace is named by the
path of its bind mount (``/var/run/netns/<name>``, the runtime's ``CNI_NETNS``) or ``None`` for
the caller's own namespace. Opening never creates a missing namespace.

Readers (:func:`links`, :func:`link_names`) serve the guard's post-ADD check and
:func:`carrier_states` the plugin's PF health; the editors (veth pairs, moving and renaming a
link, addresses, namespaces) serve the lab's VF stand-in and the tests. Errors from the library
never leak: they become :class:`NetlinkError` naming the operation,
the namespace and the errno.

It must never enter a namespace on the calling thread, create a namespace implicitly, or touch a
link it was not named.
"""

from __future__ import annotations

import contextlib
import errno as errno_codes
import ipaddress
import os
import signal
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from pyroute2 import IPRoute, netns
from pyroute2.netlink.exceptions import NetlinkError as _PyNetlinkError

from sriov_dra.core import devicehealth

NETNS_RUN_DIR: Final = Path("/var/run/netns")
"""Where ``ip netns`` (and the lab) bind-mount named namespaces."""

IFF_UP: Final = 0x1


class NetlinkError(Exception):
    """A netlink operation failed.

    ``errno`` is the kernel's error number (0 when unknown); ``netns`` the namespace path
    (``None`` for the caller's own namespace).
    """

    def __init__(self, message: str, *, op: str, netns_path: str | None, errno: int = 0) -> None:
        super().__init__(message)
        self.op = op
        self.netns = netns_path
        self.errno = errno


@dataclass(frozen=True)
class LinkInfo:
    """One network interface as the kernel reports it inside a namespace.

    Shapes: ``mac`` lowercase ``aa:bb:...`` or ``None``; ``kind`` the rtnetlink kind (``veth``,
    ``macvlan``, ...; ``None`` for physical devices); ``parent_bus``/``parent_device`` the kernel's
    ``IFLA_PARENT_DEV_BUS_NAME``/``IFLA_PARENT_DEV_NAME`` (``"pci"``, ``"0000:03:00.1"``) when the
    device has a bus parent, else ``None``; ``addresses`` CIDR strings in kernel order.
    """

    index: int
    name: str
    kind: str | None
    mac: str | None
    up: bool
    parent_bus: str | None
    parent_device: str | None
    addresses: tuple[str, ...]


def _describe(netns_path: str | None) -> str:
    return "the host namespace" if netns_path is None else f"network namespace {netns_path}"


_OPENING = threading.local()
"""``netns`` is True on a thread while it uses an IPRoute that pyroute2 may fork a helper for."""


def _plain_signals_in_netns_helper() -> None:
    """In a child forked while this thread opened a namespace: SIGINT/SIGTERM back to their defaults.

    pyroute2 enters a namespace through a forked helper and ends it with SIGTERM. The fork copies
    the parent's Python signal handlers, so a handler that raises (the CLI turns SIGTERM into
    KeyboardInterrupt) would run in the helper and unwind the *parent's* copied stack in the
    child: its ``finally`` blocks ran there and stopped the lab's processes under the real parent.
    With the defaults the helper just dies. Other forks of the process are left alone.
    """
    if getattr(_OPENING, "netns", False):
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, signal.SIG_DFL)


os.register_at_fork(after_in_child=_plain_signals_in_netns_helper)


@contextlib.contextmanager
def _rtnl(netns_path: str | None, op: str) -> Iterator[Any]:
    """Yield an IPRoute socket opened inside ``netns_path``; translate every library failure."""
    previous = getattr(_OPENING, "netns", False)
    _OPENING.netns = netns_path is not None
    try:
        yield from _rtnl_socket(netns_path, op)
    finally:
        _OPENING.netns = previous


def _rtnl_socket(netns_path: str | None, op: str) -> Iterator[Any]:
    if netns_path is not None and not os.path.exists(netns_path):
        raise NetlinkError(
            f"{op}: {_describe(netns_path)} does not exist (the sandbox may already be gone)",
            op=op,
            netns_path=netns_path,
            errno=errno_codes.ENOENT,
        )
    # pyroute2 0.9 leaves its sockets and event loop open when the constructor fails (e.g. a
    # path that is not a network namespace): build the object first so the failure can close it.
    ipr = IPRoute.__new__(IPRoute)
    try:
        if netns_path is None:
            ipr.__init__()
        else:
            ipr.__init__(netns=netns_path, flags=0)
    except (OSError, _PyNetlinkError, TimeoutError) as exc:
        with contextlib.suppress(Exception):
            ipr.close()
        raise _translate(exc, op, netns_path) from exc
    try:
        yield ipr
    except (OSError, _PyNetlinkError) as exc:
        raise _translate(exc, op, netns_path) from exc
    finally:
        ipr.close()


def _translate(exc: BaseException, op: str, netns_path: str | None) -> NetlinkError:
    code = int(getattr(exc, "code", 0) or getattr(exc, "errno", 0) or 0)
    text = os.strerror(code) if code else str(exc)
    return NetlinkError(f"{op} in {_describe(netns_path)}: {text}", op=op, netns_path=netns_path, errno=code)


def _attr(msg: Any, name: str) -> Any:
    return msg.get_attr(name)


def _kind(msg: Any) -> str | None:
    info = _attr(msg, "IFLA_LINKINFO")
    if info is None:
        return None
    kind = info.get_attr("IFLA_INFO_KIND")
    return str(kind) if kind else None


def _link_info(msg: Any, addresses: tuple[str, ...]) -> LinkInfo:
    mac = _attr(msg, "IFLA_ADDRESS")
    bus = _attr(msg, "IFLA_PARENT_DEV_BUS_NAME")
    parent = _attr(msg, "IFLA_PARENT_DEV_NAME")
    return LinkInfo(
        index=int(msg["index"]),
        name=str(_attr(msg, "IFLA_IFNAME")),
        kind=_kind(msg),
        mac=str(mac).lower() if mac else None,
        up=bool(int(msg["flags"]) & IFF_UP),
        parent_bus=str(bus) if bus else None,
        parent_device=str(parent) if parent else None,
        addresses=addresses,
    )


def links(netns_path: str | None) -> tuple[LinkInfo, ...]:
    """Return every link of a namespace with its addresses, in kernel index order.

    Shapes: see :class:`LinkInfo`. Raises: :class:`NetlinkError` (``errno`` ENOENT when the
    namespace path does not exist).
    """
    with _rtnl(netns_path, "list links") as ipr:
        by_index: dict[int, list[str]] = {}
        for addr in ipr.get_addr():
            address = addr.get_attr("IFA_ADDRESS")
            if address:
                by_index.setdefault(int(addr["index"]), []).append(f"{address}/{addr['prefixlen']}")
        return tuple(
            _link_info(msg, tuple(by_index.get(int(msg["index"]), ())))
            for msg in sorted(ipr.get_links(), key=lambda m: int(m["index"]))
        )


def link_names(netns_path: str | None) -> frozenset[str]:
    """Return the interface names of a namespace. Raises: as :func:`links`."""
    with _rtnl(netns_path, "list links") as ipr:
        return frozenset(str(msg.get_attr("IFLA_IFNAME")) for msg in ipr.get_links())


def carrier_states(netns_path: str | None = None) -> dict[str, devicehealth.PfLink]:
    """Return every link of a namespace by name with its ``IFF_UP``, ``IFLA_CARRIER`` and operstate.

    This is the kernel's answer for a PF's link (device health); one dump per call.
    Shapes: ``{"ens1f0": PfLink(admin_up=True, carrier=True, operstate="up")}``; operstate
    lowercase, ``"unknown"`` when the kernel sends none. Raises: :class:`NetlinkError`.
    """
    with _rtnl(netns_path, "read link carrier") as ipr:
        return {
            str(_attr(msg, "IFLA_IFNAME")): devicehealth.PfLink(
                admin_up=bool(int(msg["flags"]) & IFF_UP),
                carrier=_attr(msg, "IFLA_CARRIER") == 1,
                operstate=str(_attr(msg, "IFLA_OPERSTATE") or "unknown").lower(),
            )
            for msg in ipr.get_links()
        }


def _index(ipr: Any, name: str, op: str, netns_path: str | None) -> int:
    found = ipr.link_lookup(ifname=name)
    if not found:
        raise NetlinkError(
            f"{op}: no interface {name!r} in {_describe(netns_path)}",
            op=op,
            netns_path=netns_path,
            errno=errno_codes.ENODEV,
        )
    return int(found[0])


def create_veth_pair(name: str, peer: str, *, netns_path: str | None = None) -> None:
    """Create the veth pair ``name``/``peer`` in one namespace. Raises: :class:`NetlinkError`."""
    with _rtnl(netns_path, f"create veth {name}/{peer}") as ipr:
        ipr.link("add", ifname=name, kind="veth", peer=peer)


def delete_link(name: str, *, netns_path: str | None = None, missing_ok: bool = True) -> None:
    """Delete link ``name`` (a veth's peer goes with it). Raises: :class:`NetlinkError`."""
    op = f"delete link {name}"
    with _rtnl(netns_path, op) as ipr:
        found = ipr.link_lookup(ifname=name)
        if not found:
            if missing_ok:
                return
            raise NetlinkError(
                f"{op}: no such interface", op=op, netns_path=netns_path, errno=errno_codes.ENODEV
            )
        ipr.link("del", index=found[0])


def set_up(name: str, *, netns_path: str | None = None, up: bool = True) -> None:
    """Set link ``name`` administratively up (or down). Raises: :class:`NetlinkError`."""
    op = f"set {name} {'up' if up else 'down'}"
    with _rtnl(netns_path, op) as ipr:
        ipr.link("set", index=_index(ipr, name, op, netns_path), state="up" if up else "down")


def move_link(
    name: str,
    *,
    target_netns: str | None,
    new_name: str,
    netns_path: str | None = None,
) -> None:
    """Move link ``name`` from ``netns_path`` into ``target_netns`` and name it ``new_name`` there.

    The link is set down, moved, renamed inside the target (so a name taken only in the source
    namespace cannot collide), and left down. ``target_netns=None`` means the caller's own
    namespace (used to return a link from a sandbox).
    Raises: :class:`NetlinkError`; on a failed rename the link stays in the target namespace
    under its old name.
    """
    op = f"move {name} to {_describe(target_netns)} as {new_name}"
    target_fd = os.open(target_netns or f"/proc/{os.getpid()}/ns/net", os.O_RDONLY)
    try:
        with _rtnl(netns_path, op) as ipr:
            index = _index(ipr, name, op, netns_path)
            ipr.link("set", index=index, state="down")
            ipr.link("set", index=index, net_ns_fd=target_fd)
    finally:
        os.close(target_fd)
    if new_name != name:
        with _rtnl(target_netns, op) as ipr:
            ipr.link("set", index=_index(ipr, name, op, target_netns), ifname=new_name)


VF_LINK_STATES: Final = {"auto": 0, "enable": 1, "disable": 2}
"""``IFLA_VF_LINK_STATE`` values by the names ``ip link set ... vf N state`` and sriov-cni's
``link_state`` use."""


@dataclass(frozen=True)
class VfState:
    """One VF as its PF's VF table (``ip link show <pf>``, ``IFLA_VFINFO_LIST``) reports it.

    Shapes: ``vf`` the VF index; ``mac`` lowercase; ``vlan``/``qos`` 0 when none; ``spoofchk``,
    ``trust`` and ``link_state`` (0 auto, 1 enable, 2 disable) ``None`` when the driver reports
    none; rates in Mbit/s (0 = no limit), ``None`` when not reported.
    """

    vf: int
    mac: str | None
    vlan: int
    qos: int
    spoofchk: bool | None
    trust: bool | None
    link_state: int | None
    min_tx_rate: int | None
    max_tx_rate: int | None


def _vf_field(info: Any, nla: str, key: str) -> int | None:
    value = info.get_attr(nla)
    return None if value is None else int(value[key])


def vf_states(pf: str, *, netns_path: str | None = None) -> tuple[VfState, ...]:
    """Return the VF table of PF link ``pf`` (netlink ``RTEXT_FILTER_VF``), by VF index.

    Raises: :class:`NetlinkError` (no such link, netlink failure).
    """
    op = f"read the VF table of {pf}"
    with _rtnl(netns_path, op) as ipr:
        (msg,) = ipr.get_links(_index(ipr, pf, op, netns_path), ext_mask=1)
    table = _attr(msg, "IFLA_VFINFO_LIST")
    out: list[VfState] = []
    for info in table.get_attrs("IFLA_VF_INFO") if table is not None else ():
        mac = info.get_attr("IFLA_VF_MAC")
        vlan = info.get_attr("IFLA_VF_VLAN") or {}
        spoofchk, trust = (
            _vf_field(info, "IFLA_VF_SPOOFCHK", "spoofchk"),
            _vf_field(info, "IFLA_VF_TRUST", "trust"),
        )
        rate = info.get_attr("IFLA_VF_RATE")
        out.append(
            VfState(
                vf=int(mac["vf"]) if mac is not None else len(out),
                mac=str(mac["mac"]).lower() if mac is not None else None,
                vlan=int(vlan.get("vlan", 0)),
                qos=int(vlan.get("qos", 0)),
                # The kernel reports -1 (as an unsigned 2**32-1) when the driver does not say.
                spoofchk=None if spoofchk in (None, 2**32 - 1) else bool(spoofchk),
                trust=None if trust in (None, 2**32 - 1) else bool(trust),
                link_state=_vf_field(info, "IFLA_VF_LINK_STATE", "link_state"),
                min_tx_rate=None if rate is None else int(rate["min_tx_rate"]),
                max_tx_rate=None if rate is None else int(rate["max_tx_rate"]),
            )
        )
    return tuple(sorted(out, key=lambda state: state.vf))


def set_vf(
    pf: str,
    vf: int,
    *,
    vlan: int | None = None,
    qos: int = 0,
    spoofchk: bool | None = None,
    trust: bool | None = None,
    link_state: int | None = None,
    min_tx_rate: int | None = None,
    max_tx_rate: int | None = None,
    netns_path: str | None = None,
) -> None:
    """Set VF ``vf``'s settings through its PF link ``pf``, as ``ip link set <pf> vf <vf> ...`` does.

    Only the settings given are sent, each in its own request (a driver that refuses one, e.g.
    igb's ``EOPNOTSUPP`` for link state, fails that one only). ``vlan`` with ``qos``; rates in
    Mbit/s, sent together when either is given (the other as 0, no limit); ``link_state`` one of
    :data:`VF_LINK_STATES`' values.
    Raises: :class:`NetlinkError` naming the PF, the VF and the setting.
    """
    requests: list[tuple[str, dict[str, Any]]] = []
    if vlan is not None:
        requests.append((f"vlan {vlan} qos {qos}", {"vlan": {"vlan": vlan, "qos": qos}}))
    if spoofchk is not None:
        requests.append((f"spoofchk {'on' if spoofchk else 'off'}", {"spoofchk": int(spoofchk)}))
    if trust is not None:
        requests.append((f"trust {'on' if trust else 'off'}", {"trust": int(trust)}))
    if link_state is not None:
        requests.append((f"state {link_state}", {"link_state": link_state}))
    if min_tx_rate is not None or max_tx_rate is not None:
        rate = {"min_tx_rate": min_tx_rate or 0, "max_tx_rate": max_tx_rate or 0}
        requests.append(
            (f"min_tx_rate {rate['min_tx_rate']} max_tx_rate {rate['max_tx_rate']}", {"rate": rate})
        )
    for what, spec in requests:
        op = f"set {pf} vf {vf} {what}"
        with _rtnl(netns_path, op) as ipr:
            ipr.link("set", index=_index(ipr, pf, op, netns_path), vf={"vf": vf, **spec})


def add_address(name: str, cidr: str, *, netns_path: str | None = None) -> None:
    """Add address ``cidr`` (``10.0.0.2/24`` or IPv6) to link ``name``. Raises: :class:`NetlinkError`."""
    iface = ipaddress.ip_interface(cidr)
    op = f"add address {cidr} to {name}"
    with _rtnl(netns_path, op) as ipr:
        ipr.addr(
            "add",
            index=_index(ipr, name, op, netns_path),
            address=str(iface.ip),
            prefixlen=iface.network.prefixlen,
        )


def add_route(dst: str, *, gateway: str | None, name: str, netns_path: str | None = None) -> None:
    """Add a route to ``dst`` (CIDR) via ``gateway`` (or on-link) out of ``name``.

    Raises: :class:`NetlinkError`.
    """
    op = f"add route {dst} via {gateway or 'link'} dev {name}"
    with _rtnl(netns_path, op) as ipr:
        kwargs: dict[str, Any] = {"dst": dst, "oif": _index(ipr, name, op, netns_path)}
        if gateway:
            kwargs["gateway"] = gateway
        ipr.route("add", **kwargs)


def create_netns(name: str) -> str:
    """Create the named namespace ``/var/run/netns/<name>`` and return its path.

    Raises: :class:`NetlinkError` (``EEXIST`` when it already exists).
    """
    path = str(NETNS_RUN_DIR / name)
    if os.path.exists(path):
        raise NetlinkError(
            f"network namespace {path} already exists",
            op="create netns",
            netns_path=path,
            errno=errno_codes.EEXIST,
        )
    try:
        netns.create(name)
    except OSError as exc:
        raise _translate(exc, "create netns", path) from exc
    return path


def remove_netns(name: str) -> None:
    """Unmount and remove the named namespace; absent counts as removed. Raises: :class:`NetlinkError`."""
    path = NETNS_RUN_DIR / name
    if not path.exists():
        return
    try:
        netns.remove(name)
    except OSError as exc:
        raise _translate(exc, "remove netns", str(path)) from exc
