"""A real Kubernetes 1.36 control plane on loopback: etcd, apiserver, controller-manager, scheduler.

Owns starting and stopping the four components as local processes from the pinned binaries
(``sriov_dra_lab.binaries``), their PKI and kubeconfigs, readiness, and the installation of the
NetworkAttachmentDefinition CRD the way a Multus deployment does. Used by the cluster/cni/e2e test
tiers and by the lab. Everything lives under one work directory; nothing listens beyond 127.0.0.1.

Order: etcd → kube-apiserver (TLS, ``--authorization-mode=Node,RBAC``) → readiness → NAD CRD →
kube-controller-manager and kube-scheduler (each with its own system identity) → their health.
Stop is the reverse order, by PID, with every process group killed and reaped; a stop never
raises for a component that already died.
"""

from __future__ import annotations

import datetime as dt
import logging
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

import yaml
from kubernetes import client

from sriov_dra.host import strict_yaml
from sriov_dra.kube import apiserver_probes, apply
from sriov_dra.kube import client as kube_client
from sriov_dra_lab import binaries, pki
from sriov_dra_lab.paths import MANIFESTS
from sriov_dra_lab.processes import Process, ProcessFailed, free_port, port_in_use, wait_until

log = logging.getLogger(__name__)

NAD_CRD = MANIFESTS / "crds" / "network-attachment-definitions.yaml"
SERVICE_CIDR = "10.0.0.0/24"
AUDIT_POLICY = """\
apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: ["RequestReceived"]
rules:
  - level: Metadata
    resources:
      - group: resource.k8s.io
      - group: k8s.cni.cncf.io
  - level: None
"""

EGRESS_SELECTOR = """\
apiVersion: apiserver.k8s.io/v1beta1
kind: EgressSelectorConfiguration
egressSelections:
  - name: cluster
    connection:
      proxyProtocol: HTTPConnect
      transport:
        uds:
          udsName: {socket}
"""


LAB_FEATURE_GATES: Final = "DRADeviceTaints=true,DRAExtendedResource=true"
"""The gates the plugin's device taints (apiserver, scheduler, controller-manager's eviction) and
extended resources backed by DRA need; both beta and on by default in 1.36, named so that the
lab does not depend on that default (the kubelets get ``DRAExtendedResource`` too)."""


@dataclass(frozen=True)
class ControlPlaneSettings:
    """How to start the control plane.

    Units: timeouts in seconds. ``feature_gates`` is passed to every component as
    ``--feature-gates`` (empty: the 1.36 defaults, where DRA is GA and locked on).
    """

    workdir: Path | None = None
    """Where PKI, etcd data, kubeconfigs and logs go; a fresh temp dir when None."""
    start_timeout_s: float = 120.0
    """Per component; the apiserver's first start on a cold disk takes ~10-20 s on 2 cores."""
    feature_gates: str = LAB_FEATURE_GATES
    audit: bool = False
    """Write an audit log of resource.k8s.io and NAD requests (Metadata level) to ``<logs>/audit.log``."""
    keep_workdir: bool = False
    """Keep the work directory after stop (logs for debugging); temp dirs are removed otherwise."""
    logs_dir: Path | None = None
    """Where the component logs (``<component>.log``) go; ``<workdir>/logs`` when None."""
    kubelet_proxy: str = ""
    """The unix socket of an HTTP CONNECT proxy the apiserver reaches kubelets through (its egress
    selector for ``cluster`` traffic: exec, logs); empty: it dials them directly."""


