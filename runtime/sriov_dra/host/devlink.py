"""A PF's eswitch mode from the kernel's devlink generic-netlink family.

The question ``devlink dev eswitch show pci/<bdf>`` asks (``DEVLINK_CMD_ESWITCH_GET``). Upstream
dra-driver-sriov publishes ``legacy`` on any error; this module says which answer it got: the
mode the kernel names; ``legacy`` **explicitly** for ``EOPNOTSUPP`` (devlink without an eswitch)
and ``ENODEV`` (no devlink instance), since such a device cannot be put in switchdev; **unknown**
(``None``) for anything else, which discovery logs and falls back on. Each answer is logged once
per PF at debug. The socket opens lazily and is reused; the pyroute2 gate for devlink.
"""

from __future__ import annotations

import errno
import logging
import threading
from collections.abc import Callable
from typing import Any, Final

from pyroute2 import DL
from pyroute2.netlink import NLM_F_REQUEST
from pyroute2.netlink.devlink import DEVLINK_NAMES, devlinkcmd
from pyroute2.netlink.exceptions import NetlinkError

from sriov_dra.core import identities

LEGACY: Final = "legacy"
SWITCHDEV: Final = "switchdev"
MODES: Final = {0: LEGACY, 1: SWITCHDEV}
"""``enum devlink_eswitch_mode`` of the kernel's uapi ``linux/devlink.h``."""
NOT_SUPPORTED: Final = frozenset({errno.EOPNOTSUPP, errno.ENODEV})
"""Errnos that mean "this device has no eswitch to switch": published as ``legacy``."""


def eswitch_request(pf_bdf: str) -> devlinkcmd:
    """Build the ``DEVLINK_CMD_ESWITCH_GET`` request for the PCI device ``pf_bdf``.

    Shapes: ``pf_bdf`` a full PCI address (``0000:03:00.0``); returns the unencoded message.
    """
    msg = devlinkcmd()
    msg["cmd"] = DEVLINK_NAMES["DEVLINK_CMD_ESWITCH_GET"]
    msg["version"] = 1
    msg["attrs"] = [("DEVLINK_ATTR_BUS_NAME", "pci"), ("DEVLINK_ATTR_DEV_NAME", pf_bdf)]
    return msg


def decode_mode(replies: Any) -> str | None:
    """The eswitch mode carried by the kernel's replies to :func:`eswitch_request`.

    Shapes: ``replies`` an iterable of decoded devlink messages; returns ``legacy``,
    ``switchdev``, or None when no reply carries a known ``DEVLINK_ATTR_ESWITCH_MODE``.
    """
    for reply in replies or ():
        raw = reply.get_attr("DEVLINK_ATTR_ESWITCH_MODE")
        if raw is not None:
            return MODES.get(int(raw))
    return None


def open_devlink() -> DL:
    """Open a devlink generic-netlink socket (``pyroute2.DL``).

    Raises: NetlinkError ``ENOENT`` when the kernel has no devlink family (no
    ``CONFIG_NET_DEVLINK``), OSError when no netlink socket can be made. pyroute2 0.9 leaves the
    socket and its event loop open when the family lookup fails inside the constructor, so this
    closes the half-built object before re-raising (otherwise they leak until garbage collection).
    """
    sock = DL.__new__(DL)
    try:
        sock.__init__()
    except BaseException:
        sock.close()
        raise
    return sock


class EswitchModes:
    """The production :class:`sriov_dra.host.discovery.EswitchModeSource`: asks devlink.

    Call with a PF's PCI address; returns ``legacy``/``switchdev`` or None (unknown: no devlink
    family, a permission error, an unknown mode, a malformed reply). Thread-safe (one question at a time on the shared socket). Never raises
    for a kernel answer; a closed source answers None.
    """

    def __init__(
        self, *, log: logging.Logger | None = None, open_socket: Callable[[], Any] | None = None
    ) -> None:
        """``open_socket`` opens the devlink socket (``pyroute2.DL``); tests inject kernel errors there."""
        self._open_socket = open_socket or open_devlink
        self._log = log or logging.getLogger("sriov_dra.host.devlink")
        self._lock = threading.Lock()
        self._socket: Any = None
        self._unavailable: str | None = None
        self._closed = False
        self._seen: set[tuple[str, str]] = set()

    def __call__(self, pf_bdf: identities.PciAddress) -> str | None:
        with self._lock:
            if self._closed:
                return None
            sock = self._open()
            if sock is None:
                return None
            try:
                answer = decode_mode(
                    sock.nlm_request(eswitch_request(pf_bdf), msg_type=sock.prid, msg_flags=NLM_F_REQUEST)
                )
                why = "kernel answer" if answer else "reply without a known eswitch mode"
            except NetlinkError as exc:
                if exc.code in NOT_SUPPORTED:
                    answer, why = LEGACY, f"kernel says {errno.errorcode.get(exc.code, exc.code)}: no eswitch"
                else:
                    answer, why = None, f"devlink error {exc.code}: {exc}"
            self._note(pf_bdf, answer, why)
            return answer

    def close(self) -> None:
        """Release the devlink socket; later questions answer None."""
        with self._lock:
            self._closed = True
            if self._socket is not None:
                self._socket.close()
                self._socket = None

    def _open(self) -> Any:
        if self._socket is None and self._unavailable is None:
            try:
                self._socket = self._open_socket()
            except (NetlinkError, OSError) as exc:
                # The family is registered only when the kernel has CONFIG_NET_DEVLINK (ENOENT otherwise).
                self._unavailable = f"no devlink generic-netlink family ({exc})"
                self._log.info(
                    "devlink unavailable: eswitch modes are unknown",
                    extra={"op": "discovery", "reason": self._unavailable},
                )
        return self._socket

    def _note(self, pf_bdf: str, answer: str | None, why: str) -> None:
        key = (pf_bdf, f"{answer}:{why}")
        if key not in self._seen:
            self._seen.add(key)
            self._log.debug(
                "devlink eswitch mode",
                extra={"op": "discovery", "pci": pf_bdf, "mode": answer or "unknown", "reason": why},
            )
