"""The order of a node's plugin instances decides who may own it (docs/plugin.md#rolling-update)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core.plugin import instance_order as order

UIDS = st.lists(st.uuids().map(str), min_size=1, max_size=40, unique=True)


@given(UIDS)
def test_recording_in_start_order_keeps_that_order_and_a_restart_keeps_its_place(uids: list[str]) -> None:
    record: tuple[str, ...] = ()
    for uid in uids:
        record = order.recorded(record, uid)
    assert record == tuple(uids[-order.RECORD_KEPT :])
    for uid in record:  # a restarted container records itself again: nothing moves
        assert order.recorded(record, uid) == record


def test_an_owner_hands_over_only_while_a_newer_instance_is_recorded() -> None:
    record = ("old", "new")
    assert order.may_hand_over(record, "old")
    assert not order.may_hand_over(record, "new"), "the newest instance never gives the node to an older one"
    assert order.may_hand_over(("new",), "started-before-the-record")
    assert order.may_hand_over(record, ""), "without a Pod UID there is no order: any request wins"


def test_an_instance_is_older_than_every_recorded_one_once_dropped_from_the_record() -> None:
    assert order.newer(("a", "b", "c"), "a") == ("b", "c")
    assert order.newer(("a", "b", "c"), "c") == ()
    assert order.newer(("b", "c"), "a") == ("b", "c")


def test_only_a_name_other_than_the_handing_over_instance_and_the_previous_owner_confirms() -> None:
    assert order.confirmed("new", "old", "old")
    assert not order.confirmed("old", "old", "old")
    assert not order.confirmed(None, "old", None)
    assert not order.confirmed("older", "old", "older"), "a stale record from before is no confirmation"


@given(UIDS)
def test_the_instances_an_owner_vouches_for_are_exactly_those_recorded_before_it(uids: list[str]) -> None:
    for i, uid in enumerate(uids):
        assert order.older(uids, uid) == tuple(uids[:i])
        assert not set(order.older(uids, uid)) & {uid, *order.newer(uids, uid)}
    assert order.older(uids, "not-recorded") == (), "an unrecorded instance superseded nobody it knows"
