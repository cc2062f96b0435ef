"""A Pod on a real lab node reaches the API server at the ``kubernetes`` Service IP, as in-cluster clients do.

There is no kube-proxy: the real node's DNAT rule (``RealNode._route_service_ip``) stands where its
rules would. The client runs in the Pod's own network namespace with what the kubelet gave the Pod
(``KUBERNETES_SERVICE_HOST``/``PORT`` and its ServiceAccount token) and verifies the apiserver's
certificate for the Service IP against the cluster CA. (busybox's wget cannot: its TLS offers none
of the apiserver's cipher suites, so the request is made by Python inside the Pod's netns.)
"""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

from kubernetes import client
from tests.e2e.realnode.pods import busybox_pod, delete_pod, run_pod

SA = "/var/run/secrets/kubernetes.io/serviceaccount"
CLIENT = """
import json, ssl, sys, urllib.request
host, port, token, ca = sys.argv[1:5]
request = urllib.request.Request(f"https://{host}:{port}/version", headers={"Authorization": f"Bearer {token}"})
with urllib.request.urlopen(request, context=ssl.create_default_context(cafile=ca), timeout=20) as answer:
    print(json.dumps(json.load(answer)))
"""


def test_pod_netns_reaches_the_api_server_at_the_kubernetes_service_ip_with_its_service_account(
    real_node: Any, control_plane: Any, api: client.ApiClient, namespace: str
) -> None:
    from sriov_dra_lab import real_stack

    core = client.CoreV1Api(api)
    live, _seconds = run_pod(core, namespace, busybox_pod("api-client", real_node.name, "sleep 3600"))
    (container,) = real_node.crictl(
        "ps", "-q", f"--pod={_sandbox(real_node, live.metadata.uid)}"
    ).stdout.split()

    def in_pod(*argv: str) -> str:
        done = real_node.crictl("exec", container, *argv)
        assert done.returncode == 0, done.stderr
        return str(done.stdout).strip()

    host, port = (
        in_pod("sh", "-c", "echo $KUBERNETES_SERVICE_HOST"),
        in_pod("sh", "-c", "echo $KUBERNETES_SERVICE_PORT"),
    )
    assert host == core.read_namespaced_service("kubernetes", "default").spec.cluster_ip
    netns = real_stack.sandbox_netns(real_node, live.metadata.uid)
    assert netns is not None
    done = subprocess.run(
        [
            "nsenter",
            f"--net={netns}",
            sys.executable,
            "-c",
            CLIENT,
            host,
            port,
            in_pod("cat", f"{SA}/token"),
            str(control_plane.ca_cert),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["gitVersion"].startswith("v1.36")
    delete_pod(core, namespace, "api-client")


def _sandbox(node: Any, pod_uid: str) -> str:
    (sandbox,) = node.crictl("pods", "-q", f"--label=io.kubernetes.pod.uid={pod_uid}").stdout.split()
    return str(sandbox)
