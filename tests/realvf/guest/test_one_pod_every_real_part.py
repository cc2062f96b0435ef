"""One Pod with every real part: a real kubelet, containerd and runc in the guest, this plugin, the
guard, Multus thin and sriov-cni, on a real igbvf VF.

The guest becomes a Node of the host's control plane (what it needs in the run image:
``tests/realvf/kubelet_payload.py``),
:data:`NODE` (the pinned kubelet with its node credentials, containerd with runc and CDI, the lab's
pause and busybox images imported, no registry); this plugin runs in auto-attach mode on the
kubelet's own plugin directories, the guard is installed in front of Multus thin with a ``ptp``
primary network, and sriov-cni and ``host-local`` are the CNI step. A Pod that asks only for a
DRA claim of one VF gets it as ``dra0`` with an address of the rail's subnet, which an exec
through the API server and the kubelet (``kubectl exec``'s path; the apiserver reaches the kubelet
through ``tests/realvf/kubelet_proxy.py``) shows; deleting the Pod returns the VF to the host and
leaves no claim, shadow, checkpoint record, address or sriov-cni allocation. Its cost under TCG
is in docs/realvf.md.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.stream import stream
from tests import waiting
from tests.realvf import kubeapi
from tests.realvf.guest import kubeplugin, realvfs, sriovcni

from sriov_dra.core.plugin import checkpoint_codec
from sriov_dra.guard import main as guard_main
from sriov_dra_lab import guard, images, processes, real_node
from sriov_dra_rules import checkpoint_doc, names

NODE = kubeapi.KUBELET_NODE
PAYLOAD = realvfs.REPO / ".realvf-node"
CNI_BIN, CNI_CONF = Path("/opt/cni/bin"), Path("/etc/cni/net.d")
KUBELET_ROOT = Path("/var/lib/kubelet")
CDI_DIR = Path("/var/run/cdi")
CONTAINERD_SOCKET = real_node.CONTAINERD_SOCKET
PRIMARY = "10-realvf-pods.conflist"
SUBNET = "10.56.9.0/24"
GUEST_ADDRESS = "10.0.2.15"
"""The guest's address on QEMU user networking (tests/realvf/vm.py), the kubelet's node IP."""
POD_WAIT_S = 600.0
LOG_DIR = Path("/var/log")
"""Where the node's processes log: the kubelet serves it (``kubectl get --raw
/api/v1/nodes/<NODE>/proxy/logs/``), so a run can be followed from the host."""
GUARD_LOG = LOG_DIR / "realvf-guard.log"


def _kubelet_config(port: int) -> dict[str, Any]:
    return {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "address": "0.0.0.0",
        "port": port,
        "readOnlyPort": 0,
        "healthzBindAddress": "127.0.0.1",
        "healthzPort": 10248,
        "containerRuntimeEndpoint": f"unix://{CONTAINERD_SOCKET}",
        "cgroupDriver": "cgroupfs",
        "failSwapOn": False,
        "authentication": {
            "anonymous": {"enabled": False},
            "webhook": {"enabled": False},
            "x509": {"clientCAFile": str(PAYLOAD / "ca.crt")},
        },
        "authorization": {"mode": "Webhook"},
        "imageGCHighThresholdPercent": 100,
        "imageGCLowThresholdPercent": 99,
        "evictionHard": {"memory.available": "1Mi", "nodefs.available": "1%", "imagefs.available": "1%"},
        "registerNode": True,
        "maxPods": 10,
        "resolvConf": "/etc/resolv.conf",
        "runtimeRequestTimeout": "10m",
    }


@dataclass
class Node:
    """The guest as a Node: its processes and when each part came up (seconds from the start)."""

    procs: dict[str, processes.Process] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def mark(self, what: str) -> None:
        self.timings[what] = round(time.monotonic() - self.started, 1)

    def spawn(self, name: str, argv: list[str], env: dict[str, str] | None = None) -> processes.Process:
        proc = processes.Process(name, argv, LOG_DIR / f"realvf-{name}.log", env=env, stop_grace_s=10.0)
        proc.start()
        self.procs[name] = proc
        return proc

    def wait(
        self,
        what: str,
        predicate: Callable[[], object],
        detail: Callable[[], str] = str,
        timeout_s: float = POD_WAIT_S,
    ) -> None:
        """Poll ``predicate`` every second; on timeout fail naming ``what``, ``detail()``, the timings
        so far and every log's tail."""
        try:
            waiting.eventually(what, predicate, timeout_s=timeout_s, interval_s=1.0)
        except pytest.fail.Exception as exc:
            logs = {**{n: p.log_path for n, p in self.procs.items()}, "guard": GUARD_LOG}
            tails = "\n".join(f"--- {n}:\n{processes.tail(path, 25)}" for n, path in logs.items())
            pytest.fail(f"{exc} {detail()}; timings {self.timings}\n{tails}", pytrace=False)

    def stop(self) -> None:
        for name in ("kubelet", "plugin", "containerd"):
            if name in self.procs:
                self.procs[name].stop()


