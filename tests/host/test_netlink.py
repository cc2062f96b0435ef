"""Tests for sriov_dra.host.netlink on real network namespaces and veth pairs (root)."""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Iterator

import pytest
from tests import tiers

from sriov_dra.host import netlink
from sriov_dra_lab import netns
from sriov_dra_lab.fakes import net_edit


@pytest.fixture
def sandbox() -> Iterator[str]:
    """A fresh named network namespace (skips the host tier with the reason when it cannot be made)."""
    if os.geteuid() != 0:
        tiers.unavailable("host", "network namespaces need root")
    try:
        cm = netns.sandbox("nltest")
        path = cm.__enter__()
    except netlink.NetlinkError as exc:
        tiers.unavailable("host", f"cannot create a network namespace: {exc}")
    try:
        yield path
    finally:
        cm.__exit__(None, None, None)


@pytest.fixture
def vfs() -> Iterator[list[netns.LabVf]]:
    made = netns.create_vfs(["0000:03:00.1", "0000:03:00.2"], prefix="nlt")
    try:
        yield made
    finally:
        netns.delete_vfs(made)


def _self_netns() -> str:
    return os.readlink("/proc/self/ns/net")


def test_new_namespace_has_only_loopback(sandbox: str) -> None:
    [lo] = netlink.links(sandbox)
    assert lo.name == "lo" and lo.parent_bus is None and lo.parent_device is None


def test_missing_namespace_is_an_error_and_is_not_created(tmp_path: object) -> None:
    path = "/var/run/netns/sriov-dra-does-not-exist"
    with pytest.raises(netlink.NetlinkError) as info:
        netlink.links(path)
    assert info.value.errno == 2 and path in str(info.value)
    assert not os.path.exists(path)


def test_move_rename_address_and_return(sandbox: str, vfs: list[netns.LabVf]) -> None:
    vf = vfs[0]
    net_edit.move_link(vf.ifname, target_netns=sandbox, new_name="dra0")
    assert vf.ifname not in netlink.link_names(None)
    net_edit.add_address("dra0", "192.0.2.7/24", netns_path=sandbox)
    net_edit.set_up("dra0", netns_path=sandbox)
    net_edit.add_route("198.51.100.0/24", gateway="192.0.2.1", name="dra0", netns_path=sandbox)
    [link] = [link for link in netlink.links(sandbox) if link.name == "dra0"]
    assert link.kind == "veth" and link.up and "192.0.2.7/24" in link.addresses
    assert link.mac is not None and len(link.mac) == 17

    net_edit.move_link("dra0", target_netns=None, new_name=vf.ifname, netns_path=sandbox)
    assert "dra0" not in netlink.link_names(sandbox) and vf.ifname in netlink.link_names(None)


def test_reading_a_namespace_never_moves_the_calling_thread(sandbox: str) -> None:
    before = _self_netns()
    seen: list[str] = []

    def worker() -> None:
        netlink.links(sandbox)
        seen.append(os.readlink(f"/proc/self/task/{threading.get_native_id()}/ns/net"))

    thread = threading.Thread(target=worker)
    thread.start()
    thread.join()
    assert _self_netns() == before and seen == [before]


def test_unknown_link_errors_name_the_interface(sandbox: str) -> None:
    with pytest.raises(netlink.NetlinkError) as info:
        net_edit.set_up("nope0", netns_path=sandbox)
    assert "nope0" in str(info.value) and info.value.errno == 19


def test_delete_link_is_idempotent(vfs: list[netns.LabVf]) -> None:
    net_edit.delete_link(vfs[1].ifname)
    net_edit.delete_link(vfs[1].ifname)
    assert vfs[1].ifname not in netlink.link_names(None) and vfs[1].peer not in netlink.link_names(None)
    with pytest.raises(netlink.NetlinkError):
        net_edit.delete_link(vfs[1].ifname, missing_ok=False)


