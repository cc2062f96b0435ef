"""The per-claim result contract between the kubelet and the driver's ClaimHandler.

``sriov_dra.kubeletapi.dra_service.ClaimDispatcher``: one outcome per distinct claim UID, empty
requests answered without the handler, and one claim's failure never failing another.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence

import pytest
from tests.fakes.claim_handler import FakeClaimHandler

from sriov_dra.kubeletapi import dra_service, messages

A = messages.ClaimRef("ns", "a", "uid-a")
B = messages.ClaimRef("ns", "b", "uid-b")
C = messages.ClaimRef("other", "c", "uid-c")


def _prepared(claim: messages.ClaimRef) -> messages.Prepared:
    return messages.Prepared((messages.Device(pool_name="pool-a", device_name=f"dev-{claim.name}"),))


@pytest.mark.parametrize("verb", ["prepare", "unprepare"], ids=["prepare", "unprepare"])
def test_empty_request_succeeds_without_calling_the_handler(verb: str) -> None:
    fake = FakeClaimHandler()
    dispatcher = dra_service.ClaimDispatcher(fake)
    assert getattr(dispatcher, verb)([]) == {}
    assert fake.prepare_calls == [] and fake.unprepare_calls == []


def test_prepare_returns_one_entry_per_requested_claim() -> None:
    fake = FakeClaimHandler()
    out = dra_service.ClaimDispatcher(fake).prepare([A, B, C])
    assert out == {"uid-a": _prepared(A), "uid-b": _prepared(B), "uid-c": _prepared(C)}
    assert fake.prepare_calls == [(A, B, C)]


def test_duplicate_claim_uids_are_sent_to_the_handler_once() -> None:
    fake = FakeClaimHandler()
    out = dra_service.ClaimDispatcher(fake).prepare([A, B, A])
    assert list(out) == ["uid-a", "uid-b"]
    assert fake.prepare_calls == [(A, B)]


@pytest.mark.parametrize(
    ("fake", "expected_a"),
    [
        (FakeClaimHandler(fail={"uid-a": "VF busy"}), messages.ClaimError("VF busy")),
        (FakeClaimHandler(returned_exception={"uid-a"}), messages.ClaimError("fake value error for uid-a")),
        (FakeClaimHandler(raise_for={"uid-a"}), messages.ClaimError("fake handler exploded on uid-a")),
    ],
    ids=["returned-claim-error", "returned-exception-object", "raised-exception"],
)
def test_one_claims_failure_leaves_the_other_claims_prepared(
    fake: FakeClaimHandler, expected_a: messages.ClaimError
) -> None:
    out = dra_service.ClaimDispatcher(fake).prepare([A, B, C])
    assert out == {"uid-a": expected_a, "uid-b": _prepared(B), "uid-c": _prepared(C)}


def test_raising_batch_is_retried_claim_by_claim() -> None:
    fake = FakeClaimHandler(raise_for={"uid-b"})
    dra_service.ClaimDispatcher(fake).prepare([A, B, C])
    assert fake.prepare_calls == [(A, B, C), (A,), (B,), (C,)]


def test_unprepare_failure_is_isolated_per_claim() -> None:
    fake = FakeClaimHandler(raise_for={"uid-c"})
    out = dra_service.ClaimDispatcher(fake).unprepare([A, B, C])
    assert out == {
        "uid-a": None,
        "uid-b": None,
        "uid-c": messages.ClaimError("fake handler exploded on uid-c"),
    }


@pytest.mark.parametrize("verb", ["prepare", "unprepare"], ids=["prepare", "unprepare"])
def test_claim_missing_from_handler_result_becomes_that_claims_error(verb: str) -> None:
    fake = FakeClaimHandler(omit={"uid-b"})
    out = getattr(dra_service.ClaimDispatcher(fake), verb)([A, B])
    assert set(out) == {"uid-a", "uid-b"}
    assert isinstance(out["uid-b"], messages.ClaimError)
    assert "returned no" in out["uid-b"].message and "uid-b" in out["uid-b"].message
    assert not isinstance(out["uid-a"], messages.ClaimError)


class _ExtraAndWrongTypes:
    """FAKE handler returning an unrequested UID and values of the wrong type."""

    def prepare_resources(self, claims: Sequence[messages.ClaimRef]) -> Mapping[str, object]:
        return {"uid-a": "not an outcome", "uid-zzz": messages.Prepared()}

    def unprepare_resources(self, claims: Sequence[messages.ClaimRef]) -> Mapping[str, object]:
        return {"uid-a": 42, "uid-zzz": None}


@pytest.mark.parametrize(
    ("verb", "wanted"),
    [("prepare", "instead of Prepared or ClaimError"), ("unprepare", "instead of None or ClaimError")],
    ids=["prepare", "unprepare"],
)
def test_unrequested_uids_are_dropped_and_wrong_types_become_errors(verb: str, wanted: str) -> None:
    dispatcher = dra_service.ClaimDispatcher(_ExtraAndWrongTypes())  # type: ignore[arg-type]
    out = getattr(dispatcher, verb)([A])
    assert list(out) == ["uid-a"]
    assert isinstance(out["uid-a"], messages.ClaimError) and wanted in out["uid-a"].message


def test_serialized_dispatcher_runs_one_handler_call_at_a_time() -> None:
    fake = FakeClaimHandler(hold=True)
    dispatcher = dra_service.ClaimDispatcher(fake, serialize=True)
    first = threading.Thread(target=dispatcher.prepare, args=([A],), daemon=True)
    second = threading.Thread(target=dispatcher.unprepare, args=([B],), daemon=True)
    first.start()
    assert fake.entered.wait(5)
    second.start()
    second.join(0.2)
    assert second.is_alive(), "unprepare ran while prepare held the handler"
    assert fake.unprepare_calls == []
    fake.release.set()
    first.join(5)
    second.join(5)
    assert fake.unprepare_calls == [(B,)]


def test_unserialized_dispatcher_allows_concurrent_calls() -> None:
    fake = FakeClaimHandler(hold=True)
    dispatcher = dra_service.ClaimDispatcher(fake, serialize=False)
    threads = [threading.Thread(target=dispatcher.prepare, args=([c],), daemon=True) for c in (A, B)]
    for t in threads:
        t.start()
    waiter = threading.Event()
    for _ in range(100):
        if len(fake.prepare_calls) == 2:
            break
        waiter.wait(0.02)
    assert len(fake.prepare_calls) == 2
    fake.release.set()
    for t in threads:
        t.join(5)
