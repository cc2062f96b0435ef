"""Netlink access to network namespaces: read a namespace's links (the product edits none).

The one gate to pyroute2. Every call opens its socket *inside* the target namespace, and the
calling thread never changes namespace: a reader (:func:`links`, :func:`link_names`,
:func:`carrier_states`) runs whole on a short-lived thread of its own that enters the namespace
(``setns``) and ends with the read, with no process forked (a fork of the guard's ~65 MiB process
made each post-ADD read take 5-10 ms instead of about 1 ms); the link editors' sockets
(:func:`socket_in`), used from the caller's thread, come from a helper pyroute2 forks that enters
the namespace and passes the socket back. A namespace is the path of its bind mount (the runtime's ``CNI_NETNS``) or ``None``
for the caller's own; opening never creates one. Readers serve the guard's post-ADD check and the
plugin's PF health; the lab's link editors open sockets through :func:`socket_in`. Library
errors become :class:`NetlinkError` naming the operation, the namespace and the errno.
"""

from __future__ import annotations

import contextlib
import errno as errno_codes
import os
import signal
import threading
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, TypeVar

from pyroute2 import IPRoute
from pyroute2 import config as _pyroute2_config
from pyroute2 import netns as _pyroute2_netns
from pyroute2.netlink.exceptions import NetlinkError as _PyNetlinkError

from sriov_dra.core import device_health

NETNS_RUN_DIR: Final = Path("/var/run/netns")
"""Where ``ip netns`` (and the lab) bind-mount named namespaces."""

IFF_UP: Final = 0x1
T = TypeVar("T")

NETNS_HELPER_REPLY_S: Final = 20.0
"""How long a namespace's forked pyroute2 helper may take to hand back its socket (seconds).

pyroute2 0.9 gives it 2 s (``pyroute2.config.default_communicate_timeout``) and then fails the call
with "no response from the child". Forking a service process of 80-120 MiB on a loaded node took
longer than that in the realvf tier (TCG guest, load 7-12), which would fail a guard ADD check or a
PF health read for no fault of the node; a bounded, longer wait keeps both correct. Set once here,
the one gate to pyroute2, when this module is imported."""

_pyroute2_config.default_communicate_timeout = max(
    float(_pyroute2_config.default_communicate_timeout), NETNS_HELPER_REPLY_S
)


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


def _missing(netns_path: str | None, op: str) -> NetlinkError | None:
    if netns_path is not None and not os.path.exists(netns_path):
        return NetlinkError(
            f"{op}: {_describe(netns_path)} does not exist (the sandbox may already be gone)",
            op=op,
            netns_path=netns_path,
            errno=errno_codes.ENOENT,
        )
    return None


def _read(netns_path: str | None, op: str, read: Callable[[Any], T]) -> T:
    """``read(ipr)`` on an IPRoute socket opened inside ``netns_path``; translate every library failure.

    A namespace other than the caller's own is entered by a thread started for this one read
    (pyroute2's ``setns`` on a descriptor of the path, never creating it), which opens, reads,
    closes and ends; so no thread that outlives the read ever changes namespace.
    """
    if netns_path is None:
        with _rtnl(None, op) as ipr:
            return read(ipr)
    if (missing := _missing(netns_path, op)) is not None:
        raise missing
    outcome: list[Any] = []

    def enter_and_read() -> None:
        try:
            fd = os.open(netns_path, os.O_RDONLY | os.O_CLOEXEC)
            try:
                _pyroute2_netns.setns(fd, flags=0)
            finally:
                os.close(fd)
            ipr = _opened()
            try:
                outcome.append((True, read(ipr)))
            finally:
                ipr.close()
        except (OSError, _PyNetlinkError, TimeoutError) as exc:
            outcome.append((False, _translate(exc, op, netns_path)))
        except BaseException as exc:  # handed to the caller's thread, which raises it
            outcome.append((False, exc))

    worker = threading.Thread(target=enter_and_read, name="netlink-netns-read", daemon=True)
    worker.start()
    worker.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    return typing.cast(T, value)


