"""Netlink editors for the lab's VF stand-ins and the tests: **not shipped with the product**.

The product only reads links (``sriov_dra.host.netlink``); the lab builds its VFs from veth pairs,
moves them into sandboxes, sets addresses, routes and VF settings (its sriov-cni stand-in) and
makes named namespaces. Each editor opens its socket through the product's
:func:`sriov_dra.host.netlink.socket_in`, so it follows the same rules: the calling thread never
enters a namespace, a missing namespace is never created implicitly, and every failure is a
:class:`NetlinkError` (``sriov_dra.host.netlink.NetlinkError``) naming the operation, the
namespace and the errno. This is the one lab module that imports pyroute2 (``pyroute2.netns``;
an exception of the ``.importlinter`` netlink gate).
"""

from __future__ import annotations

import errno as errno_codes
import ipaddress
import os
from dataclasses import dataclass
from typing import Any, Final

from pyroute2 import netns

from sriov_dra.host import netlink

NetlinkError = netlink.NetlinkError


def _index(ipr: Any, name: str, op: str, netns_path: str | None) -> int:
    found = ipr.link_lookup(ifname=name)
    if not found:
        raise netlink.NetlinkError(
            f"{op}: no interface {name!r} in {netlink.describe(netns_path)}",
            op=op,
            netns_path=netns_path,
            errno=errno_codes.ENODEV,
        )
    return int(found[0])


def create_veth_pair(name: str, peer: str, *, netns_path: str | None = None) -> None:
    """Create the veth pair ``name``/``peer`` in one namespace. Raises: :class:`NetlinkError`."""
    with netlink.socket_in(netns_path, f"create veth {name}/{peer}") as ipr:
        ipr.link("add", ifname=name, kind="veth", peer=peer)


def delete_link(name: str, *, netns_path: str | None = None, missing_ok: bool = True) -> None:
    """Delete link ``name`` (a veth's peer goes with it). Raises: :class:`NetlinkError`.

    With ``missing_ok`` a link that vanishes between the lookup and the delete counts as absent:
    the kernel destroys a deleted namespace's devices (and their veth peers here) asynchronously,
    so a peer found a moment ago can be gone by the time the delete arrives (``ENODEV``).
    """
    op = f"delete link {name}"
    try:
        with netlink.socket_in(netns_path, op) as ipr:
            found = ipr.link_lookup(ifname=name)
            if not found:
                raise netlink.NetlinkError(
                    f"{op}: no such interface", op=op, netns_path=netns_path, errno=errno_codes.ENODEV
                )
            ipr.link("del", index=found[0])
    except netlink.NetlinkError as exc:
        if missing_ok and exc.errno == errno_codes.ENODEV:
            return
        raise


def set_up(name: str, *, netns_path: str | None = None, up: bool = True) -> None:
    """Set link ``name`` administratively up (or down). Raises: :class:`NetlinkError`."""
    op = f"set {name} {'up' if up else 'down'}"
    with netlink.socket_in(netns_path, op) as ipr:
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
    op = f"move {name} to {netlink.describe(target_netns)} as {new_name}"
    target_fd = os.open(target_netns or f"/proc/{os.getpid()}/ns/net", os.O_RDONLY)
    try:
        with netlink.socket_in(netns_path, op) as ipr:
            index = _index(ipr, name, op, netns_path)
            ipr.link("set", index=index, state="down")
            ipr.link("set", index=index, net_ns_fd=target_fd)
    finally:
        os.close(target_fd)
    if new_name != name:
        with netlink.socket_in(target_netns, op) as ipr:
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
    with netlink.socket_in(netns_path, op) as ipr:
        (msg,) = ipr.get_links(_index(ipr, pf, op, netns_path), ext_mask=1)
    table = msg.get_attr("IFLA_VFINFO_LIST")
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
        with netlink.socket_in(netns_path, op) as ipr:
            ipr.link("set", index=_index(ipr, pf, op, netns_path), vf={"vf": vf, **spec})


def add_address(name: str, cidr: str, *, netns_path: str | None = None) -> None:
    """Add address ``cidr`` (``10.0.0.2/24`` or IPv6) to link ``name``. Raises: :class:`NetlinkError`."""
    iface = ipaddress.ip_interface(cidr)
    op = f"add address {cidr} to {name}"
    with netlink.socket_in(netns_path, op) as ipr:
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
    with netlink.socket_in(netns_path, op) as ipr:
        kwargs: dict[str, Any] = {"dst": dst, "oif": _index(ipr, name, op, netns_path)}
        if gateway:
            kwargs["gateway"] = gateway
        ipr.route("add", **kwargs)


def create_netns(name: str) -> str:
    """Create the named namespace ``/var/run/netns/<name>`` and return its path.

    Raises: :class:`NetlinkError` (``EEXIST`` when it already exists).
    """
    path = str(netlink.NETNS_RUN_DIR / name)
    if os.path.exists(path):
        raise netlink.NetlinkError(
            f"network namespace {path} already exists",
            op="create netns",
            netns_path=path,
            errno=errno_codes.EEXIST,
        )
    try:
        netns.create(name)
    except OSError as exc:
        raise netlink.error(exc, "create netns", path) from exc
    return path


def remove_netns(name: str) -> None:
    """Unmount and remove the named namespace; absent counts as removed. Raises: :class:`NetlinkError`."""
    path = netlink.NETNS_RUN_DIR / name
    if not path.exists():
        return
    try:
        netns.remove(name)
    except OSError as exc:
        raise netlink.error(exc, "remove netns", str(path)) from exc
