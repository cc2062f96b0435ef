"""Cluster tier: the running operator (watches, queue, worker), its Lease, and its entrypoint.

Proves that applying node policies before their SriovNetworks and before the target namespace
yields the right False reasons and then recovers by itself, driven only by watch events (the
periodic resync is set far beyond the test), without re-applying the policies; that exactly one
candidate holds the Lease and a standby takes over after a release or a crash; and that
``python -m sriov_dra.operator`` leads, reconciles, serves metrics and health, logs JSON and stops
cleanly on SIGTERM.
"""

from __future__ import annotations

import json
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tests.cluster.operator.conftest import Harness, eventually

from sriov_dra.kube import leader, objects
from sriov_dra.operator import __main__ as entrypoint
from sriov_dra.operator import app, metrics, settings
from sriov_dra_lab import processes
from sriov_dra_lab.control_plane import ControlPlane


@pytest.fixture
def running(harness: Harness) -> Iterator[app.Operator]:
    """An in-process operator for the harness namespace; watch-driven (resync in an hour)."""
    config = settings.OperatorSettings(
        reconcile=settings.ReconcileSettings(namespace=harness.ns, resync_period_s=3600),
        retry=settings.RetrySettings(initial_s=0.2, max_s=2.0),
    )
    op = app.Operator(
        objects.Objects(harness.api, field_manager="sriov-dra-operator"), config, metrics.Metrics()
    )
    stop = threading.Event()
    thread = threading.Thread(target=op.run, args=(stop,), name="operator-under-test", daemon=True)
    thread.start()
    eventually("the operator's watches to sync", op.synced.is_set)
    try:
        yield op
    finally:
        started = time.monotonic()
        stop.set()
        thread.join(timeout=10)
        assert not thread.is_alive(), "the operator did not stop"
        assert time.monotonic() - started < 2.0, "shutdown took longer than 2 s"


def reasons(h: Harness) -> tuple[str | None, str | None]:
    return h.reason("rail-a-policy"), h.reason("rail-b-policy")


def test_out_of_order_apply_recovers_without_reapplying(harness: Harness, running: app.Operator) -> None:
    h = harness
    node = h.add_node("worker-1")
    policies = h.rails()
    eventually("SriovNetworkNotFound on both policies", lambda: reasons(h) == ("SriovNetworkNotFound",) * 2)
    attrs, srps = h.generated()
    assert attrs == {} and len(srps[node]["spec"]["configs"]) == 2  # filters kept, maps withheld
    h.network("rail-a-net")
    h.network("rail-b-net")
    eventually(
        "NamespaceNotFound on both networks",
        lambda: all(
            (h.ready(n) or {}).get("reason") == "NamespaceNotFound" for n in ("rail-a-net", "rail-b-net")
        ),
    )
    eventually("SriovNetworkNotReady on both policies", lambda: reasons(h) == ("SriovNetworkNotReady",) * 2)
    h.create_namespace(h.target_ns)
    eventually("both policies ready", lambda: reasons(h) == ("DRAConfigurationApplied",) * 2)
    attrs, srps = h.generated()
    assert len(attrs) == 2 and all(
        a["spec"]["attributes"]["sriovnetwork.k8snetworkplumbingwg.io/netAttachDefNamespace"]
        == {"string": h.target_ns}
        for a in attrs.values()
    )
    for original in policies:
        now = h.admin.get(objects.NODE_POLICY, original["metadata"]["name"], h.ns)
        assert now["metadata"]["generation"] == 1 and now["spec"] == original["spec"]  # never re-applied
    h.admin.delete(objects.NAD, "rail-a-net", h.target_ns)
    eventually(
        "the network controller to recreate the deleted NAD",
        lambda: h.admin.get_or_none(objects.NAD, "rail-a-net", h.target_ns),
    )
    eventually("rail-a-policy ready again", lambda: h.reason("rail-a-policy") == "DRAConfigurationApplied")


