"""Tests for sriov_dra.guard.server: the shim<->daemon wire format as the daemon decodes it.

The daemon serves a real unix socket; a recording stand-in for the CNI hooks proves which
requests reach a decision. Every request the daemon cannot decode must still get one answer, a
CNI error, and never reach the hooks (module contract of ``guard.server``).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import tempfile
import threading
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, cast

import pytest
from tests import waiting

from sriov_dra.guard import cni_hooks, decisions, metrics, server, settings, shim
from sriov_dra.host import socket_takeover

ENV = {"CNI_COMMAND": "ADD", "CNI_CONTAINERID": "c1", "CNI_NETNS": "/var/run/netns/x", "CNI_IFNAME": "eth0"}
STDIN = '{"cniVersion":"1.0.0","name":"multus-cni-network","type":"multus-guard"}'


class RecordingHooks:
    """Stands in for ``cni_hooks.CniHooks``: records each decoded request and answers ``ok``."""

    def __init__(self) -> None:
        self.settings = settings.GuardSettings(add_budget_s=5.0)
        self.metrics = metrics.GuardMetrics()
        self.calls: list[tuple[dict[str, str], bytes]] = []

    def handle(self, env: Mapping[str, str], stdin: bytes) -> cni_hooks.Outcome:
        self.calls.append((dict(env), stdin))
        return cni_hooks.Outcome(decisions.Reason.PASSED_THROUGH, 0, "ok")


@pytest.fixture
def served() -> Iterator[tuple[RecordingHooks, Path]]:
    hooks = RecordingHooks()
    with tempfile.TemporaryDirectory(prefix="gs") as directory:  # short: unix socket paths are limited
        path = Path(directory) / "run" / "guard.sock"
        srv = server.GuardServer(cast(cni_hooks.CniHooks, hooks), path, max_concurrent=2)
        srv.start()
        try:
            yield hooks, path
        finally:
            srv.stop(grace_s=2.0)


def _ask(path: Path, payload: bytes) -> tuple[int, str]:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10.0)
        sock.connect(str(path))
        sock.sendall(payload)
        sock.shutdown(socket.SHUT_WR)
        return shim.decode_response(shim.read_all(sock))


def _request(**fields: Any) -> bytes:
    obj: dict[str, Any] = {"protocol": shim.PROTOCOL, "env": ENV, "stdin": STDIN}
    obj.update(fields)
    return json.dumps(obj).encode()


def test_request_encoded_by_the_shim_reaches_the_hooks_unchanged(served: tuple[RecordingHooks, Path]) -> None:
    hooks, path = served
    env = {**ENV, "CNI_ARGS": "K8S_POD_NAMESPACE=ns;K8S_POD_NAME=p", "HOME": "/root"}
    stdin = '{"cniVersion":"1.0.0","name":"n","x":"é"}'.encode()
    assert _ask(path, shim.encode_request(env, stdin)) == (0, "ok")
    assert hooks.calls == [({k: v for k, v in env.items() if k.startswith("CNI_")}, stdin)]


@pytest.mark.parametrize(
    ("payload", "mentions"),
    [
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b"\xff\xfe", "could not decode"),
        (_request(protocol=True), "unknown protocol"),
        (_request(protocol=1.0), "unknown protocol"),
        (_request(env={"CNI_COMMAND": {"op": "ADD"}}), "env"),
        (_request(env={"CNI_COMMAND": 1}), "env"),
        (_request(stdin="\ud800"), "surrogates not allowed"),
    ],
    ids=[
        "nested-too-deeply",
        "not-utf8",
        "protocol-boolean-true",
        "protocol-float-one",
        "env-value-object",
        "env-value-number",
        "stdin-lone-surrogate",
    ],
)
def test_undecodable_request_gets_one_cni_error_answer_and_no_decision(
    served: tuple[RecordingHooks, Path], payload: bytes, mentions: str
) -> None:
    hooks, path = served
    code, stdout = _ask(path, payload)
    error = json.loads(stdout)
    assert code == 1 and error["code"] == shim.CniErrorCode.DECODE
    assert "could not decode" in error["msg"] and mentions in error["msg"]
    assert hooks.calls == []


# --- rolling update: one socket path, taken over atomically (docs/guard.md#rolling-update) ---


def _answered(path: Path) -> bool:
    code, _ = _ask(path, _request())
    return code == 0


def test_a_new_daemon_takes_the_socket_over_while_shims_connect_and_none_fails() -> None:
    """Shims connect in a loop while a second daemon starts on the same path and the first one stops:
    every request is answered, the new daemon gets the requests after its start (the old one then
    knows it is superseded, and frees the health address: docs/guard.md#rolling-update), and the
    old one's stop leaves the new one's socket in place."""
    with tempfile.TemporaryDirectory(prefix="gs") as directory:
        path = Path(directory) / "run" / "guard.sock"
        old_hooks, new_hooks = RecordingHooks(), RecordingHooks()
        old = server.GuardServer(cast(cni_hooks.CniHooks, old_hooks), path, max_concurrent=4)
        new = server.GuardServer(cast(cni_hooks.CniHooks, new_hooks), path, max_concurrent=4)
        old.start()
        failures: list[BaseException] = []
        answered = 0
        done = threading.Event()

        def shims() -> None:
            nonlocal answered
            while not done.is_set():
                try:
                    assert _answered(path)
                    answered += 1
                except BaseException as exc:  # collected: the assertion below names it
                    failures.append(exc)

        loop = threading.Thread(target=shims)
        loop.start()
        try:
            waiting.eventually(
                "requests to the old daemon",
                lambda: len(old_hooks.calls) >= 5,
                timeout_s=30,
                interval_s=0.01,
            )
            assert not old.superseded()
            new.start()
            assert old.superseded() and not new.superseded()
            waiting.eventually(
                "requests to the new daemon",
                lambda: len(new_hooks.calls) >= 5,
                timeout_s=30,
                interval_s=0.01,
            )
            old.stop(grace_s=2.0)
            after = len(new_hooks.calls)
            waiting.eventually(
                "requests after the old daemon stopped",
                lambda: len(new_hooks.calls) >= after + 5,
                timeout_s=30,
                interval_s=0.01,
            )
        finally:
            done.set()
            loop.join(timeout=30)
            new.stop(grace_s=2.0)
        assert failures == [] and answered >= 15
        assert not path.exists(), "the last daemon removes its own socket"
        assert [p.name for p in path.parent.iterdir()] == [".guard.sock.lock"], "no staging socket is left"


def test_the_shim_waits_a_bounded_time_for_a_daemon_to_listen(monkeypatch: pytest.MonkeyPatch) -> None:
    """No socket yet (a restart): the shim's connect waits until a daemon listens; with none, it
    gives up after DAEMON_WAIT_S with the last error."""
    with tempfile.TemporaryDirectory(prefix="gs") as directory:
        path = Path(directory) / "run" / "guard.sock"
        srv = server.GuardServer(cast(cni_hooks.CniHooks, RecordingHooks()), path, max_concurrent=1)
        starter = threading.Timer(0.5, srv.start)
        starter.start()
        try:
            with shim.connect_daemon(str(path), 30.0) as sock:
                sock.sendall(_request())
                sock.shutdown(socket.SHUT_WR)
                assert shim.decode_response(shim.read_all(sock))[0] == 0
        finally:
            starter.join()
            srv.stop(grace_s=2.0)
        monkeypatch.setattr(shim, "DAEMON_WAIT_S", 0.3)
        with pytest.raises(FileNotFoundError):
            shim.connect_daemon(str(path), 30.0)


def _guard(path: Path, instance: str = "") -> tuple[server.GuardServer, RecordingHooks]:
    hooks = RecordingHooks()
    return server.GuardServer(
        cast(cni_hooks.CniHooks, hooks), path, max_concurrent=4, instance=instance
    ), hooks


def _queued_request(path: Path) -> socket.socket:
    """A shim's connection with its request sent: it waits in the listen backlog until accepted."""
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(10.0)
    sock.connect(str(path))
    sock.sendall(_request())
    sock.shutdown(socket.SHUT_WR)
    return sock


def test_connections_queued_on_a_superseded_daemon_are_answered_before_its_socket_closes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Shims whose connections still wait in the old daemon's listen backlog when a new daemon takes
    the path over and the old one stops each get the old daemon's answer, none is reset: the old
    one drains its backlog before it closes (docs/guard.md#rolling-update)."""
    stalled = threading.Event()

    class LaggingListener(socket.socket):
        """Fault injected at the socket boundary: while ``stalled`` is set, ``accept`` takes nothing
        (an accept loop lagging behind its shims), so connections wait in the kernel's backlog."""

        def accept(self) -> tuple[socket.socket, Any]:
            while stalled.is_set():
                time.sleep(0.01)
            return super().accept()

    monkeypatch.setattr(socket, "socket", LaggingListener)
    with tempfile.TemporaryDirectory(prefix="gs") as directory:
        path = Path(directory) / "run" / "guard.sock"
        old, old_hooks = _guard(path)
        new, _ = _guard(path)
        stalled.set()
        old.start()
        shims: list[socket.socket] = []
        try:
            shims = [_queued_request(path) for _ in range(3)]
            new.start()
            stopping = threading.Thread(target=old.stop, kwargs={"grace_s": 5.0})
            stopping.start()
            waiting.eventually(
                "the old daemon stopping", lambda: not old.ready.is_set(), timeout_s=10, interval_s=0.01
            )
            stalled.clear()
            stopping.join(timeout=30)
            answers = [shim.decode_response(shim.read_all(sock)) for sock in shims]
        finally:
            stalled.clear()
            for sock in shims:
                sock.close()
            new.stop(grace_s=2.0)
        assert answers == [(0, "ok")] * 3 and len(old_hooks.calls) == 3


def test_a_stopping_daemon_never_removes_the_socket_a_newer_daemon_just_put_at_the_path(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The old daemon stops just as a new one takes the path over (the new one's start is injected
    at the old one's removal of the path, after it saw its own socket there): the new socket stays
    and answers, as every change of the path is one step under its lock."""
    with tempfile.TemporaryDirectory(prefix="gs") as directory:
        path = Path(directory) / "run" / "guard.sock"
        old, _ = _guard(path)
        new, new_hooks = _guard(path)
        old.start()
        real_unlink = os.unlink
        starts: list[threading.Thread] = []

        def unlink_racing_a_takeover(target: Any, *args: Any, **kwargs: Any) -> None:
            if Path(target) == path and not starts:
                starts.append(threading.Thread(target=new.start))
                starts[0].start()
                new.ready.wait(timeout=1.0)  # without the lock the rename lands now
            real_unlink(target, *args, **kwargs)

        monkeypatch.setattr(os, "unlink", unlink_racing_a_takeover)
        try:
            old.stop(grace_s=2.0)
            starts[0].join(timeout=30)
            assert _answered(path) and len(new_hooks.calls) == 1
            assert not new.superseded()
        finally:
            new.stop(grace_s=2.0)


def test_a_superseded_daemon_restarted_is_refused_the_path_while_the_newer_one_accepts() -> None:
    """The old Pod's daemon, restarted after a new Pod's daemon took the path over (its liveness
    probe, a crash), is refused the path: the newer daemon keeps answering, and knows the old Pod
    as one it superseded (whose liveness it answers, docs/guard.md#rolling-update)."""
    with tempfile.TemporaryDirectory(prefix="gs") as directory:
        path = Path(directory) / "run" / "guard.sock"
        old, _ = _guard(path, "pod-old")
        new, new_hooks = _guard(path, "pod-new")
        restarted, restarted_hooks = _guard(path, "pod-old")
        old.start()
        new.start()
        try:
            old.stop(grace_s=2.0)
            with pytest.raises(socket_takeover.Retired, match="superseded by pod-new"):
                restarted.start()
            assert _answered(path) and len(new_hooks.calls) == 1 and restarted_hooks.calls == []
            assert not new.superseded() and new.superseded_instances == ("pod-old",)
            assert socket_takeover.instances(path) == ["pod-old", "pod-new"]
        finally:
            new.stop(grace_s=2.0)


def _dead_socket_at(path: Path) -> None:
    """A socket file nobody listens on, as a daemon killed before its stop leaves it."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as dead:
        dead.bind(str(path))


@pytest.mark.parametrize("gone", ["stopped", "died"])
def test_a_superseded_daemon_takes_the_path_back_once_no_daemon_accepts_there(gone: str) -> None:
    """A rollback of a broken image: the new Pod's daemon is gone (its Pod deleted, its stop removed
    the path; or it died, leaving a socket nobody listens on). The old Pod's restarted daemon takes
    the path and answers, keeping its place in the order, so the new Pod's restart takes it again."""
    with tempfile.TemporaryDirectory(prefix="gs") as directory:
        path = Path(directory) / "run" / "guard.sock"
        old, _ = _guard(path, "pod-old")
        new, _ = _guard(path, "pod-new")
        restarted, restarted_hooks = _guard(path, "pod-old")
        new_again, new_again_hooks = _guard(path, "pod-new")
        old.start()
        new.start()
        old.stop(grace_s=2.0)
        new.stop(grace_s=2.0)
        if gone == "died":
            _dead_socket_at(path)
        try:
            assert not socket_takeover.accepting(path)
            restarted.start()
            assert _answered(path) and len(restarted_hooks.calls) == 1
            assert socket_takeover.instances(path) == ["pod-old", "pod-new"]
            new_again.start()
            assert _answered(path) and len(new_again_hooks.calls) == 1 and restarted.superseded()
            assert new_again.superseded_instances == ("pod-old",)
        finally:
            new_again.stop(grace_s=2.0)
            restarted.stop(grace_s=2.0)


def test_the_look_whether_a_daemon_accepts_reaches_no_decision_and_gets_no_answer(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A superseded daemon looks every 0.5 s whether one accepts at the path: the holder sees an
    empty connection, which it neither decides on nor answers nor logs (checked once its stop
    joined every connection's thread)."""
    with tempfile.TemporaryDirectory(prefix="gs") as directory:
        path = Path(directory) / "run" / "guard.sock"
        srv, hooks = _guard(path, "pod-a")
        srv.start()
        with caplog.at_level(logging.DEBUG, logger="sriov_dra.guard"):
            try:
                assert all(socket_takeover.accepting(path) for _ in range(3))
                assert _answered(path)
            finally:
                srv.stop(grace_s=2.0)
        assert len(hooks.calls) == 1 and [r.getMessage() for r in caplog.records] == []
        assert not socket_takeover.accepting(path)


def test_the_holders_restart_a_newer_pod_and_a_daemon_without_a_pod_take_the_path_over() -> None:
    """The ordering rule's other side: the holding Pod's restarted daemon takes its path again (its
    old socket is dead), a newer Pod (a rollback is one too) and a daemon without a Pod UID take it over."""
    with tempfile.TemporaryDirectory(prefix="gs") as directory:
        path = Path(directory) / "run" / "guard.sock"
        daemons = [_guard(path, uid) for uid in ("pod-a", "pod-a", "pod-b", "")]
        try:
            for srv, hooks in daemons:
                srv.start()
                assert _answered(path) and len(hooks.calls) == 1
            assert [srv.superseded() for srv, _ in daemons] == [True, True, True, False]
            assert socket_takeover.instances(path) == ["pod-a", "pod-b"]
            assert daemons[2][0].superseded_instances == ("pod-a",)
        finally:
            for srv, _ in daemons:
                srv.stop(grace_s=2.0)


def test_a_daemon_whose_socket_directory_was_removed_still_stops_cleanly() -> None:
    """Someone removed the socket's directory (and with it the path and its lock file): the stop
    neither fails nor recreates anything there."""
    with tempfile.TemporaryDirectory(prefix="gs") as directory:
        path = Path(directory) / "run" / "guard.sock"
        srv, _ = _guard(path, "pod-a")
        srv.start()
        for entry in path.parent.iterdir():
            entry.unlink()
        path.parent.rmdir()
        srv.stop(grace_s=2.0)
        assert not path.parent.exists()
