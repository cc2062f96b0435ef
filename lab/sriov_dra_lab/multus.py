"""Multus and its neighbours in the lab: identities, the thick daemon, the IPAM datastore CRDs.

* :func:`service_account_kubeconfig` gives a component a real, minimal identity: a ServiceAccount
  bound to a ClusterRole, a bound token from the TokenRequest API, and a kubeconfig using it. The
  guard gets the shipped ``sriov-dra-guard`` ClusterRole (get pods and NADs only);
  Multus gets :data:`MULTUS_RULES`, what its own deployment grants.
* :class:`ThickMultus` runs the pinned ``multus-daemon`` with a daemon config that pins the primary
  (``multusMasterCNI``) and writes its generated ``00-multus.conf`` into its own directory, so the
  runtime's conf dir holds only the guard's file and the primary. The daemon only accepts
  in-cluster credentials, read from ``/var/run/secrets/kubernetes.io/serviceaccount``; it is
  started in a private mount namespace (``unshare --mount --propagation slave``) where a lab
  directory with the token and CA is bind-mounted there, so nothing on the host is replaced. The
  empty mount point directory is created on the host if missing and left in place.
* :func:`install_whereabouts_crds` installs the lab's minimal whereabouts CRDs.
"""

from __future__ import annotations

import json
import os
import shlex
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlparse

import yaml
from kubernetes import client
from kubernetes.client.rest import ApiException

from sriov_dra.host import strict_yaml
from sriov_dra.kube import apply
from sriov_dra_lab import binaries, processes
from sriov_dra_lab.paths import LAB_MANIFESTS, MANIFESTS

GUARD_CLUSTER_ROLE: Final = MANIFESTS / "guard" / "clusterrole.yaml"
WHEREABOUTS_CRDS: Final = LAB_MANIFESTS / "whereabouts-crds.yaml"
SA_MOUNT: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount")

MULTUS_RULES: Final[list[dict[str, Any]]] = [
    {"apiGroups": ["k8s.cni.cncf.io"], "resources": ["*"], "verbs": ["get", "list", "watch"]},
    {
        "apiGroups": [""],
        "resources": ["pods", "pods/status"],
        "verbs": ["get", "list", "watch", "update", "patch"],
    },
    {"apiGroups": ["", "events.k8s.io"], "resources": ["events"], "verbs": ["create", "patch", "update"]},
]
"""Multus's permissions, as its upstream deployment manifests grant them."""