def test_status_only_ready_change_wakes_the_plan(harness: Harness, running: app.Operator) -> None:
    h = harness
    h.create_namespace(h.target_ns)
    h.add_node("worker-1")
    h.network("rail-a-net")
    h.policy(
        "rail-a-policy",
        pf="ens1f0",
        dra={
            "attributes": {
                "sriovnetwork.openshift.io/sriovNetworkName": {"string": "rail-a-net"},
                "sriovnetwork.openshift.io/sriovNetworkNamespace": {"string": h.ns},
            }
        },
    )
    eventually("rail-a-policy ready", lambda: h.reason("rail-a-policy") == "DRAConfigurationApplied")
    # Someone else's status write (only status changes): Ready=False at the current generation.
    cond = {
        "type": "Ready",
        "status": "False",
        "reason": "NetworkAttachmentDefinitionNotFound",
        "message": "injected",
        "observedGeneration": 1,
        "lastTransitionTime": "2026-01-01T00:00:00Z",
    }
    objects.Objects(h.api, field_manager="someone-else").apply_status(
        objects.SRIOV_NETWORK, "rail-a-net", h.ns, {"conditions": [cond]}
    )
    eventually(
        "the plan to see the status-only change", lambda: h.reason("rail-a-policy") == "SriovNetworkNotReady"
    )


def test_one_lease_holder_and_takeover_after_release_or_crash(api: client.ApiClient, namespace: str) -> None:
    client_ = objects.Objects(api, field_manager="sriov-dra-operator")
    timing = {"lease_duration_s": 3, "renew_deadline_s": 2, "retry_period_s": 1}
    candidates: dict[str, dict[str, Any]] = {}

    def start(identity: str) -> None:
        stop, leading, stopped = threading.Event(), threading.Event(), threading.Event()
        lock = leader.LeaseLock(client_, "op-lease", namespace, identity)
        election = leader.make_election(
            lock,
            leader.LeaseSettings("op-lease", namespace, identity, **timing),
            leader.StopClock(stop),
            on_started=leading.set,
            on_stopped=stopped.set,
        )
        thread = threading.Thread(target=election.run, name=f"election-{identity}", daemon=True)
        thread.start()
        candidates[identity] = {"stop": stop, "leading": leading, "lock": lock, "thread": thread}

    def holder() -> str | None:
        lease = client_.get_or_none(objects.LEASE, "op-lease", namespace)
        return None if lease is None else lease["spec"].get("holderIdentity")

    start("a")
    assert candidates["a"]["leading"].wait(10)
    start("b")
    time.sleep(4)  # longer than a lease duration: a keeps renewing, b must stay a follower
    assert holder() == "a" and not candidates["b"]["leading"].is_set()
    candidates["a"]["stop"].set()
    candidates["a"]["thread"].join(5)
    assert leader.release(candidates["a"]["lock"])
    released = time.monotonic()
    assert candidates["b"]["leading"].wait(10)
    assert time.monotonic() - released < 3, "a released Lease must be taken over within a retry period or two"
    assert holder() == "b"
    start("c")
    crashed = time.monotonic()
    candidates["b"]["stop"].set()  # b dies without releasing
    candidates["b"]["thread"].join(5)
    assert candidates["c"]["leading"].wait(15)
    assert time.monotonic() - crashed >= 2.0, "a crashed leader's Lease must expire before takeover"
    assert holder() == "c"
    candidates["c"]["stop"].set()
    candidates["c"]["thread"].join(5)


def test_bad_flags_exit_2_with_an_actionable_message(capsys: pytest.CaptureFixture[str]) -> None:
    assert entrypoint.main(["--namespace", ""]) == 2
    assert "--namespace" in capsys.readouterr().err
    assert entrypoint.main(["--namespace", "x", "--resource-prefix", ""]) == 2
    assert "RESOURCE_PREFIX" in capsys.readouterr().err


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError:
        return 0, ""


