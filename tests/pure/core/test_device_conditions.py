"""core.plugin.device_conditions: Ready and NetworkReady merge by type and keep their transition time."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core.plugin import device_conditions as dc

T0, T1 = "2026-12-06T07:00:00Z", "2026-12-06T08:00:00Z"


def test_an_unchanged_status_keeps_its_time_and_a_change_takes_the_new_one() -> None:
    first = dc.merge(None, [dc.ready(T0), dc.network_ready("dra0", T0)])
    assert dc.merge(first, [dc.ready(T1)]) == first
    down = dc.merge(first, [dc.network_ready(None, T1)])
    assert down == [dc.ready(T0), dc.network_ready(None, T1)]


def test_another_type_is_kept_in_place() -> None:
    foreign = {
        "type": "RDMALinkReady",
        "status": "True",
        "reason": "X",
        "message": "",
        "lastTransitionTime": T0,
    }
    assert dc.merge([foreign], [dc.ready(T1)]) == [foreign, dc.ready(T1)]


statuses = st.lists(st.tuples(st.sampled_from(["Ready", "NetworkReady"]), st.booleans()), max_size=6)


@given(statuses)
def test_property_one_condition_per_type_and_merging_the_same_facts_again_changes_nothing(
    steps: list[tuple[str, bool]],
) -> None:
    current: list[dict[str, object]] = []
    for i, (kind, up) in enumerate(steps):
        want = dc.condition(kind, up, "R", "m", f"2026-12-06T07:00:{i:02d}Z")
        current = dc.merge(current, [want])
        assert dc.merge(current, [dc.condition(kind, up, "R", "m", f"2026-12-06T08:00:{i:02d}Z")]) == current
    types = [c["type"] for c in current]
    assert len(types) == len(set(types))