def cluster_role(name: str, rules: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """A ClusterRole manifest."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": name},
        "rules": [dict(r) for r in rules],
    }


def guard_cluster_role() -> dict[str, Any]:
    """The shipped ``sriov-dra-guard`` ClusterRole."""
    doc = strict_yaml.read(GUARD_CLUSTER_ROLE)
    assert isinstance(doc, dict)
    return doc


def service_account_kubeconfig(
    api: client.ApiClient,
    *,
    namespace: str,
    name: str,
    role: Mapping[str, Any],
    server: str,
    ca_cert: Path,
    path: Path,
    expiration_s: int = 3600,
) -> Path:
    """Create (or reuse) ServiceAccount ``namespace/name`` bound to ``role``; write a token kubeconfig.

    Units: ``expiration_s`` seconds of token lifetime. Returns ``path``.
    Raises: ``ApiException`` from the client.
    """
    apply.apply_objects(
        api,
        [
            dict(role),
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": name, "namespace": namespace},
            },
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "ClusterRoleBinding",
                "metadata": {"name": f"{role['metadata']['name']}-{namespace}-{name}"},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": role["metadata"]["name"],
                },
                "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
            },
        ],
    )
    token = request_token(api, namespace=namespace, name=name, expiration_s=expiration_s)
    doc = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "lab", "cluster": {"server": server, "certificate-authority": str(ca_cert)}}],
        "users": [{"name": name, "user": {"token": token}}],
        "contexts": [{"name": "lab", "context": {"cluster": "lab", "user": name, "namespace": namespace}}],
        "current-context": "lab",
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


def request_token(api: client.ApiClient, *, namespace: str, name: str, expiration_s: int) -> str:
    """A bound token for ServiceAccount ``namespace/name`` from the TokenRequest API."""
    body = client.AuthenticationV1TokenRequest(
        spec=client.V1TokenRequestSpec(audiences=None, expiration_seconds=expiration_s)
    )
    answer = client.CoreV1Api(api).create_namespaced_service_account_token(name, namespace, body)
    token: str = answer.status.token
    return token


def install_whereabouts_crds(api: client.ApiClient) -> None:
    """Install the lab's whereabouts CRDs and wait until they are established."""
    docs = [d for d in strict_yaml.read_all(WHEREABOUTS_CRDS) if d]
    apply.apply_objects(api, docs)
    apply.wait_crds_established(api, [d["metadata"]["name"] for d in docs])


def ensure_namespace(api: client.ApiClient, name: str) -> None:
    """Create namespace ``name`` unless it exists."""
    try:
        client.CoreV1Api(api).create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    except ApiException as exc:
        if exc.status != 409:
            raise


@dataclass
class ThickMultus:
    """A running ``multus-daemon`` (thick Multus) for one lab node.

    ``socket_dir`` is what the guard's ``multus.daemonSocketDir`` must name; ``daemon_config`` the
    daemon config file (``multus.daemonConfigFile``); ``generated_conf_dir`` where the daemon writes
    its own ``00-multus.conf``.
    """

    workdir: Path
    bin_dir: Path
    primary_config: Path
    node_name: str
    server: str
    ca_cert: Path
    token: str
    cni_version: str = "1.0.0"
    extra_config: Mapping[str, Any] = field(default_factory=dict)
    process: processes.Process | None = field(default=None, init=False)

    @property
    def socket_dir(self) -> Path:
        """The daemon's socket directory."""
        return self.workdir / "run"

    @property
    def daemon_config(self) -> Path:
        """The daemon config file."""
        return self.workdir / "daemon-config.json"

    @property
    def generated_conf_dir(self) -> Path:
        """Where the daemon writes its generated ``00-multus.conf``."""
        return self.workdir / "generated"

    @property
    def cache_dir(self) -> Path:
        """Multus's delegate cache (``cniDir``)."""
        return self.workdir / "cache"

    def start(self, *, timeout_s: float = 60.0) -> None:
        """Write the daemon config and credentials, start the daemon, wait for its socket.

        Raises: ``binaries.BinaryMissing``; ``processes.ProcessFailed`` with the log tail when it
        exits or never answers ``/healthz``.
        """
        daemon = binaries.find("multus-daemon")
        for d in (self.generated_conf_dir, self.cache_dir, self.workdir / "sa"):
            d.mkdir(parents=True, exist_ok=True)
        sa = self.workdir / "sa"
        (sa / "token").write_text(self.token)
        (sa / "ca.crt").write_bytes(self.ca_cert.read_bytes())
        (sa / "namespace").write_text("kube-system")
        config = {
            "cniVersion": self.cni_version,
            "logToStderr": True,
            "logLevel": "verbose",
            "socketDir": f"{self.socket_dir}/",
            "daemonSocketDir": f"{self.socket_dir}/",  # copied into the generated 00-multus.conf for multus-shim
            "multusConfigFile": "auto",
            "multusAutoconfigDir": str(self.primary_config.parent),
            "multusMasterCNI": self.primary_config.name,
            "cniConfigDir": str(self.generated_conf_dir),
            "binDir": str(self.bin_dir),
            "cniDir": str(self.cache_dir),
            **dict(self.extra_config),
        }
        self.daemon_config.write_text(json.dumps(config, indent=2))
        SA_MOUNT.mkdir(parents=True, exist_ok=True)  # mount point only; left in place (see module doc)
        url = urlparse(self.server)
        script = (
            f"mount --bind {shlex.quote(str(sa))} {shlex.quote(str(SA_MOUNT))} && "
            f"exec {shlex.quote(str(daemon))} -config {shlex.quote(str(self.daemon_config))}"
        )
        env = dict(os.environ)
        env.update(
            {
                "KUBERNETES_SERVICE_HOST": url.hostname or "127.0.0.1",
                "KUBERNETES_SERVICE_PORT": str(url.port or 443),
                "MULTUS_NODE_NAME": self.node_name,
                "CNI_PATH": str(self.bin_dir),
            }
        )
        self.process = processes.Process(
            name="multus-daemon",
            argv=["unshare", "--mount", "--propagation", "slave", "sh", "-c", script],
            log_path=self.workdir / "multus-daemon.log",
            env=env,
            stop_grace_s=15.0,
        )
        self.process.start()
        processes.wait_until(
            "multus-daemon /healthz", self.healthy, timeout_s=timeout_s, process=self.process, interval_s=0.1
        )

    def healthy(self) -> bool:
        """True when the daemon answers ``GET /healthz`` with 200 on its socket."""
        path = self.socket_dir / "multus.sock"
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(1.0)
                sock.connect(str(path))
                sock.sendall(b"GET /healthz HTTP/1.0\r\nHost: dummy\r\n\r\n")
                head = sock.recv(64)
        except OSError:
            return False
        return head.startswith(b"HTTP/1.") and b" 200" in head[:16]

    def stop(self) -> None:
        """Stop the daemon (SIGTERM, grace, SIGKILL) and reap it."""
        if self.process is not None:
            self.process.stop()