def test_delete_link_counts_a_link_gone_between_lookup_and_delete_as_absent(
    vfs: list[netns.LabVf], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A deleted namespace's veth peers vanish asynchronously (the kernel's netns cleanup), so
    the link can disappear after the lookup found it; ``missing_ok`` must still hold (CI saw
    ``delete link ...: No such device`` from a fixture's teardown)."""
    real_socket_in = netlink.socket_in
    victim = vfs[1].ifname

    class VanishingAfterLookup:
        def __init__(self, ipr: object) -> None:
            self._ipr = ipr

        def link_lookup(self, **kwargs: object) -> list[int]:
            found = self._ipr.link_lookup(**kwargs)  # type: ignore[attr-defined]
            with real_socket_in(None, "fault: delete behind the caller's back") as other:
                other.link("del", index=found[0])
            return list(found)

        def __getattr__(self, name: str) -> object:
            return getattr(self._ipr, name)

    @contextlib.contextmanager
    def socket_in(netns_path: str | None, op: str) -> Iterator[object]:
        with real_socket_in(netns_path, op) as ipr:
            yield VanishingAfterLookup(ipr)

    monkeypatch.setattr(net_edit.netlink, "socket_in", socket_in)
    net_edit.delete_link(victim)
    monkeypatch.undo()
    assert victim not in netlink.link_names(None)


def test_create_existing_namespace_is_refused(sandbox: str) -> None:
    with pytest.raises(netlink.NetlinkError) as info:
        net_edit.create_netns(os.path.basename(sandbox))
    assert info.value.errno == 17


SLOW_HELPER = """
import os, sys, time
from sriov_dra.host import netlink
# Every child forked from here on (pyroute2's namespace helper among them) starts 3 s late:
# longer than pyroute2's own 2 s wait for the helper, shorter than netlink.NETNS_HELPER_REPLY_S.
os.register_at_fork(after_in_child=lambda: time.sleep(3))
with netlink.socket_in(sys.argv[1], "list links") as ipr:
    names = [str(msg.get_attr("IFLA_IFNAME")) for msg in ipr.get_links()]
print(sorted(names))
"""

COUNTING_FORKS = """
import os, sys
from sriov_dra.host import netlink
forks = []
os.register_at_fork(before=lambda: forks.append(1))
names = sorted(link.name for link in netlink.links(sys.argv[1]))
carrier = sorted(netlink.carrier_states(sys.argv[1]))
print(names, carrier, len(forks))
"""


def test_reading_a_namespace_forks_no_process(sandbox: str) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", COUNTING_FORKS, sandbox], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['lo'] ['lo'] 0"


def test_a_read_that_fails_inside_the_namespace_names_it(
    sandbox: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refused(fd: int, flags: int = 0) -> None:  # FAULT INJECTION: setns refused, as without CAP_SYS_ADMIN
        raise PermissionError(1, "Operation not permitted")

    monkeypatch.setattr("pyroute2.netns.setns", refused)
    with pytest.raises(netlink.NetlinkError) as info:
        netlink.links(sandbox)
    assert info.value.errno == 1 and sandbox in str(info.value) and "list links" in str(info.value)


def test_a_namespace_helper_slower_than_pyroute2s_two_seconds_still_answers(sandbox: str) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", SLOW_HELPER, sandbox], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "['lo']"


def test_a_socket_that_fails_to_open_inside_a_namespace_leaves_no_descriptor_open(
    sandbox: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The constructor of pyroute2's socket fails after it opened its socket and event loop: the
    read is a NetlinkError naming the namespace, and nothing it opened stays open (garbage
    collection off, so only an explicit close frees them)."""
    import gc

    from pyroute2.iproute.linux import AsyncIPRoute

    opened_endpoint = AsyncIPRoute.setup_endpoint

    async def endpoint_set_up_then_failing(self: object, *args: object, **kwargs: object) -> None:
        # FAULT INJECTION (a fake at the library boundary): the endpoint is set up, then its
        # setup fails, as when the descriptor limit is reached half-way.
        await opened_endpoint(self, *args, **kwargs)
        raise OSError(errno.EMFILE, "Too many open files")

    monkeypatch.setattr(AsyncIPRoute, "setup_endpoint", endpoint_set_up_then_failing)
    gc.collect()
    gc.disable()
    try:
        before = len(os.listdir("/proc/self/fd"))
        for _ in range(5):
            with pytest.raises(netlink.NetlinkError) as info:
                netlink.links(sandbox)
            assert info.value.errno == errno.EMFILE and sandbox in str(info.value)
        assert len(os.listdir("/proc/self/fd")) == before
    finally:
        gc.enable()
