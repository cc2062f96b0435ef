"""The CNI chain on a real VF: guard → Multus thin → the lab's sriov stand-in (real-VF mode) → host-local.

The VF comes from a claim the session's plugin prepared (its shadow NAD and the Pod's selections
on the host's API server, :mod:`tests.realvf.guest.kubeplugin`). The runtime's side is the lab's
libcni (``sriov_dra_lab.cni``) running the first config of the CNI conf dir: the guard's
conflist, installed by ``sriov-dra-guard install`` (its entry point, run in this process) with a
``loopback`` primary network. The guard
shim asks the guard daemon (``sriov-dra-guard serve``, started here), which runs the pinned Multus
thin binary; Multus reads the Pod and the shadow from the API server and runs the lab's ``sriov``
plugin with ``--real-vfs``, which moves the VF with the pinned ``host-device`` and gets the
address from ``host-local`` (both from the run image). One ADD and one DEL: each CNI exec of a
Python plugin costs seconds of import time under TCG.
"""

from __future__ import annotations

import ipaddress
import json
import os
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from kubernetes import client
from tests.realvf import kubeapi
from tests.realvf.guest import kubeplugin, realvfs

from sriov_dra.guard import main as guard_main
from sriov_dra.host import netlink
from sriov_dra.kubeletapi import messages
from sriov_dra_lab import cni, guard
from sriov_dra_lab.fakes import netedit
from sriov_dra_rules import names

CNI_DIR = realvfs.REPO / ".realvf-cni"
PRIMARY = "10-realvf-primary.conflist"
BINARIES = ("multus", "loopback", "host-device", "host-local")


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


@pytest.fixture
def chain(plugin: kubeplugin.Plugin, tmp_path: Path) -> Iterator[Chain]:
    """The bin dir (pinned binaries, the sriov stand-in, the guard shim), the guard's conflist, its daemon."""
    missing = [n for n in BINARIES if not os.access(CNI_DIR / n, os.X_OK)]
    if missing:
        pytest.skip(f"{missing} not in the run image (build the pinned CNI plugins: make setup)")
    bin_dir, conf_dir = tmp_path / "bin", tmp_path / "net.d"
    commands = {name: [str(CNI_DIR / name)] for name in BINARIES}
    commands["sriov"] = [sys.executable, "-m", "sriov_dra_lab.sriov_cni", "--real-vfs"]
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
                f"--multus-master-cni={PRIMARY}",
                f"--autoconfig-dir={conf_dir}",
            ]
        )
        assert status == 0, "sriov-dra-guard install reported problems (its output is above)"
        yield Chain(bin_dir, conf_dir)
    finally:
        daemon.stop()


@pytest.fixture
def one_vf(api: client.ApiClient, plugin: kubeplugin.Plugin, tmp_path: Path) -> Iterator[kubeplugin.Workload]:
    """A Pod with a claim of one VF (under the first root), scheduled and allocated."""
    yield from kubeplugin.workload(api, plugin, sorted(realvfs.ROOTS)[:1], tmp_path / "host-local")


def test_guard_multus_thin_and_the_sriov_stand_in_move_the_prepared_real_vf_into_the_pod_netns_with_the_rail_address_and_del_restores_it(
    api: client.ApiClient,
    plugin: kubeplugin.Plugin,
    one_vf: kubeplugin.Workload,
    chain: Chain,
    tmp_path: Path,
) -> None:
    assert isinstance(plugin.prepare(one_vf.ref), messages.Prepared)
    ((shadow, bdf),) = kubeplugin.shadow_vfs(kubeplugin.shadows(api, one_vf.namespace)).items()
    (name,) = realvfs.raw_vf(bdf).net or ("",)
    pod = client.CoreV1Api(api).read_namespaced_pod(one_vf.pod, one_vf.namespace)
    sandbox = f"realvf-{uuid.uuid4().hex[:8]}"
    path = netedit.create_netns(sandbox)
    container = uuid.uuid4().hex
    att = cni.Attachment(
        container_id=container,
        netns=path,
        cni_args=cni.k8s_args(one_vf.namespace, one_vf.pod, pod.metadata.uid, container),
        ifname="eth0",
        cni_path=(chain.bin_dir,),
    )
    try:
        added = chain.run("ADD", att)
        assert added.ok, f"ADD failed: {added.stdout}{added.stderr}"
        (vf_link,) = [link for link in netlink.links(path) if link.name == "dra0"]
        assert vf_link.parent_device == bdf, "the interface in the Pod netns is the allocated real VF"
        address = ipaddress.ip_interface(vf_link.addresses[0])
        assert address.network == ipaddress.ip_network(kubeplugin.SUBNET), vf_link
        assert realvfs.raw_vf(bdf).net == (), "the VF's netdev left the host namespace"
        status = json.loads(kubeplugin.annotations(api, one_vf)[names.NETWORK_STATUS_ANNOTATION])
        (entry,) = [e for e in status if e.get("interface") == "dra0"]
        assert (entry["name"], entry["ips"]) == (f"{one_vf.namespace}/{shadow}", [str(address.ip)])

        deleted = chain.run("DEL", att, added.result)
        assert deleted.ok, f"DEL failed: {deleted.stdout}{deleted.stderr}"
        assert [link.name for link in netlink.links(path) if link.name != "lo"] == []
        print(f"cni chain: ADD {added.duration_s:.1f}s, DEL {deleted.duration_s:.1f}s")
    finally:
        netedit.remove_netns(sandbox)
    realvfs.wait_until(f"{name} back in the host namespace", lambda: realvfs.raw_vf(bdf).net == (name,))
    (host_link,) = [link for link in netlink.links(None) if link.name == name]
    assert host_link.addresses == (), "DEL removed the rail address"
    assert not any((tmp_path / "host-local").rglob("10.56.*")), "host-local released the address"
    assert plugin.unprepare(one_vf.ref) is None
