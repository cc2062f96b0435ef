"""Run a rendered DaemonSet's exec probe against a real health server, as the kubelet would.

The plugin's and the guard's probes are ``bash -c`` commands that send the Pod's UID
(``$POD_UID``) to the node's health address; both templates' tests run them here.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import prometheus_client

from sriov_dra.servicekit import probes


def run(probe: dict[str, Any], pod_uid: str) -> tuple[int, str]:
    """``(exit status, output)`` of ``probe``'s exec command in a container whose POD_UID is ``pod_uid``."""
    done = subprocess.run(
        probe["exec"]["command"],
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "POD_UID": pod_uid},
        capture_output=True,
        text=True,
        timeout=10,
        check=False,
    )
    return done.returncode, done.stdout + done.stderr


@contextmanager
def health_server(pod_uid: str) -> Iterator[tuple[probes.Health, int]]:
    """A health server of Pod ``pod_uid`` on 127.0.0.1 (any free port): its state and port."""
    state = probes.Health(["registered"], pod_uid=pod_uid)
    server = probes.HttpServer(
        "127.0.0.1:0", state, probes.registry_renderer(prometheus_client.CollectorRegistry())
    )
    server.start()
    try:
        yield state, server.port
    finally:
        server.stop()