def test_entrypoint_leads_reconciles_serves_metrics_and_stops_on_sigterm(
    harness: Harness, control_plane: ControlPlane, tmp_path: Path
) -> None:
    h = harness
    h.add_node("worker-1")
    h.policy("p", pf="ens1f0", dra={})
    port = processes.free_port()
    proc = processes.Process(
        "sriov-dra-operator",
        [
            sys.executable,
            "-m",
            "sriov_dra.operator",
            f"--kubeconfig={control_plane.kubeconfig}",
            f"--namespace={h.ns}",
            f"--metrics-address=127.0.0.1:{port}",
            "--log-format=json",
            "--identity=entrypoint-test",
        ],
        tmp_path / "operator.log",
        stop_grace_s=10,
    )
    proc.start()
    try:
        processes.wait_until(
            "/readyz", lambda: get(f"http://127.0.0.1:{port}/readyz")[0] == 200, timeout_s=30, process=proc
        )
        eventually(
            "the policy condition from the process", lambda: h.reason("p") == "DRAConfigurationApplied"
        )
        lease = h.admin.get(objects.LEASE, "sriov-dra-operator", h.ns)
        assert lease["spec"]["holderIdentity"] == "entrypoint-test"
        wanted = (
            "sriov_dra_operator_leader 1.0",
            'sriov_dra_operator_reconcile_total{controller="policies",outcome="synced"}',
            'sriov_dra_operator_dra_policies{reason="DRAConfigurationApplied"} 1.0',
        )
        # The counters move right after the condition is written: poll rather than race.
        eventually(
            "the reconcile metrics",
            lambda: all(w in get(f"http://127.0.0.1:{port}/metrics")[1] for w in wanted),
        )
        assert get(f"http://127.0.0.1:{port}/healthz")[0] == 200
    finally:
        stopping = time.monotonic()
        proc.stop()
    assert proc.popen is not None and proc.popen.returncode == 0
    assert time.monotonic() - stopping < 5
    lines = [ln for ln in (tmp_path / "operator.log").read_text().splitlines() if ln.startswith("{")]
    docs = [json.loads(ln) for ln in lines]
    assert any(
        d["msg"] == "reconciled" and d.get("controller") == "policies" and "duration_ms" in d for d in docs
    )
    assert any(d["msg"] == "leading" for d in docs)
    lease = h.admin.get(objects.LEASE, "sriov-dra-operator", h.ns)
    assert not lease["spec"].get("holderIdentity")  # released on a clean shutdown


def test_a_stolen_lease_stops_reconciling_and_exits_1(harness: Harness) -> None:
    h = harness
    config = settings.OperatorSettings(
        reconcile=settings.ReconcileSettings(namespace=h.ns, resync_period_s=3600),
        leader=settings.LeaderSettings(
            identity="victim", lease_duration_s=3, renew_deadline_s=2, retry_period_s=1
        ),
        serve=settings.ServeSettings(metrics_address=""),
    )
    stop = threading.Event()
    codes: list[int] = []
    thread = threading.Thread(
        target=lambda: codes.append(app.run(config, h.api, stop)), name="app-under-test", daemon=True
    )
    thread.start()
    try:
        eventually(
            "the victim to hold the Lease",
            lambda: (
                (h.admin.get_or_none(objects.LEASE, "sriov-dra-operator", h.ns) or {})
                .get("spec", {})
                .get("holderIdentity")
                == "victim"
            ),
        )
        lease = h.admin.get(objects.LEASE, "sriov-dra-operator", h.ns)
        lease["spec"]["holderIdentity"] = "intruder"
        lease["spec"]["leaseDurationSeconds"] = 3600
        h.admin.replace(objects.LEASE, lease)
        stolen = time.monotonic()
        thread.join(timeout=15)
        assert not thread.is_alive(), "the operator kept running without the Lease"
        assert codes == [1]
        assert time.monotonic() - stolen < 10
        assert h.admin.get(objects.LEASE, "sriov-dra-operator", h.ns)["spec"]["holderIdentity"] == "intruder"
    finally:
        stop.set()
        thread.join(timeout=15)