def _run(*argv: str, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, env=env, check=False, timeout=300)
    assert done.returncode == 0, f"{' '.join(argv)}: {done.stdout}{done.stderr}"
    return done.stdout


def _published(api: client.ApiClient) -> bool:
    slices = client.ResourceV1Api(api).list_resource_slice(field_selector=f"spec.nodeName={NODE}").items
    return any(s.spec.driver == names.DRIVER_NAME and s.spec.devices for s in slices)


def _node_ready(core: client.CoreV1Api) -> bool:
    try:
        node = core.read_node(NODE)
    except client.ApiException:
        return False
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


@pytest.fixture(scope="module")
def node(api: client.ApiClient, real_pfs: list[realvfs.RealPf]) -> Iterator[Node]:
    """The guest as :data:`NODE`: containerd, the plugin, the guard and the kubelet, up and Ready."""
    sriovcni.require_binaries("multus", "host-local", "loopback", "ptp", "sriov")
    if not (PAYLOAD / "bin" / "kubelet").is_file():
        pytest.skip(f"{PAYLOAD} is not in the run image (the host started no control plane for the guest)")
    port = int(os.environ["SRIOV_DRA_REALVF_KUBELET_PORT"])
    kubeconfig = os.environ["SRIOV_DRA_REALVF_KUBECONFIG"]
    up = Node()
    if not Path("/sys/fs/cgroup/cgroup.controllers").exists():
        Path("/sys/fs/cgroup").mkdir(parents=True, exist_ok=True)
        _run("mount", "-t", "cgroup2", "none", "/sys/fs/cgroup")
    # The guest's root is the initramfs, which cAdvisor cannot stat: the kubelet's and containerd's
    # directories and the Pod logs get their own tmpfs, as a node's have their own file system.
    for where in (KUBELET_ROOT, Path("/var/lib/containerd"), Path("/var/log")):
        where.mkdir(parents=True, exist_ok=True)
        _run("mount", "-t", "tmpfs", "tmpfs", str(where))
    Path("/etc/resolv.conf").touch()
    for d in (CNI_BIN, CNI_CONF, CDI_DIR, KUBELET_ROOT / "plugins_registry", Path("/etc/containerd")):
        d.mkdir(parents=True, exist_ok=True)
    for name in ("multus", "host-local", "loopback", "ptp", "sriov"):
        shutil.copy2(sriovcni.CNI_PATH / name, CNI_BIN / name)
    ipam = {"type": "host-local", "ranges": [[{"subnet": "10.57.0.0/24"}]]}
    primary = {"cniVersion": "1.0.0", "name": "realvf-pods", "plugins": [{"type": "ptp", "ipam": ipam}]}
    (CNI_CONF / PRIMARY).write_text(json.dumps(primary))
    # runc enters the containers' root with chroot: the kernel refuses pivot_root on the guest's
    # initramfs root.
    config = real_node.containerd_config(
        runc=str(PAYLOAD / "bin" / "runc"),
        cdi_dirs=[CDI_DIR],
        registry_config=Path("/etc/containerd/certs.d"),
        cni_bin=str(CNI_BIN),
        cni_conf=str(CNI_CONF),
        no_pivot_root=True,
    )
    Path("/etc/containerd/config.toml").write_text(config)
    # runc re-executes itself as the container's init with none of its environment (no
    # LD_LIBRARY_PATH): the libraries the guest lacks go on the loader's default path.
    for library in (PAYLOAD / "lib").iterdir():
        if not (Path("/usr/lib/x86_64-linux-gnu") / library.name).exists():
            shutil.copy2(library, Path("/usr/lib") / library.name)
    path = f"{PAYLOAD / 'bin'}:{os.environ['PATH']}"
    runtime_env = dict(os.environ, PATH=path)
    ctr = [str(PAYLOAD / "bin" / "ctr"), f"--address={CONTAINERD_SOCKET}", "-n", "k8s.io"]
    daemon = None
    try:
        containerd = up.spawn(
            "containerd",
            [str(PAYLOAD / "bin" / "containerd"), "--config=/etc/containerd/config.toml"],
            runtime_env,
        )
        up.wait(
            "containerd answering",
            lambda: (
                subprocess.run([*ctr, "version"], capture_output=True, check=False).returncode == 0
                or not containerd.running()
            ),
            timeout_s=240,
        )
        assert containerd.running(), processes.tail(containerd.log_path, 40)
        for archive in ("pause.tar", "busybox.tar"):
            _run(*ctr, "images", "import", "--local", str(PAYLOAD / "images" / archive))
        up.mark("containerd up, images imported")
        (KUBELET_ROOT / "config.yaml").write_text(yaml.safe_dump(_kubelet_config(port)))
        kubelet = up.spawn(
            "kubelet",
            [
                str(PAYLOAD / "bin" / "kubelet"),
                f"--config={KUBELET_ROOT / 'config.yaml'}",
                f"--kubeconfig={PAYLOAD / 'kubelet.kubeconfig'}",
                f"--root-dir={KUBELET_ROOT}",
                f"--cert-dir={KUBELET_ROOT / 'pki'}",
                f"--hostname-override={NODE}",
                f"--node-ip={GUEST_ADDRESS}",
                "--v=1",
            ],
            dict(os.environ, PATH=path),
        )
        core = client.CoreV1Api(api)
        up.wait(f"Node {NODE} Ready", lambda: _node_ready(core) or not kubelet.running())
        assert kubelet.running(), processes.tail(kubelet.log_path, 60)
        up.mark("kubelet Ready")
        # After the Node exists, as a DaemonSet's Pod would start: the plugin reads its Node's UID
        # at startup and exits without it.
        up.spawn(
            "plugin",
            [
                sys.executable,
                "-m",
                "sriov_dra.driver",
                f"--node-name={NODE}",
                f"--kubeconfig={kubeconfig}",
                "--sysfs-root=/",
                f"--kubelet-plugins-directory-path={KUBELET_ROOT / 'plugins'}",
                f"--kubelet-registrar-directory-path={KUBELET_ROOT / 'plugins_registry'}",
                f"--cdi-root={CDI_DIR}",
                f"--state-dir={KUBELET_ROOT / 'plugins' / names.DRIVER_NAME}",
                f"--namespace={kubeapi.PLUGIN_NS}",
                "--multus-auto-attach=true",
                "--log-format=json",
            ],
        )
        daemon = guard.GuardDaemon(
            socket_path=Path("/run/sriov-dra-guard.sock"),
            kubeconfig=Path(kubeconfig),
            log_path=GUARD_LOG,
            node_name=NODE,
        )
        daemon.start(timeout_s=300.0)
        multus = {"kubeconfig": kubeconfig, "config": {"cniDir": "/var/lib/cni/multus"}}
        status = guard_main.main(
            [
                "install",
                f"--bin-dir={CNI_BIN}",
                f"--conf-dir={CNI_CONF}",
                "--mode=thin",
                f"--primary-config={CNI_CONF / PRIMARY}",
                "--socket=/run/sriov-dra-guard.sock",
                f"--interpreter={sys.executable}",
                f"--multus={json.dumps(multus)}",
                f"--multus-master-cni={PRIMARY}",
                f"--autoconfig-dir={CNI_CONF}",
            ]
        )
        assert status == 0, "sriov-dra-guard install reported problems (its output is above)"
        up.mark("plugin started, guard up and installed")
        plugin = up.procs["plugin"]
        up.wait(
            f"the plugin's ResourceSlices for {NODE}",
            lambda: _published(api) or not plugin.running(),
        )
        assert plugin.running(), f"the plugin exited:\n{processes.tail(plugin.log_path, 60)}"
        up.mark("plugin registered with the kubelet, devices published")
        yield up
    finally:
        up.stop()
        if daemon is not None:
            daemon.stop()
        with contextlib.suppress(client.ApiException):
            client.CoreV1Api(api).delete_node(NODE)


