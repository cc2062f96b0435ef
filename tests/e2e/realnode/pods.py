"""Pods the real-node tests run: the lab's local busybox image, scheduled onto a given real node."""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client
from tests.waiting import eventually


def busybox_pod(name: str, node: str, script: str) -> dict[str, Any]:
    """A Pod of the lab's local busybox image on ``node`` (chosen by the scheduler through a nodeSelector)."""
    from sriov_dra_lab import images

    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "main",
                    "image": images.BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", script],
                }
            ],
        },
    }


def run_pod(core: client.CoreV1Api, namespace: str, pod: dict[str, Any]) -> tuple[client.V1Pod, float]:
    """Create ``pod`` and wait until it is Running with an IP; returns it and the seconds it took."""
    name = pod["metadata"]["name"]
    applied = time.monotonic()
    core.create_namespaced_pod(namespace, pod)

    def running() -> client.V1Pod | None:
        got = core.read_namespaced_pod(name, namespace)
        return got if got.status.phase == "Running" and got.status.pod_ip else None

    live = eventually(f"Pod {namespace}/{name} Running with an IP", running, timeout_s=120, interval_s=0.2)
    return live, time.monotonic() - applied


def delete_pod(core: client.CoreV1Api, namespace: str, name: str) -> None:
    """Delete the Pod and wait until the API no longer has it."""
    core.delete_namespaced_pod(name, namespace)

    def gone() -> bool:
        try:
            core.read_namespaced_pod(name, namespace)
        except client.ApiException as exc:
            return exc.status == 404
        return False

    eventually(f"Pod {namespace}/{name} to be deleted", gone, timeout_s=120, interval_s=0.2)
