"""Guest side of the realvf tier: real igb PFs and igbvf VFs of the QEMU guest (tests/realvf/vm.py).

These tests run only inside the guest (``SRIOV_DRA_REALVF_GUEST=1``; the host reports their
results through tests/realvf/test_guest.py). The session fixture :func:`real_pfs` gives each of the
two PFs :data:`NUM_VFS` VFs through the collection's ``numvfs`` rules (0 → 4, once per session:
it costs about 1.3 s per PF under TCG); the autouse :func:`_baseline` fixture puts every VF back on
igbvf with its netdev in the host namespace after each test, so one test's state never leaks
into the next. Raw facts (:func:`raw_vf`) are read straight from ``/sys`` with ``os`` calls, as the
independent answer the product code is compared with. The session fixtures :func:`api` (the host's
API server) and :func:`plugin` (the one plugin process of the session, started by the first test
that needs it) are :mod:`tests.realvf.guest.kubeplugin`'s.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

if os.environ.get("SRIOV_DRA_REALVF_GUEST") != "1":  # pragma: no cover - the host never collects guest/
    raise pytest.UsageError(
        "tests/realvf/guest runs only inside the realvf QEMU guest: run pytest tests/realvf (or -m realvf), "
        "which boots the guest and reports each of these tests as tests/realvf/test_guest.py"
    )

from tests.realvf.guest.realvfs import (
    HELD,
    NUM_VFS,
    ROOTS,
    SESSION_WRITES,
    VF_DRIVER,
    RawVf,
    RealPf,
    collection_module_utils,
    raw_pfs,
    raw_vfs,
    restore_baseline,
    vfs_ready,
    wait_until,
)

PYROUTE2_CHILD_REPLY_S = 60.0
"""pyroute2 enters a named netns through a forked child and gives up on it after 2 s
(``pyroute2.config.default_communicate_timeout``); forking this test process under TCG on a loaded
host took longer ("no response from the child"), so the guest's test process waits this long."""


def pytest_configure(config: pytest.Config) -> None:
    """Give pyroute2's netns child :data:`PYROUTE2_CHILD_REPLY_S` to answer in this process."""
    from pyroute2 import config as pyroute2_config

    pyroute2_config.default_communicate_timeout = PYROUTE2_CHILD_REPLY_S


@pytest.fixture(scope="session")
def real_pfs() -> list[RealPf]:
    """Both igb PFs with :data:`NUM_VFS` igbvf VFs each, set up once through ``numvfs`` rules, and
    their links up with carrier, as on a node (the plugin taints the VFs of a PF that is down
    ``NoSchedule``, and the scheduler then allocates none of them)."""
    mu = collection_module_utils()
    from ansible_collections.sriovnet.dra.plugins.module_utils import numvfs, sysfs

    assert mu is not None
    pfs = raw_pfs()
    assert [pf.pcie_root for pf in pfs] == sorted(ROOTS), pfs
    reader = sysfs.Sysfs("/")
    for pf in pfs:
        change = numvfs.plan(reader, pf.bdf, NUM_VFS, False)
        SESSION_WRITES[pf.bdf] = numvfs.converge(reader, change, VF_DRIVER, 30)
    for pf in pfs:
        wait_until(f"{NUM_VFS} igbvf VFs with netdevs on {pf.ifname}", lambda pf=pf: vfs_ready(pf))
    from sriov_dra.host import netlink
    from sriov_dra_lab.fakes import net_edit

    for pf in pfs:
        net_edit.set_up(pf.ifname)
    for pf in pfs:
        wait_until(f"{pf.ifname} up with carrier", lambda pf=pf: netlink.carrier_states()[pf.ifname].carrier)
    return pfs


@pytest.fixture(autouse=True)
def _baseline(real_pfs: list[RealPf]) -> Iterator[None]:
    """Fail a test that leaves VFs changed (after restoring them, so the next test starts clean).

    A VF in :data:`~tests.realvf.guest.realvfs.HELD` is one a module-scoped fixture keeps in a Pod
    netns across its module's tests on purpose; it is checked once the fixture gives it back."""
    before = {vf.bdf: vf for pf in real_pfs for vf in raw_vfs(pf)}
    yield
    after = {vf.bdf: vf for pf in real_pfs for vf in raw_vfs(pf)}
    # A rebind or a new VF count gives the netdevs new kernel names (no udev here): compare drivers
    # and "one netdev in this namespace", not names.
    if set(after) != set(before) or any(
        (after[b].driver, len(after[b].net or ())) != (before[b].driver, 1) for b in after if b not in HELD
    ):
        restore_baseline(real_pfs)
        pytest.fail(f"the test left VFs changed: before {sorted(before.values(), key=str)}, after {after}")


@pytest.fixture
def all_vfs(real_pfs: list[RealPf]) -> list[RawVf]:
    """Every VF of both PFs as raw sysfs shows it now, sorted by address."""
    return sorted((vf for pf in real_pfs for vf in raw_vfs(pf)), key=lambda v: v.bdf)


@pytest.fixture(scope="session")
def api() -> Iterator[object]:
    """An admin ApiClient for the host's API server (skips when the host started none)."""
    from tests.realvf.guest import kubeplugin

    yield from kubeplugin.open_api()


@pytest.fixture(scope="session")
def plugin(api: object, real_pfs: list[RealPf], tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    """The session's one plugin process, registered, with every VF advertised (kubeplugin.run_plugin)."""
    from tests.realvf.guest import kubeplugin

    yield from kubeplugin.run_plugin(api, real_pfs, tmp_path_factory.mktemp("plugin"))