@dataclass
class ControlPlane:
    """A running control plane. Use :func:`running` or call :meth:`start` / :meth:`stop`.

    After start: ``kubeconfig`` is an admin kubeconfig (``O=system:masters``), ``server`` the
    https URL, ``ca_cert`` the cluster CA; ``api()`` returns a fresh admin ApiClient.
    """

    settings: ControlPlaneSettings = field(default_factory=ControlPlaneSettings)
    workdir: Path = field(init=False)
    server: str = field(init=False, default="")
    kubeconfig: Path = field(init=False)
    ca_cert: Path = field(init=False)
    processes: list[Process] = field(init=False, default_factory=list)
    ports: dict[str, int] = field(init=False, default_factory=dict)
    _owns_workdir: bool = field(init=False, default=False)
    _authority: pki.Authority | None = field(init=False, default=None)

    # ----------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Start all four components and install the NAD CRD; stop everything on failure.

        Raises: ``binaries.BinaryMissing`` when a pinned binary is not built; ``ProcessFailed``
        with the failing component's log tail when it exits or does not become ready.
        """
        for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
            binaries.find(name)
        if self.settings.workdir is None:
            self.workdir = Path(tempfile.mkdtemp(prefix="sriov-dra-cp-"))
            self._owns_workdir = True
        else:
            self.workdir = self.settings.workdir
            self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            self._write_pki()
            self._start_etcd()
            self._start_apiserver()
            self._install_nad_crd()
            self._start_controller_manager()
            self._start_scheduler()
        except BaseException:
            self.stop()
            raise
        log.info("control plane ready", extra={"server": self.server, "workdir": str(self.workdir)})

    def stop(self) -> None:
        """Stop every started component in reverse order and verify their ports are closed.

        Idempotent. Removes the work directory when it was a temp dir and ``keep_workdir`` is off.
        """
        for proc in reversed(self.processes):
            proc.stop()
        self.processes.clear()
        busy = [f"{n}:{p}" for n, p in self.ports.items() if port_in_use(p)]
        if busy:
            log.warning("ports still in use after stop: %s", busy)
        if self._owns_workdir and not self.settings.keep_workdir and getattr(self, "workdir", None):
            shutil.rmtree(self.workdir, ignore_errors=True)

    def api(self) -> client.ApiClient:
        """A new admin ApiClient for this control plane (caller closes it)."""
        return kube_client.from_kubeconfig(self.kubeconfig)

    def client_kubeconfig(self, name: str, user: str, groups: tuple[str, ...] = ()) -> Path:
        """Issue a client certificate for ``user`` (CN) in ``groups`` (O) and write ``<workdir>/<name>.kubeconfig``.

        Shapes: the kubeconfig names the apiserver by its loopback URL (:attr:`server`). Used for
        identities the lab creates after start, e.g. a real node's ``system:node:<node>``.
        Raises: ``RuntimeError`` before :meth:`start`.
        """
        if self._authority is None:
            raise RuntimeError("the control plane is not started: no PKI to issue a client certificate from")
        return self._kubeconfig(name, user, groups)

    def pids(self) -> list[int]:
        """PIDs of the component processes started so far."""
        return [p.pid for p in self.processes if p.pid is not None]

    # ----------------------------------------------------------------- internals
    @property
    def _pki(self) -> Path:
        return self.workdir / "pki"

    @property
    def _logs(self) -> Path:
        return self.settings.logs_dir or self.workdir / "logs"

    def _write_pki(self) -> None:
        # The clock is read here, at the edge, and handed to the PKI; 1 h back tolerates skew.
        now = dt.datetime.now(dt.UTC) - dt.timedelta(hours=1)
        ca = pki.Authority(self._pki, not_before=now)
        self._authority = ca
        self.ca_cert = ca.ca.cert
        ca.issue(
            "apiserver",
            common_name="kube-apiserver",
            dns_names=("localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc"),
            ip_addresses=("127.0.0.1", "10.0.0.1"),
            server=True,
        )
        # The apiserver's client identity towards kubelets (exec, logs, port-forward): a member of
        # system:masters, so a kubelet's Webhook authorization admits it.
        ca.issue(
            "apiserver-kubelet-client",
            common_name="kube-apiserver-kubelet-client",
            organizations=("system:masters",),
            client=True,
        )
        pki.write_service_account_keys(self._pki)

    def _kubeconfig(self, name: str, user: str, groups: tuple[str, ...] = ()) -> Path:
        assert self._authority is not None
        pair = self._authority.issue(name, common_name=user, organizations=groups, client=True)
        doc: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": "lab",
                    "cluster": {"server": self.server, "certificate-authority": str(self.ca_cert)},
                }
            ],
            "users": [
                {"name": user, "user": {"client-certificate": str(pair.cert), "client-key": str(pair.key)}}
            ],
            "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": user}}],
            "current-context": "lab",
        }
        path = self.workdir / f"{name}.kubeconfig"
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        path.chmod(0o600)
        return path

    def _gates(self) -> list[str]:
        return [f"--feature-gates={self.settings.feature_gates}"] if self.settings.feature_gates else []

    def _spawn(self, name: str, argv: list[str]) -> Process:
        proc = Process(name=name, argv=argv, log_path=self._logs / f"{name}.log")
        self.processes.append(proc)
        proc.start()
        return proc

    def _start_etcd(self) -> None:
        client_port, peer_port = free_port(), free_port()
        self.ports["etcd"], self.ports["etcd-peer"] = client_port, peer_port
        url = f"http://127.0.0.1:{client_port}"
        proc = self._spawn(
            "etcd",
            [
                str(binaries.find("etcd")),
                "--name=lab",
                f"--data-dir={self.workdir / 'etcd'}",
                f"--listen-client-urls={url}",
                f"--advertise-client-urls={url}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-advertise-peer-urls=http://127.0.0.1:{peer_port}",
                f"--initial-cluster=lab=http://127.0.0.1:{peer_port}",
                "--unsafe-no-fsync=true",
                "--log-level=warn",
            ],
        )
        wait_until(
            "etcd to accept connections",
            lambda: port_in_use(client_port),
            timeout_s=self.settings.start_timeout_s,
            process=proc,
        )

    def _start_apiserver(self) -> None:
        port = free_port()
        self.ports["kube-apiserver"] = port
        self.server = f"https://127.0.0.1:{port}"
        p = self._pki
        argv = [
            str(binaries.find("kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            f"--secure-port={port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--tls-cert-file={p / 'apiserver.crt'}",
            f"--tls-private-key-file={p / 'apiserver.key'}",
            f"--client-ca-file={p / 'ca.crt'}",
            f"--service-account-issuer=https://127.0.0.1:{port}",
            f"--service-account-key-file={p / 'sa.pub'}",
            f"--service-account-signing-key-file={p / 'sa.key'}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            "--allow-privileged=true",
            "--profiling=false",
            # Real lab nodes (lab/sriov_dra_lab/real_node.py): reach a kubelet by its node IP (node names do not resolve).
            f"--kubelet-client-certificate={p / 'apiserver-kubelet-client.crt'}",
            f"--kubelet-client-key={p / 'apiserver-kubelet-client.key'}",
            "--kubelet-preferred-address-types=InternalIP,Hostname",
            *self._gates(),
        ]
        if self.settings.kubelet_proxy:
            egress = self.workdir / "egress-selector.yaml"
            egress.write_text(EGRESS_SELECTOR.format(socket=self.settings.kubelet_proxy))
            argv.append(f"--egress-selector-config-file={egress}")
        if self.settings.audit:
            policy = self.workdir / "audit-policy.yaml"
            policy.write_text(AUDIT_POLICY)
            argv += [
                f"--audit-policy-file={policy}",
                f"--audit-log-path={self.audit_log}",
                "--audit-log-mode=blocking",
                "--audit-log-format=json",
            ]
        proc = self._spawn("kube-apiserver", argv)
        self.kubeconfig = self._kubeconfig("admin", "lab-admin", ("system:masters",))
        with self.api() as api:
            wait_until(
                "kube-apiserver /readyz",
                lambda: apiserver_probes.probe(api, "/readyz")[0],
                timeout_s=self.settings.start_timeout_s,
                process=proc,
            )

    @property
    def audit_log(self) -> Path:
        """Path of the apiserver audit log, with the component logs (written only with ``settings.audit``)."""
        return self._logs / "audit.log"

    def _install_nad_crd(self) -> None:
        crd = strict_yaml.read(NAD_CRD)
        with self.api() as api:
            apply.apply_objects(api, [crd])
            apply.wait_crds_established(api, [crd["metadata"]["name"]])

    def _start_controller_manager(self) -> None:
        port = free_port()
        self.ports["kube-controller-manager"] = port
        kc = self._kubeconfig("controller-manager", "system:kube-controller-manager")
        proc = self._spawn(
            "kube-controller-manager",
            [
                str(binaries.find("kube-controller-manager")),
                f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--service-account-private-key-file={self._pki / 'sa.key'}",
                f"--root-ca-file={self.ca_cert}",
                "--use-service-account-credentials=true",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                "--controllers=*",
                *self._gates(),
            ],
        )
        self._wait_healthz(proc, port)

    def _start_scheduler(self) -> None:
        port = free_port()
        self.ports["kube-scheduler"] = port
        kc = self._kubeconfig("scheduler", "system:kube-scheduler")
        proc = self._spawn(
            "kube-scheduler",
            [
                str(binaries.find("kube-scheduler")),
                f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--leader-elect=false",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                *self._gates(),
            ],
        )
        self._wait_healthz(proc, port)

    def _wait_healthz(self, proc: Process, port: int) -> None:
        import ssl
        import urllib.request

        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE  # self-signed serving cert generated by the component

        def healthy() -> bool:
            try:
                with urllib.request.urlopen(f"https://127.0.0.1:{port}/healthz", context=ctx, timeout=2) as r:
                    return bool(r.status == 200)
            except OSError:
                return False

        wait_until(f"{proc.name} /healthz", healthy, timeout_s=self.settings.start_timeout_s, process=proc)


@contextmanager
def running(settings: ControlPlaneSettings | None = None) -> Iterator[ControlPlane]:
    """Start a control plane for the duration of a ``with`` block, then stop it.

    Raises: as :meth:`ControlPlane.start`; on failure the log tails are in the message.
    """
    cp = ControlPlane(settings or ControlPlaneSettings())
    try:
        cp.start()
    except ProcessFailed:
        raise
    try:
        yield cp
    finally:
        cp.stop()
