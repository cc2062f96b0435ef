"""driver.managed.lock_order: claim-then-Pod operation locks, checked order, race tests."""

from __future__ import annotations

import threading
from collections import defaultdict

import pytest

from sriov_dra.driver import locks
from sriov_dra.driver.managed import lock_order
from sriov_dra_rules import errors


def make(observer: lock_order.Observer | None = None) -> lock_order.OperationLocks:
    return lock_order.OperationLocks(locks.KeyedLocks("claim"), locks.KeyedLocks("pod"), observer=observer)


@pytest.mark.parametrize(
    "reverse",
    [
        pytest.param(lambda ol: (ol.pod("p"), ol.claim("c")), id="claim-after-pod"),
        pytest.param(lambda ol: (ol.pod("p"), ol.pod("q")), id="second-pod"),
        pytest.param(lambda ol: (ol.claim("c"), ol.claim("d")), id="second-claim"),
        pytest.param(lambda ol: (ol.hold("c", "p"), ol.hold("d", "q")), id="nested-operation"),
    ],
)
def test_reverse_or_recursive_acquisition_is_refused_before_blocking(reverse) -> None:
    ol = make()
    outer, inner = reverse(ol)
    with outer, pytest.raises(errors.ContractViolation, match="lock order violated"), inner:
        pass
    assert ol.claim_locks.active() == 0 and ol.pod_locks.active() == 0


def test_concurrent_prepare_release_and_repair_on_one_pod_take_claim_then_pod_and_never_overlap() -> None:
    order: dict[str, list[tuple[str, str]]] = defaultdict(list)
    holders = {"pod": 0, "max": 0}
    guard = threading.Lock()

    def observe(kind: str, key: str) -> None:
        order[threading.current_thread().name].append((kind, key))

    ol = make(observe)
    start = threading.Barrier(6)
    failures: list[BaseException] = []

    def work(claim: str) -> None:
        try:
            start.wait()
            for _ in range(200):
                with ol.hold(claim, "pod-1"):
                    with guard:
                        holders["pod"] += 1
                        holders["max"] = max(holders["max"], holders["pod"])
                    with guard:
                        holders["pod"] -= 1
        except BaseException as exc:  # collected and reported below
            failures.append(exc)

    threads = [
        threading.Thread(target=work, args=(claim,), name=f"{role}-{i}")
        for i, (role, claim) in enumerate(
            [
                ("prepare", "claim-a"),
                ("release", "claim-b"),
                ("repair", "claim-a"),
                ("prepare", "claim-c"),
                ("release", "claim-a"),
                ("repair", "claim-b"),
            ]
        )
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads), "deadlock: a worker never finished"
    assert failures == []
    assert holders["max"] == 1, "two operations held the same Pod at once"
    for name, seen in order.items():
        kinds = [k for k, _ in seen]
        assert kinds == ["claim", "pod"] * 200, name
    assert ol.claim_locks.active() == 0 and ol.pod_locks.active() == 0


def test_different_pods_run_in_parallel() -> None:
    ol = make()
    inside = threading.Event()
    release = threading.Event()

    def hold_first() -> None:
        with ol.hold("claim-a", "pod-1"):
            inside.set()
            release.wait(5)

    t = threading.Thread(target=hold_first)
    t.start()
    assert inside.wait(5)
    entered = threading.Event()

    def other() -> None:
        with ol.hold("claim-b", "pod-2"):
            entered.set()

    u = threading.Thread(target=other)
    u.start()
    assert entered.wait(5), "a different Pod must not wait for pod-1"
    release.set()
    t.join(5)
    u.join(5)
