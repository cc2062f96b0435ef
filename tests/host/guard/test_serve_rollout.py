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

import pytest
from tests import health_probes, waiting

from sriov_dra.host import socket_takeover
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


def _rollout(short_dir: Path) -> tuple[Path, int, guard.GuardDaemon, guard.GuardDaemon, guard.GuardDaemon]:
    """The socket path, the health port and three daemons on them, not started: the old Pod's, the
    new Pod's and the old Pod's restart (logs old.log, new.log, again.log in ``short_dir``)."""
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

    return (
        socket_path,
        port,
        daemon("pod-old", "old.log"),
        daemon("pod-new", "new.log"),
        daemon("pod-old", "again.log"),
    )


def _roll(old: guard.GuardDaemon, new: guard.GuardDaemon, port: int) -> None:
    """Start the old Pod's daemon, then the new one, and wait until the new one serves its own probe."""
    old.start()
    new.start()
    waiting.eventually(
        "the new daemon serving its own readiness probe",
        lambda: _probe(port, "/readyz", "pod-new")[0] == 200,
        timeout_s=30,
        interval_s=0.1,
    )


def test_the_old_pods_restarted_daemon_idles_alive_and_unready_while_the_new_one_serves(
    short_dir: Path,
) -> None:
    socket_path, port, old, new, restarted = _rollout(short_dir)
    try:
        _roll(old, new, port)
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


@pytest.mark.parametrize("old_restarted", [False, True], ids=["idle-since-superseded", "restarted-idle"])
def test_an_idle_superseded_daemon_takes_the_socket_and_address_back_once_the_newer_daemon_stops(
    short_dir: Path, old_restarted: bool
) -> None:
    """A rollback of a broken image deletes the new Pod while the old one idles: the old Pod's
    daemon, superseded in place or restarted since, notices within its 0.5 s look that nobody
    accepts at the path any more and takes it and the health address back, ready on its own
    probe, without a restart (before, it idled and every managed ADD on the node failed)."""
    socket_path, port, old, new, restarted = _rollout(short_dir)
    idle = restarted if old_restarted else old
    try:
        _roll(old, new, port)
        if old_restarted:
            old.stop()
            restarted.start()
            waiting.eventually(
                "the restarted old daemon idling",
                lambda: "a newer daemon superseded this one" in (short_dir / "again.log").read_text(),
                timeout_s=30,
                interval_s=0.1,
            )
        assert _probe(port, "/readyz", "pod-old")[0] == 503
        pid = idle.process.popen.pid if idle.process and idle.process.popen else None
        new.stop()  # the rollback deletes the new Pod: its stop removes the path
        waiting.eventually(
            "the old Pod's daemon ready on its own probe again",
            lambda: _probe(port, "/readyz", "pod-old")[0] == 200,
            timeout_s=30,
            interval_s=0.1,
        )
        assert socket_takeover.accepting(socket_path)
        assert socket_takeover.instances(socket_path) == ["pod-old", "pod-new"]
        assert idle.process is not None and idle.process.running() and idle.process.popen is not None
        assert idle.process.popen.pid == pid, "taken back without a restart"
    finally:
        for each in (restarted, new, old):
            each.stop()