def _opened(**kwargs: Any) -> Any:
    """A new ``IPRoute(**kwargs)``; when its constructor fails, what it opened is closed before the error rises.

    pyroute2 0.9 leaves its socket and event loop open when the constructor fails (e.g. a path that
    is not a network namespace): the object is built first so the failure can close it.
    """
    ipr = IPRoute.__new__(IPRoute)
    try:
        ipr.__init__(**kwargs)
    except BaseException:
        with contextlib.suppress(Exception):
            ipr.close()
        raise
    return ipr


def _rtnl_socket(netns_path: str | None, op: str) -> Iterator[Any]:
    if (missing := _missing(netns_path, op)) is not None:
        raise missing
    try:
        ipr = _opened() if netns_path is None else _opened(netns=netns_path, flags=0)
    except (OSError, _PyNetlinkError, TimeoutError) as exc:
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

    def read(ipr: Any) -> tuple[LinkInfo, ...]:
        by_index: dict[int, list[str]] = {}
        for addr in ipr.get_addr():
            address = addr.get_attr("IFA_ADDRESS")
            if address:
                by_index.setdefault(int(addr["index"]), []).append(f"{address}/{addr['prefixlen']}")
        return tuple(
            _link_info(msg, tuple(by_index.get(int(msg["index"]), ())))
            for msg in sorted(ipr.get_links(), key=lambda m: int(m["index"]))
        )

    return _read(netns_path, "list links", read)


def link_names(netns_path: str | None) -> frozenset[str]:
    """Return the interface names of a namespace. Raises: as :func:`links`."""
    return _read(
        netns_path,
        "list links",
        lambda ipr: frozenset(str(msg.get_attr("IFLA_IFNAME")) for msg in ipr.get_links()),
    )


def carrier_states(netns_path: str | None = None) -> dict[str, device_health.PfLink]:
    """Return every link of a namespace by name with its ``IFF_UP``, ``IFLA_CARRIER`` and operstate.

    This is the kernel's answer for a PF's link (device health); one dump per call.
    Shapes: ``{"ens1f0": PfLink(admin_up=True, carrier=True, operstate="up")}``; operstate
    lowercase, ``"unknown"`` when the kernel sends none. Raises: :class:`NetlinkError`.
    """
    return _read(
        netns_path,
        "read link carrier",
        lambda ipr: {
            str(_attr(msg, "IFLA_IFNAME")): device_health.PfLink(
                admin_up=bool(int(msg["flags"]) & IFF_UP),
                carrier=_attr(msg, "IFLA_CARRIER") == 1,
                operstate=str(_attr(msg, "IFLA_OPERSTATE") or "unknown").lower(),
            )
            for msg in ipr.get_links()
        },
    )


# --- the seam for link editors the product does not ship ----------------------------------------


def socket_in(netns_path: str | None, op: str) -> contextlib.AbstractContextManager[Any]:
    """An IPRoute socket opened inside ``netns_path`` (None: the caller's own namespace).

    For link editors outside the product (the lab's ``sriov_dra_lab.fakes.net_edit``: veth pairs,
    moves, addresses, routes, VF settings, namespaces), under this module's rules: pyroute2's forked
    helper makes the socket (the calling thread never enters the namespace), a missing namespace
    is never created, and library failures inside the ``with`` block raise :class:`NetlinkError`
    naming ``op`` and the namespace.
    """
    return _rtnl(netns_path, op)


def error(exc: BaseException, op: str, netns_path: str | None) -> NetlinkError:
    """``exc`` (``OSError`` or a pyroute2 failure) as the :class:`NetlinkError` this module raises."""
    return _translate(exc, op, netns_path)


def describe(netns_path: str | None) -> str:
    """``the host namespace`` or ``network namespace <path>``, as every error message here names it."""
    return _describe(netns_path)
