"""The eswitch mode comes from the kernel's devlink answer (host/devlink.py)."""

from __future__ import annotations

import errno
import logging

import pytest
from pyroute2.netlink.devlink import devlinkcmd
from pyroute2.netlink.exceptions import NetlinkError

from sriov_dra.core import identities
from sriov_dra.host import devlink

PF = identities.PciAddress("0000:03:00.0")


def kernel_reply(mode: int | None) -> devlinkcmd:
    """A reply as the kernel sends it: encoded by pyroute2's devlink codec, then decoded again."""
    msg = devlinkcmd()
    msg["cmd"] = 29
    msg["version"] = 1
    attrs = [("DEVLINK_ATTR_BUS_NAME", "pci"), ("DEVLINK_ATTR_DEV_NAME", str(PF))]
    if mode is not None:
        attrs.append(("DEVLINK_ATTR_ESWITCH_MODE", mode))
    msg["attrs"] = attrs
    msg.encode()
    parsed = devlinkcmd(msg.data)
    parsed.decode()
    return parsed


class KernelAnswers:
    """A labelled fault-injection double for the devlink socket: answers with replies or an errno."""

    prid = 0x20

    def __init__(self, *, replies: list[devlinkcmd] | None = None, error: int | None = None) -> None:
        self.replies, self.error, self.requests, self.closed = replies or [], error, [], False

    def nlm_request(self, msg, msg_type, msg_flags):
        self.requests.append(msg)
        if self.error is not None:
            raise NetlinkError(self.error, "kernel error")
        yield from self.replies

    def close(self) -> None:
        self.closed = True


@pytest.mark.parametrize(("raw", "mode"), [(0, "legacy"), (1, "switchdev")])
def test_eswitch_mode_is_the_kernels_devlink_answer(raw: int, mode: str) -> None:
    sock = KernelAnswers(replies=[kernel_reply(raw)])
    assert devlink.EswitchModes(open_socket=lambda: sock)(PF) == mode
    (request,) = sock.requests
    assert request["cmd"] == 29  # DEVLINK_CMD_ESWITCH_GET
    assert dict(request["attrs"]) == {"DEVLINK_ATTR_BUS_NAME": "pci", "DEVLINK_ATTR_DEV_NAME": str(PF)}


@pytest.mark.parametrize("code", [errno.EOPNOTSUPP, errno.ENODEV])
def test_kernel_not_supported_answer_is_legacy_explicitly(code: int) -> None:
    assert devlink.EswitchModes(open_socket=lambda: KernelAnswers(error=code))(PF) == "legacy"


@pytest.mark.parametrize("code", [errno.EPERM, errno.EINVAL])
def test_other_devlink_errors_are_unknown_not_guessed(code: int) -> None:
    assert devlink.EswitchModes(open_socket=lambda: KernelAnswers(error=code))(PF) is None


def test_reply_without_a_known_mode_is_unknown() -> None:
    assert devlink.EswitchModes(open_socket=lambda: KernelAnswers(replies=[kernel_reply(None)]))(PF) is None
    assert devlink.EswitchModes(open_socket=lambda: KernelAnswers(replies=[kernel_reply(7)]))(PF) is None


def test_socket_is_opened_once_and_closed_by_close() -> None:
    opened: list[KernelAnswers] = []

    def open_socket() -> KernelAnswers:
        opened.append(KernelAnswers(replies=[kernel_reply(1)]))
        return opened[-1]

    source = devlink.EswitchModes(open_socket=open_socket)
    assert source(PF) == "switchdev"
    opened[0].replies = [kernel_reply(0)]
    assert source(PF) == "legacy"
    source.close()
    assert len(opened) == 1 and opened[0].closed
    assert source(PF) is None


def test_this_kernel_answers_without_raising(caplog: pytest.LogCaptureFixture) -> None:
    """On the real kernel: no devlink family (ENOENT) or no instance for the address → never a raise."""
    caplog.set_level(logging.DEBUG, logger="sriov_dra.host.devlink")
    source = devlink.EswitchModes()
    try:
        answer = source(PF)
    finally:
        source.close()
    assert answer in (None, "legacy")
    if answer is None:
        assert any("devlink unavailable" in r.message for r in caplog.records), caplog.text