def _exec(core: client.CoreV1Api, ns: str, pod: str, command: list[str]) -> tuple[str, int | None]:
    """Run ``command`` in the Pod's container through the API server and the kubelet, as
    ``kubectl exec`` does; its stdout and stderr and exit status (the websocket closed after)."""
    session = stream(
        core.connect_get_namespaced_pod_exec,
        pod,
        ns,
        command=command,
        stderr=True,
        stdin=False,
        stdout=True,
        tty=False,
        _preload_content=False,
    )
    try:
        session.run_forever(timeout=POD_WAIT_S)
        status = session.returncode  # before read_all, which drops the status channel too
        return session.read_all(), status
    finally:
        session.close()
        # close() leaves the socket open once the server has closed the stream.
        session.sock.shutdown()


def _pod(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "one-pod"},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": NODE},
            "terminationGracePeriodSeconds": 0,
            "automountServiceAccountToken": False,
            "resourceClaims": [{"name": "nics", "resourceClaimTemplateName": "nics"}],
            "containers": [
                {
                    "name": "c",
                    "image": images.BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sleep", "3600"],
                    "resources": {"claims": [{"name": "nics"}]},
                }
            ],
        },
    }


def _template(ns: str, root: str) -> dict[str, Any]:
    request = {
        "name": "nic",
        "exactly": {
            "deviceClassName": kubeapi.DEVICE_CLASS,
            "count": 1,
            "selectors": [{"cel": {"expression": f'{kubeplugin.ROOT_ATTRIBUTE} == "{root}"'}}],
        },
    }
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "nics", "namespace": ns},
        "spec": {"spec": {"devices": {"requests": [request]}}},
    }


