"""Two ``sriov-dra-guard serve`` processes of a rolling update on one socket path and health address.

The daemons run through their entrypoint (``sriov_dra_lab.guard.GuardDaemon``) with their Pod UIDs
(``--pod-uid``), as the DaemonSet runs them; their kubeconfig names an API server nobody serves, as
a take-over makes no API request. What is checked is docs/guard.md#rolling-update as the probes
and the socket see it: the new daemon takes the path and the address over, answers the old Pod's
liveness probe, and the old Pod's restarted daemon idles instead of taking the path back.
"""

from __future__ import annotations

import os
from pathlib import Path

from tests import health_probes, waiting

from sriov_dra_lab import guard, processes

KUBECONFIG = """apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:9"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
"""


def _probe(port: int, path: str, pod_uid: str) -> tuple[int, str]:
    try:
        return health_probes.get(port, path, pod_uid)
    except OSError as exc:  # nobody bound the address (between two holders)
        return 0, str(exc)


def test_the_old_pods_restarted_daemon_idles_alive_and_unready_and_never_takes_the_socket_back(
    short_dir: Path,
) -> None:
    kubeconfig = short_dir / "kubeconfig"
    kubeconfig.write_text(KUBECONFIG)
    socket_path = short_dir / "run" / "guard.sock"
    port = processes.free_port()

    def daemon(pod_uid: str, log: str) -> guard.GuardDaemon:
        return guard.GuardDaemon(
            socket_path=socket_path,
            kubeconfig=kubeconfig,
            log_path=short_dir / log,
            extra_args=[f"--pod-uid={pod_uid}"],
            metrics_port=port,
        )

    old, new, restarted = (
        daemon("pod-old", "old.log"),
        daemon("pod-new", "new.log"),
        daemon("pod-old", "again.log"),
    )
    try:
        old.start()
        new.start()
        waiting.eventually(
            "the new daemon serving its own readiness probe",
            lambda: _probe(port, "/readyz", "pod-new")[0] == 200,
            timeout_s=30,
            interval_s=0.1,
        )
        held = os.stat(socket_path).st_ino
        status, body = _probe(port, "/healthz", "pod-old")
        assert status == 200 and "superseded by Pod pod-new" in body
        assert _probe(port, "/readyz", "pod-old")[0] == 503
        old.stop()  # the liveness restart the probe no longer causes, or a crash
        restarted.start()  # its /readyz without a Pod UID is the holder's answer
        waiting.eventually(
            "the restarted old daemon idling",
            lambda: "a newer daemon superseded this one" in (short_dir / "again.log").read_text(),
            timeout_s=30,
            interval_s=0.1,
        )
        assert restarted.process is not None and restarted.process.running()
        assert os.stat(socket_path).st_ino == held
        assert _probe(port, "/healthz", "pod-old")[0] == 200
        assert _probe(port, "/readyz", "pod-new")[0] == 200
        restarted.stop()
        assert restarted.process.popen is not None and restarted.process.popen.returncode == 0
        assert os.stat(socket_path).st_ino == held, "the idle daemon's stop leaves the holder's socket"
    finally:
        for each in (restarted, new, old):
            each.stop()
