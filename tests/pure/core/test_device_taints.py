"""Tests for sriov_dra.core.plugin.device_taints and the tainted slices it leads to: the hysteresis
rule, timeAdded kept while a taint stays, taint changes confined to their slice, and the slice
writes a flapping link causes."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import slice_server
from tests.pure.core.test_slices import NODE, NODE_UID, devices

from sriov_dra.core import device_health as dh
from sriov_dra.core.plugin import device_taints as dt
from sriov_dra.core.plugin import slices
from sriov_dra_rules import names

DRIVER = names.DRIVER_NAME
OK = dh.Verdict(dh.Health.HEALTHY, "ok")
DOWN = dh.Verdict(dh.Health.UNHEALTHY, "PF ens1f0 is down (operstate down)", dh.Cause.PF_DOWN)
NO_CARRIER = dh.Verdict(dh.Health.UNHEALTHY, "PF ens1f0 has no carrier", dh.Cause.PF_NO_CARRIER)
UNKNOWN = dh.Verdict(dh.Health.UNKNOWN, "cannot read")


def run(verdicts: list[dh.Verdict], *, period: float = 2.0, clear_after_s: float = 30.0) -> list[str | None]:
    """The taint value of device ``a`` after each poll (None: untainted)."""
    states: dict[str, dt.TaintState] = {}
    out: list[str | None] = []
    for i, verdict in enumerate(verdicts):
        states = dt.step(states, {"a": verdict}, i * period, clear_after_s=clear_after_s)
        out.append(states["a"].value if "a" in states else None)
    return out


def test_first_unhealthy_poll_taints_with_the_cause_as_value() -> None:
    assert run([OK, DOWN]) == [None, "PfDown"]


def test_taint_is_removed_after_clear_after_s_of_continuous_health() -> None:
    values = run([DOWN] + [OK] * 17, period=2.0, clear_after_s=30.0)
    assert values[:16] == ["PfDown"] * 16  # healthy since t=2; still tainted at t=30
    assert values[16:] == [None, None]  # t=32: 30 s healthy


def test_value_stays_the_first_cause_while_tainted() -> None:
    assert run([DOWN, NO_CARRIER, NO_CARRIER]) == ["PfDown"] * 3


def test_unknown_neither_taints_nor_counts_as_recovery() -> None:
    assert run([UNKNOWN, UNKNOWN]) == [None, None]
    values = run([DOWN, OK, UNKNOWN] + [OK] * 15, period=2.0, clear_after_s=30.0)
    assert values[-1] == "PfDown", "an Unknown poll restarts the healthy count"


def test_unwatched_device_loses_its_taint() -> None:
    states = dt.step({}, {"a": DOWN}, 0.0)
    assert dt.step(states, {}, 1.0) == {}


def test_taints_carry_the_driver_key_and_the_chosen_effect() -> None:
    states = dt.step({}, {"a": DOWN, "b": OK}, 0.0)
    assert dt.taints(states, driver=DRIVER, effect=dt.Effect.NO_EXECUTE) == {
        "a": dt.DeviceTaint(f"{DRIVER}/unhealthy", "PfDown", dt.Effect.NO_EXECUTE)
    }


@given(st.lists(st.booleans(), min_size=1, max_size=300))
def test_any_flapping_sequence_changes_the_taint_at_most_once_per_clear_period(ups: list[bool]) -> None:
    values = run([OK if up else DOWN for up in ups], period=2.0, clear_after_s=30.0)
    changes = sum(1 for before, after in zip([None, *values], values, strict=False) if before != after)
    removals = sum(1 for before, after in zip([None, *values], values, strict=False) if before and not after)
    assert removals <= len(ups) * 2.0 / 30.0 + 1, "a taint is removed only after 30 s of health"
    assert changes <= 2 * removals + 1


# ------------------------------------------------------------------ tainted slices
def server() -> slice_server.FakeSliceServer:
    return slice_server.FakeSliceServer(driver=DRIVER, node=NODE, node_uid=NODE_UID)


def taint(value: str = "PfDown") -> dt.DeviceTaint:
    return dt.DeviceTaint(dt.taint_key(DRIVER), value, dt.Effect.NO_SCHEDULE)


def device_json(s: slice_server.FakeSliceServer, name: str) -> dict[str, object]:
    return next(d for sl in s.slices() for d in sl["spec"].get("devices", []) if d["name"] == name)


def test_a_taint_rewrites_only_its_slice_at_the_same_generation() -> None:
    s = server()
    devs = devices(200)
    s.sync(devs)
    writes = s.sync(devs, taints={devs[150].name: taint()})
    assert (writes.generation, len(writes.updates), writes.creates, writes.deletes) == (1, 1, (), ())
    assert writes.updates[0]["metadata"]["name"] == slices.slice_name(DRIVER, NODE, 150 // 64)
    assert device_json(s, devs[150].name)["taints"] == [
        {
            "key": f"{DRIVER}/unhealthy",
            "value": "PfDown",
            "effect": "NoSchedule",
            "timeAdded": "2026-01-01T00:00:01Z",
        }
    ]


def test_time_added_is_kept_while_the_taint_stays() -> None:
    s = server()
    devs = devices(3)
    s.sync(devs, taints={devs[0].name: taint()})
    first = device_json(s, devs[0].name)["taints"]
    assert s.sync(devs, taints={devs[0].name: taint()}).empty, "the server's timeAdded is no difference"
    s.sync(devs, taints={devs[0].name: taint(), devs[1].name: taint()})
    assert device_json(s, devs[0].name)["taints"] == first
    assert s.sync(devs, taints={}).count == 1
    assert "taints" not in device_json(s, devs[0].name)


def test_taints_of_unpublished_devices_are_ignored() -> None:
    s = server()
    s.sync(devices(2))
    assert s.sync(devices(2), taints={"not-published": taint()}).empty


def test_a_flapping_link_costs_two_slice_writes() -> None:
    """A PF that flaps every poll for ten minutes, then stays up: one write to taint, one to clear."""
    s = server()
    devs = devices(130)
    pf_vfs = [d.name for d in devs[:8]]
    s.sync(devs)
    before = s.writes
    states: dict[str, dt.TaintState] = {}
    t = 0.0
    for poll in range(300 + 20):
        verdict = DOWN if poll < 300 and poll % 2 == 0 else OK
        states = dt.step(states, dict.fromkeys(pf_vfs, verdict), t)
        s.sync(devs, taints=dt.taints(states, driver=DRIVER, effect=dt.Effect.NO_SCHEDULE))
        t += 2.0
    assert s.writes - before == 2
    assert {sl["spec"]["pool"]["generation"] for sl in s.slices()} == {1}
