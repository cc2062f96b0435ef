"""The CNI chain on a real VF: guard → Multus thin → sriov-cni (the pinned release) → host-local.

The VF comes from a claim the session's plugin prepared (its shadow NAD and the Pod's selections
on the host's API server, :mod:`tests.realvf.guest.kubeplugin`). The runtime's side is the lab's
libcni (``sriov_dra_lab.cni``) running the first config of the CNI conf dir: the guard's
conflist, installed by ``sriov-dra-guard install`` (its entry point, run in this process) with a
``loopback`` primary network and the plugin's checkpoint, which records the Pod's binding. The guard shim
asks the guard daemon (``sriov-dra-guard serve``,
started here), which runs the pinned Multus thin binary; Multus reads the Pod and the shadow from
the API server and runs the pinned ``sriov`` binary, which moves the VF, programs its settings
through the PF and gets the address from ``host-local`` (all from the run image).

The module prepares one claim (its template NAD sets the chain network's :data:`VF_SETTINGS`) and
installs the chain once (module-scoped fixtures, an exec of the Python guard shim costs seconds of
imports under TCG) and uses two sandboxes of its Pod, in file order (the realvf tier keeps the
in-module order): the first is deleted before its DEL, which leaves the VF in the host as
``dra0`` with a stale sriov-cni allocation record, as sriov-cni's DEL does; the claim is then
unprepared and prepared again on that VF, and the second sandbox (:func:`in_use`, in
:data:`realvfs.HELD` while it is) takes the VF under that name and holds it across the three
tests that follow: its ADD's VF settings, a second ADD on its VF refused, and its DEL. The PF's
VF table is read with iproute2 (:func:`realvfs.vf_table_line`).
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from kubernetes import client
from tests.realvf import kubeapi
from tests.realvf.guest import kubeplugin, realvfs, sriovcni

from sriov_dra.guard import main as guard_main
from sriov_dra.host import netlink
from sriov_dra.kubeletapi import messages
from sriov_dra_lab import cni, guard
from sriov_dra_lab.fakes import net_edit
from sriov_dra_rules import names

CNI_DIR = realvfs.REPO / ".realvf-cni"
PRIMARY = "10-realvf-primary.conflist"
BINARIES = ("multus", "loopback", "host-local", "sriov")
VF_SETTINGS = {"vlan": 100, "spoofchk": "off", "trust": "on"}
"""The chain network's VF settings (the template NAD's sriov config; the shadows carry them)."""


@dataclass
class Chain:
    """The node's CNI bin and conf dirs with the guard installed (its daemon runs while the fixture lives)."""

    bin_dir: Path
    conf_dir: Path

    def run(
        self, command: str, attachment: cni.Attachment, prev: dict[str, object] | None = None
    ) -> cni.CniResult:
        """``command`` as the runtime runs it: the first config of the conf dir (the guard's)."""
        network = cni.load_network(cni.runtime_choice(self.conf_dir))
        return cni.run_network(
            network, command, attachment, bin_dirs=[self.bin_dir], prev_result=prev, timeout_s=240.0
        )