@pytest.mark.timeout(3000)
def test_a_pod_asking_only_for_a_claim_gets_a_real_vf_as_dra0_with_its_rail_address_and_gives_everything_back(
    api: client.ApiClient, node: Node, real_pfs: list[realvfs.RealPf], tmp_path: Path
) -> None:
    core, res = client.CoreV1Api(api), client.ResourceV1Api(api)
    ns = "realvf-one-pod"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    host_local = tmp_path / "host-local"
    try:
        config = {"cniVersion": "1.0.0", "name": "rail", "type": "sriov"}
        config["ipam"] = {"type": "host-local", "dataDir": str(host_local), "ranges": [[{"subnet": SUBNET}]]}
        nad = {
            "apiVersion": f"{kubeplugin.NAD_GROUP}/{kubeplugin.NAD_VERSION}",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": kubeapi.SOURCE_NAD},
            "spec": {"config": json.dumps(config)},
        }
        client.CustomObjectsApi(api).create_namespaced_custom_object(
            kubeplugin.NAD_GROUP, kubeplugin.NAD_VERSION, ns, kubeplugin.NAD_PLURAL, nad
        )
        root = sorted(realvfs.ROOTS)[0]
        res.create_namespaced_resource_claim_template(ns, _template(ns, root))
        host_names = {vf.bdf: vf.net for pf in real_pfs for vf in realvfs.raw_vfs(pf)}
        started = time.monotonic()
        core.create_namespaced_pod(ns, _pod(ns))

        def running() -> bool:
            return core.read_namespaced_pod("one-pod", ns).status.phase == "Running"

        node.wait(
            "the Pod Running",
            running,
            lambda: (
                f"events: {[(e.involved_object.name, e.message) for e in core.list_namespaced_event(ns).items]}"
            ),
        )
        running_s = time.monotonic() - started
        (shadow,) = kubeplugin.shadows(api, ns)
        bdf = kubeplugin.shadow_vfs([shadow])[shadow["metadata"]["name"]]
        assert realvfs.raw_vf(bdf).net == (), "the VF's netdev is in the Pod's netns"
        assert bdf in host_names, f"the shadow names {bdf}, not a VF of the guest ({sorted(host_names)})"
        shown, status = _exec(core, ns, "one-pod", ["ip", "-o", "-4", "addr", "show", "dra0"])
        assert status == 0, f"exec ip addr exited {status}: {shown}"
        assert " dra0 " in shown and "inet 10.56.9." in shown, shown
        exec_s = time.monotonic() - started - running_s

        deleting = time.monotonic()
        core.delete_namespaced_pod("one-pod", ns, grace_period_seconds=0)
        kubeplugin.eventually(
            "the Pod gone",
            lambda: not [p for p in core.list_namespaced_pod(ns).items if p.metadata.name == "one-pod"],
            timeout_s=POD_WAIT_S,
        )
        realvfs.wait_until(
            f"the VF back in the host as {host_names[bdf]}",
            lambda: realvfs.raw_vf(bdf).net == host_names[bdf],
            timeout_s=120,
        )
        kubeplugin.eventually(
            "the Pod's claim deleted",
            lambda: not res.list_namespaced_resource_claim(ns).items,
            timeout_s=POD_WAIT_S,
        )
        kubeplugin.eventually(
            "no shadow left", lambda: kubeplugin.shadows(api, ns) == [], timeout_s=POD_WAIT_S
        )
        assert not list(host_local.rglob("10.56.9.*")), "host-local released the address"
        assert sriovcni.allocation(bdf) is None, "sriov-cni's DEL dropped its allocation record"
        checkpoint_path = KUBELET_ROOT / "plugins" / names.DRIVER_NAME / checkpoint_doc.CHECKPOINT_FILE_NAME
        claims = checkpoint_codec.decode_checkpoint(checkpoint_path.read_bytes()).claims
        assert not claims, f"checkpoint records left: {sorted(claims)}"
        print(
            f"one Pod with every real part: node {node.timings}, Pod Running after {running_s:.1f}s, "
            f"exec {exec_s:.1f}s, deleted and everything released after {time.monotonic() - deleting:.1f}s"
        )
    finally:
        core.delete_namespace(ns, propagation_policy="Background")