@pytest.fixture(scope="module")
def chain(plugin: kubeplugin.Plugin, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Chain]:
    """The bin dir (pinned binaries, the guard shim), the guard's conflist, its daemon."""
    missing = [n for n in BINARIES if not os.access(CNI_DIR / n, os.X_OK)]
    if missing:
        pytest.skip(f"{missing} not in the run image (build the pinned CNI plugins: make setup)")
    tmp_path = tmp_path_factory.mktemp("chain")
    bin_dir, conf_dir = tmp_path / "bin", tmp_path / "net.d"
    commands = {name: [str(CNI_DIR / name)] for name in BINARIES}
    cni.build_bin_dir(bin_dir, commands)
    conf_dir.mkdir()
    (conf_dir / PRIMARY).write_text(
        json.dumps({"cniVersion": "1.0.0", "name": "realvf-primary", "plugins": [{"type": "loopback"}]})
    )
    socket = tmp_path / "guard.sock"
    kubeconfig = os.environ["SRIOV_DRA_REALVF_KUBECONFIG"]
    daemon = guard.GuardDaemon(
        socket_path=socket,
        kubeconfig=Path(kubeconfig),
        log_path=tmp_path / "guard.log",
        node_name=kubeapi.NODE_NAME,
    )
    daemon.start(timeout_s=240.0)
    try:
        # The installer's own entry point, in this process: a second interpreter start costs ~15 s
        # of imports under TCG, and the command line is the same.
        multus = {"kubeconfig": kubeconfig, "config": {"cniDir": str(tmp_path / "multus-cache")}}
        status = guard_main.main(
            [
                "install",
                f"--bin-dir={bin_dir}",
                f"--conf-dir={conf_dir}",
                "--mode=thin",
                f"--primary-config={conf_dir / PRIMARY}",
                f"--socket={socket}",
                f"--interpreter={sys.executable}",
                f"--multus={json.dumps(multus)}",
                f"--plugin-checkpoint={plugin.state_dir / 'checkpoint.json'}",
                f"--multus-master-cni={PRIMARY}",
                f"--autoconfig-dir={conf_dir}",
            ]
        )
        assert status == 0, "sriov-dra-guard install reported problems (its output is above)"
        yield Chain(bin_dir, conf_dir)
    finally:
        daemon.stop()


@dataclass
class Prepared:
    """The module's Pod with its prepared claim of one VF: the shadow, the VF and its PF's VF table."""

    workload: kubeplugin.Workload
    pod_uid: str
    shadow: str
    network: str
    """The CNI network name of the shadow's config (the template's ``name``)."""
    bdf: str
    name: str
    """The VF's netdev name in the host namespace before the module's first ADD."""
    pf: str
    index: int
    """The VF's index in the PF's VF table."""
    idle_line: str
    """The VF's line of ``ip link show <pf>`` while no sandbox uses it."""
    host_local: Path

    def allocations(self) -> list[Path]:
        """host-local's address files of the rail's subnet."""
        return sorted(self.host_local.rglob("10.56.*"))

    def table_line(self) -> str:
        return realvfs.vf_table_line(self.pf, self.index)


@dataclass
class Sandbox:
    """One Pod sandbox of the runtime: its netns and the attachment the runtime's ADD/DEL carry."""

    netns_name: str
    att: cni.Attachment
    added: cni.CniResult | None = None
    deleted: bool = field(default=False)
    host_name: str | None = None
    """The VF's netdev name in the host namespace before this sandbox's ADD."""

    @property
    def netns(self) -> str:
        return self.att.netns

    def inside(self) -> list[netlink.LinkInfo]:
        """The links of the sandbox's netns other than ``lo``."""
        return [link for link in netlink.links(self.netns) if link.name != "lo"]

    def remove_netns(self) -> None:
        if (netlink.NETNS_RUN_DIR / self.netns_name).exists():
            net_edit.remove_netns(self.netns_name)


def new_sandbox(prepared: Prepared, chain: Chain) -> Sandbox:
    """A new netns and container ID for the module's Pod (what the runtime makes for each sandbox)."""
    name = f"realvf-{uuid.uuid4().hex[:8]}"
    path = net_edit.create_netns(name)
    container = uuid.uuid4().hex
    w = prepared.workload
    att = cni.Attachment(
        container_id=container,
        netns=path,
        cni_args=cni.k8s_args(w.namespace, w.pod, prepared.pod_uid, container),
        ifname="eth0",
        cni_path=(chain.bin_dir,),
    )
    return Sandbox(name, att)


@pytest.fixture(scope="module")
def one_vf(
    api: client.ApiClient, plugin: kubeplugin.Plugin, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[kubeplugin.Workload]:
    """A Pod with a claim of one VF (under the first root) of the network with :data:`VF_SETTINGS`."""
    host_local = tmp_path_factory.mktemp("host-local")
    yield from kubeplugin.workload(api, plugin, sorted(realvfs.ROOTS)[:1], host_local, VF_SETTINGS)


@pytest.fixture(scope="module")
def prepared(
    api: client.ApiClient,
    plugin: kubeplugin.Plugin,
    real_pfs: list[realvfs.RealPf],
    one_vf: kubeplugin.Workload,
) -> Iterator[Prepared]:
    """The claim prepared by the plugin (NodePrepare), its shadow read back; unprepared after."""
    assert isinstance(plugin.prepare(one_vf.ref), messages.Prepared)
    (shadow,) = kubeplugin.shadows(api, one_vf.namespace)
    shadow_name = shadow["metadata"]["name"]
    bdf = kubeplugin.shadow_vfs([shadow])[shadow_name]
    config = json.loads(shadow["spec"]["config"])
    assert {key: config.get(key) for key in VF_SETTINGS} == VF_SETTINGS, "the shadow keeps the settings"
    (pf,) = [pf for pf in real_pfs if any(vf.bdf == bdf for vf in realvfs.raw_vfs(pf))]
    (index,) = [vf.index for vf in realvfs.raw_vfs(pf) if vf.bdf == bdf]
    (name,) = realvfs.raw_vf(bdf).net or ("",)
    pod = client.CoreV1Api(api).read_namespaced_pod(one_vf.pod, one_vf.namespace)
    idle = realvfs.vf_table_line(pf.ifname, index)
    assert "vlan" not in idle and "spoof checking on" in idle and "trust off" in idle, idle
    (host_local,) = {config["ipam"]["dataDir"]}
    yield Prepared(
        one_vf,
        pod.metadata.uid,
        shadow_name,
        config["name"],
        bdf,
        name,
        pf.ifname,
        index,
        idle,
        Path(host_local),
    )
    assert plugin.unprepare(one_vf.ref) is None
    sriovcni.rename_back(bdf, name)


def _host_name(bdf: str) -> str | None:
    """The VF's netdev name in the host namespace, or None while it is in a Pod's netns."""
    names = realvfs.raw_vf(bdf).net or ()
    return names[0] if len(names) == 1 else None


def _assert_given_back(prepared: Prepared, name: str) -> None:
    """The VF in the host namespace as ``name`` without an address, its VF-table line as while
    idle (no VLAN, spoofchk on, trust off) and its address released by host-local."""
    bdf = prepared.bdf
    realvfs.wait_until(f"{bdf} back in the host namespace as {name}", lambda: _host_name(bdf) == name)
    (host_link,) = [link for link in netlink.links(None) if link.name == name]
    assert host_link.addresses == (), "DEL removed the rail address"
    assert prepared.table_line() == prepared.idle_line, "DEL reset VLAN (0), spoofchk and trust"
    assert prepared.allocations() == [], "host-local released the address"


MULTUS_POD_WAIT_FAILED = "error waiting for pod"
"""Multus's message when its Pod GET missed its deadline (nothing else ran: no delegate was called)."""


def _add_as_the_kubelet_retries(chain: Chain, box: Sandbox) -> cni.CniResult:
    """ADD; if Multus could not read the Pod in time, DEL and ADD once more, as containerd (DEL of the
    failed sandbox) and the kubelet (a new RunPodSandbox) do.

    Seen twice in CI, both times on the session's first Multus exec: its first API round trip from
    the guest (QEMU user networking under TCG, a fresh TLS connection per exec) exceeded Multus's
    deadline after about 5 s. Any other failure is returned as it is.
    """
    added = chain.run("ADD", box.att)
    if added.ok or MULTUS_POD_WAIT_FAILED not in added.stdout:
        return added
    print(f"cni chain: Multus could not read the Pod in time ({added.duration_s:.1f}s); DEL, then ADD again")
    deleted = chain.run("DEL", box.att)
    assert deleted.ok, f"DEL of the failed ADD failed: {deleted.stdout}{deleted.stderr}"
    return chain.run("ADD", box.att)


def test_del_through_the_chain_after_the_pod_netns_was_deleted_resets_the_vf_and_releases_its_address_and_leaves_it_in_the_host_as_dra0(
    prepared: Prepared, chain: Chain
) -> None:
    # First in the module: it needs the VF idle, before in_use holds it.
    box = new_sandbox(prepared, chain)
    try:
        added = _add_as_the_kubelet_retries(chain, box)
        assert added.ok, f"ADD failed: {added.stdout}{added.stderr}"
        assert [(link.name, link.parent_device) for link in box.inside()] == [("dra0", prepared.bdf)]
        assert len(prepared.allocations()) == 1
    finally:
        box.remove_netns()
    deleted = chain.run("DEL", box.att, added.result)
    assert deleted.ok, f"DEL failed: {deleted.stdout}{deleted.stderr}"
    # The kernel gives the VF back to the host namespace as it was named in the Pod; sriov-cni's
    # DEL does not rename it and keeps its allocation record (stale: its netns is gone).
    _assert_given_back(prepared, "dra0")
    assert sriovcni.allocation(prepared.bdf) == box.netns
    print(f"cni chain, deleted netns: ADD {added.duration_s:.1f}s, DEL {deleted.duration_s:.1f}s")


def test_the_claim_of_a_vf_left_as_dra0_is_unprepared_and_prepared_again_with_its_status_entry_written_once(
    api: client.ApiClient, plugin: kubeplugin.Plugin, prepared: Prepared
) -> None:
    assert _host_name(prepared.bdf) == "dra0", "runs after the deleted-netns DEL (file order)"
    ref = prepared.workload.ref
    assert plugin.unprepare(ref) is None
    assert kubeplugin.status_devices(api, prepared.workload) == [], "NodeUnprepare cleared status.devices"
    again = plugin.prepare(ref)
    assert isinstance(again, messages.Prepared), again
    (shadow,) = kubeplugin.shadows(api, prepared.workload.namespace)
    assert (shadow["metadata"]["name"], kubeplugin.shadow_vfs([shadow])) == (
        prepared.shadow,
        {prepared.shadow: prepared.bdf},
    )
    entries = kubeplugin.status_devices(api, prepared.workload)
    assert [e["device"] for e in entries] == [prepared.bdf.replace(":", "-").replace(".", "-")], entries
    assert "Duplicate value" not in plugin.process.log_path.read_text(errors="replace")


@pytest.fixture(scope="module")
def in_use(prepared: Prepared, chain: Chain, real_pfs: list[realvfs.RealPf]) -> Iterator[Sandbox]:
    """A sandbox of the Pod whose ADD through the chain holds the VF (in :data:`realvfs.HELD`) until
    :func:`test_del_through_the_chain_gives_the_vf_back_under_the_name_it_had_with_vlan_0_and_no_address`
    (or this fixture's teardown, when that test did not run) deletes it. The baseline check skips
    the VF while it is held, so the teardown checks it is back (restoring the VFs if not)."""
    box = new_sandbox(prepared, chain)
    box.host_name = _host_name(prepared.bdf)
    try:
        box.added = chain.run("ADD", box.att)
        assert box.added.ok, f"ADD failed: {box.added.stdout}{box.added.stderr}"
        realvfs.HELD.add(prepared.bdf)
        print(f"cni chain, VF in use: ADD {box.added.duration_s:.1f}s")
        yield box
    finally:
        if box.added is not None and box.added.ok and not box.deleted:
            chain.run("DEL", box.att, box.added.result)
        box.remove_netns()
        realvfs.HELD.discard(prepared.bdf)
        try:
            realvfs.wait_until(
                f"the held VF {prepared.bdf} back in the host namespace",
                lambda: bool(realvfs.raw_vf(prepared.bdf).net),
            )
        except pytest.fail.Exception:
            realvfs.restore_baseline(real_pfs)
            raise


def _assert_held(box: Sandbox) -> None:
    assert not box.deleted, "runs before the DEL test of this module (file order), which ends the use"


def test_add_through_the_chain_moves_the_prepared_vf_into_the_pod_netns_with_the_rail_address_and_sets_the_networks_vlan_spoofchk_trust_in_the_pfs_vf_table(
    api: client.ApiClient, prepared: Prepared, in_use: Sandbox
) -> None:
    _assert_held(in_use)
    assert in_use.host_name == "dra0", "the VF was taken under the name the deleted netns left it with"
    (vf_link,) = in_use.inside()
    assert (vf_link.name, vf_link.parent_device) == ("dra0", prepared.bdf), "the allocated real VF"
    address = ipaddress.ip_interface(vf_link.addresses[0])
    assert address.network == ipaddress.ip_network(kubeplugin.SUBNET), vf_link
    assert realvfs.raw_vf(prepared.bdf).net == (), "the VF's netdev left the host namespace"
    assert sriovcni.allocation(prepared.bdf) == in_use.netns, "ADD replaced the stale allocation record"
    status = json.loads(kubeplugin.annotations(api, prepared.workload)[names.NETWORK_STATUS_ANNOTATION])
    (entry,) = [e for e in status if e.get("interface") == "dra0"]
    assert (entry["name"], entry["ips"]) == (
        f"{prepared.workload.namespace}/{prepared.shadow}",
        [str(address.ip)],
    )
    line = prepared.table_line()
    assert "vlan 100" in line and "spoof checking off" in line and "trust on" in line, line


def test_a_second_add_through_the_chain_on_the_vf_in_use_is_refused_with_sriov_cnis_message_before_anything_moves(
    prepared: Prepared, chain: Chain, in_use: Sandbox
) -> None:
    _assert_held(in_use)
    (held_link,) = in_use.inside()
    in_use_line = prepared.table_line()
    second = new_sandbox(prepared, chain)  # another sandbox (container, netns) of the same Pod
    try:
        refused = chain.run("ADD", second.att)
        assert not refused.ok and refused.error is not None, refused.stdout
        # Multus relays the delegate's error prefixed with the Pod and the CNI network name; the
        # guard relays Multus's unchanged.
        w = prepared.workload
        assert (refused.error["code"], refused.error["msg"]) == (
            999,
            f"[{w.namespace}/{w.pod}/{prepared.pod_uid}:{prepared.network}]: error adding container to "
            f'network "{prepared.network}": SRIOV-CNI failed to load netconf: pci address {prepared.bdf} '
            "is already allocated",
        ), refused.error
        msg = refused.error["msg"]
        print(f"cni chain, refused second ADD: {refused.duration_s:.1f}s: {msg}")
        assert second.inside() == []
        assert in_use.inside() == [held_link], "the first sandbox keeps its VF and address"
        assert realvfs.raw_vf(prepared.bdf).net == ()
        assert prepared.table_line() == in_use_line, "the refused ADD changed no VF setting"
        assert len(prepared.allocations()) == 1, "the refused ADD allocated no address"
        assert sriovcni.allocation(prepared.bdf) == in_use.netns
    finally:
        second.remove_netns()


def test_del_through_the_chain_gives_the_vf_back_under_the_name_it_had_with_vlan_0_and_no_address(
    prepared: Prepared, chain: Chain, in_use: Sandbox
) -> None:
    assert in_use.added is not None and in_use.host_name is not None
    deleted = chain.run("DEL", in_use.att, in_use.added.result)
    in_use.deleted = True
    assert deleted.ok, f"DEL failed: {deleted.stdout}{deleted.stderr}"
    assert in_use.inside() == []
    _assert_given_back(prepared, in_use.host_name)
    assert sriovcni.allocation(prepared.bdf) is None, "DEL with the netns present drops the record"
    realvfs.HELD.discard(prepared.bdf)
    print(f"cni chain, VF in use: DEL {deleted.duration_s:.1f}s")
