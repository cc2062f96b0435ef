"""Tests for sriov_dra.core.plugin.slices: published devices, pool layout, slice names and minimal writes."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import slice_server, slice_view

from sriov_dra.core import attributes, device_facts, policies
from sriov_dra.core.plugin import slices
from sriov_dra_rules import errors, names

DRIVER = names.DRIVER_NAME
NODE = "worker-1"
NODE_UID = "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"
D = names.DOMAIN


def facts(index: int) -> device_facts.DeviceFacts:
    bus, dev, fn = 0x03 + index // 256, (index // 8) % 32, index % 8
    return device_facts.DeviceFacts(
        pci_address=f"0000:{bus:02x}:{dev:02x}.{fn}",
        vendor="8086",
        device_id="1889",
        pf_device_id="1592",
        pf_name="enp3s0f0",
        pf_pci_address="0000:03:00.0",
        vf_id=index,
        pcie_root="pci0000:00",
    )


def device(index: int, **extra: attributes.AttributeValue) -> slices.PublishedDevice:
    f = facts(index)
    return slices.PublishedDevice(f.name, {**device_facts.discovered_attributes(f), **extra})


def devices(count: int) -> list[slices.PublishedDevice]:
    return [device(i) for i in range(count)]


def FakeServer() -> slice_server.FakeSliceServer:
    return slice_server.FakeSliceServer(driver=DRIVER, node=NODE, node_uid=NODE_UID)


def as_json(devs: list[slices.PublishedDevice]) -> dict[str, dict[str, Any]]:
    return {d.name: d.to_json() for d in devs}


# ----------------------------------------------------------------------------- published devices
def evaluation(pols: list[dict[str, object]], objs: list[dict[str, object]], *, managed: bool) -> Any:
    return policies.evaluate_policies(
        [facts(i) for i in range(4)], pols, objs, node_labels={}, managed=managed
    )


def pol(name: str, *configs: dict[str, object]) -> dict[str, object]:
    return {"metadata": {"name": name}, "spec": {"configs": list(configs)}}


ATTRS = [
    {
        "metadata": {"name": "rail-a", "labels": {"rail": "a"}},
        "spec": {"attributes": {"k8s.cni.cncf.io/resourceName": {"string": "intel.com/rail_a"}}},
    }
]


@pytest.mark.parametrize(
    ("pols", "managed", "expected"),
    [
        ([], True, set()),
        ([], False, set()),
        ([pol("all", {})], False, {0, 1, 2, 3}),
        ([pol("one", {"resourceFilters": [{"pciAddresses": ["0000:03:00.1"]}]})], True, {1}),
        ([pol("none", {"deviceAttributesSelector": {"matchLabels": {"rail": "z"}}})], True, set()),
        ([pol("none", {"deviceAttributesSelector": {"matchLabels": {"rail": "z"}}})], False, {0, 1, 2, 3}),
    ],
    ids=[
        "no-policy-advertises-nothing-managed",
        "no-policy-advertises-nothing-upstream",
        "all-devices-policy-advertises-every-vf",
        "filter-advertises-only-its-match",
        "managed-zero-match-selector-blocks-devices",
        "upstream-zero-match-selector-still-advertises",
    ],
)
def test_published_devices_are_the_eligible_ones(
    pols: list[dict[str, object]], managed: bool, expected: set[int]
) -> None:
    published = slices.published_devices(
        [facts(i) for i in range(4)], evaluation(pols, ATTRS, managed=managed)
    )
    assert [d.name for d in published] == [facts(i).name for i in sorted(expected)]


def test_published_device_carries_discovery_and_policy_attributes() -> None:
    ev = evaluation(
        [pol("rail", {"deviceAttributesSelector": {"matchLabels": {"rail": "a"}}})], ATTRS, managed=False
    )
    published = slices.published_devices([facts(i) for i in range(4)], ev)
    first = published[0].to_json()["attributes"]
    assert first["k8s.cni.cncf.io/resourceName"] == {"string": "intel.com/rail_a"}
    assert first[f"{D}/PFName"] == {"string": "enp3s0f0"}
    assert first[f"{D}/vfID"] == {"int": 0}
    assert first[f"{D}/rdmaCapable"] == {"bool": False}
    assert list(first) == sorted(first)


def test_discovery_attribute_wins_over_a_policy_value_for_a_reserved_key() -> None:
    f = facts(0)
    outcome = policies.DeviceOutcome(
        device=f.name,
        policy="p",
        config_index=0,
        eligible=True,
        reference=None,
        values={f"{D}/PFName": attributes.string_value("spoofed")},
        attribute_sources=(),
        reasons=(),
    )
    ev = policies.PolicyEvaluation({f.name: outcome}, ())
    (published,) = slices.published_devices([f], ev)
    assert published.attributes[f"{D}/PFName"] == attributes.string_value("enp3s0f0")


def test_device_named_by_evaluation_but_not_discovered_is_not_published() -> None:
    outcome = policies.DeviceOutcome("0000-99-00-0", "p", 0, True, None, {}, (), ())
    ev = policies.PolicyEvaluation({"0000-99-00-0": outcome}, ())
    assert slices.published_devices([facts(0)], ev) == ()


# ----------------------------------------------------------------------------- names and layout
def test_slice_name_is_node_driver_index() -> None:
    assert slices.slice_name(DRIVER, NODE, 0) == f"{NODE}-{DRIVER}-0"
    assert slices.slice_name(DRIVER, NODE, 12) == f"{NODE}-{DRIVER}-12"


def test_slice_name_of_a_long_node_name_is_shortened_with_a_digest() -> None:
    long_node = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])
    first, second = (slices.slice_name(DRIVER, long_node, i) for i in (0, 1))
    other = slices.slice_name(DRIVER, long_node[:-1] + "e", 0)
    assert len(first) <= 253 and names.is_dns1123_subdomain(first)
    assert len({first, second, other}) == 3


dns_label = st.from_regex(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?", fullmatch=True)
node_names = st.lists(dns_label, min_size=1, max_size=6).map(".".join).filter(lambda n: len(n) <= 253)


@given(node=node_names, index=st.integers(0, 10_000))
def test_slice_names_are_valid_deterministic_and_distinct(node: str, index: int) -> None:
    name = slices.slice_name(DRIVER, node, index)
    assert names.dns1123_subdomain_problem(name) is None
    assert name == slices.slice_name(DRIVER, node, index)
    assert name != slices.slice_name(DRIVER, node, index + 1)


@pytest.mark.parametrize(
    ("count", "sizes"),
    [(0, [0]), (1, [1]), (64, [64]), (65, [64, 1]), (128, [64, 64]), (129, [64, 64, 1])],
    ids=[
        "no-device-one-empty-slice",
        "one-device-one-slice",
        "exactly-the-limit-one-slice",
        "one-over-the-limit-splits",
        "two-full-slices",
        "three-slices",
    ],
)
def test_desired_slices_split_at_the_api_device_limit(count: int, sizes: list[int]) -> None:
    out = slices.desired_slices(devices(count), driver=DRIVER, node=NODE, node_uid=NODE_UID, generation=7)
    assert [len(s["spec"]["devices"]) for s in out] == sizes
    for i, s in enumerate(out):
        assert s["metadata"]["name"] == slices.slice_name(DRIVER, NODE, i)
        assert s["spec"]["pool"] == {"name": NODE, "generation": 7, "resourceSliceCount": len(sizes)}
        assert s["spec"]["nodeName"] == NODE and s["spec"]["driver"] == DRIVER
        assert s["metadata"]["ownerReferences"][0]["uid"] == NODE_UID


def test_desired_slices_order_devices_by_name_whatever_the_input_order() -> None:
    devs = devices(200)
    shuffled = random.Random(4).sample(devs, len(devs))
    a = slices.desired_slices(devs, driver=DRIVER, node=NODE, node_uid=NODE_UID, generation=1)
    b = slices.desired_slices(shuffled, driver=DRIVER, node=NODE, node_uid=NODE_UID, generation=1)
    assert a == b


@pytest.mark.parametrize(
    "bad",
    [
        [device(0), device(0)],
        [slices.PublishedDevice("0000:03:00.0", {})],
    ],
    ids=["duplicate-device-name", "device-name-not-a-dns-label"],
)
def test_desired_slices_refuse_unpublishable_devices(bad: list[slices.PublishedDevice]) -> None:
    with pytest.raises(errors.InvalidSpec, match=NODE):
        slices.desired_slices(bad, driver=DRIVER, node=NODE, node_uid=NODE_UID, generation=1)


# ----------------------------------------------------------------------------- plan_writes
def test_first_publication_creates_every_slice_at_generation_one() -> None:
    server = FakeServer()
    writes = server.sync(devices(130))
    assert (len(writes.creates), writes.updates, writes.deletes, writes.generation) == (3, (), (), 1)


def test_no_writes_when_the_server_already_has_the_pool() -> None:
    server = FakeServer()
    server.sync(devices(300))
    before = server.writes
    writes = server.sync(devices(300))
    assert writes.empty and writes.generation == 1 and server.writes == before


def test_withdrawing_a_device_without_policy_attributes_republishes() -> None:
    """Upstream clearPolicyAttributes defect: no attribute keys changed, yet membership did."""
    server = FakeServer()
    server.sync(devices(4))
    writes = server.sync(devices(3))
    assert writes.generation == 2 and len(writes.updates) == 1
    assert set(slice_view.pool_devices(server.slices())) == {d.name for d in devices(3)}


def test_withdrawing_every_device_publishes_an_empty_pool() -> None:
    server = FakeServer()
    server.sync(devices(4))
    writes = server.sync([])
    assert writes.generation == 2 and slice_view.pool_devices(server.slices()) == {}
    assert len(server.objects) == 1


def test_attribute_change_bumps_generation_in_every_slice() -> None:
    server = FakeServer()
    server.sync(devices(200))
    changed = devices(200)
    changed[150] = device(150, **{"k8s.cni.cncf.io/resourceName": attributes.string_value("x/y")})
    writes = server.sync(changed)
    assert writes.generation == 2 and len(writes.updates) == 4 and not writes.creates
    assert {s["spec"]["pool"]["generation"] for s in server.slices()} == {2}


def test_deleted_slice_is_recreated_with_a_bumped_generation() -> None:
    server = FakeServer()
    server.sync(devices(200))
    del server.objects[slices.slice_name(DRIVER, NODE, 1)]
    writes = server.sync(devices(200))
    assert (len(writes.updates), len(writes.creates), writes.generation) == (3, 1, 2)
    assert slice_view.pool_devices(server.slices()) == as_json(devices(200))


def test_all_slices_deleted_never_reuses_an_older_generation() -> None:
    server = FakeServer()
    server.sync(devices(3))
    server.sync(devices(2))
    server.objects.clear()
    writes = server.sync(devices(2), last_generation=2)
    assert writes.generation == 3


def test_shrinking_pool_deletes_the_surplus_slice_first() -> None:
    server = FakeServer()
    server.sync(devices(200))
    writes = server.sync(devices(10))
    assert [r.name for r in writes.deletes] == [slices.slice_name(DRIVER, NODE, i) for i in (1, 2, 3)]
    assert server.slices()[0]["spec"]["pool"]["resourceSliceCount"] == 1


def server_slice(name: str, **spec: Any) -> dict[str, Any]:
    base = {
        "driver": DRIVER,
        "nodeName": NODE,
        "pool": {"name": NODE, "generation": 1, "resourceSliceCount": 1},
    }
    return {"metadata": {"name": name, "uid": f"u-{name}", "resourceVersion": "5"}, "spec": {**base, **spec}}


@pytest.mark.parametrize(
    ("extra", "deleted"),
    [
        (server_slice("00000-sriovnetwork-worker-1-x7k2p"), ["00000-sriovnetwork-worker-1-x7k2p"]),
        (
            server_slice(
                slices.slice_name(DRIVER, NODE, 0),
                pool={"name": "other-pool", "generation": 1, "resourceSliceCount": 1},
            ),
            [slices.slice_name(DRIVER, NODE, 0)],
        ),
    ],
    ids=["foreign-named-slice-is-deleted", "slice-with-other-pool-name-is-replaced"],
)
def test_slices_that_cannot_be_kept_are_deleted(extra: dict[str, Any], deleted: list[str]) -> None:
    writes = slices.plan_writes([extra], devices(2), driver=DRIVER, node=NODE, node_uid=NODE_UID)
    assert [r.name for r in writes.deletes] == deleted
    assert writes.deletes[0].uid == extra["metadata"]["uid"]
    assert writes.deletes[0].resource_version == "5"
    assert [c["metadata"]["name"] for c in writes.creates] == [slices.slice_name(DRIVER, NODE, 0)]


def test_update_keeps_other_writers_labels_and_carries_the_precondition() -> None:
    server = FakeServer()
    server.sync(devices(2))
    name = slices.slice_name(DRIVER, NODE, 0)
    server.objects[name]["metadata"]["labels"] = {"team": "net"}
    server.objects[name]["metadata"]["managedFields"] = [{"manager": "x"}]
    assert server.sync(devices(2)).empty, "labels of other writers are not a difference"
    writes = slices.plan_writes(server.slices(), devices(1), driver=DRIVER, node=NODE, node_uid=NODE_UID)
    (body,) = writes.updates
    assert body["metadata"]["labels"] == {"team": "net"}
    assert body["metadata"]["resourceVersion"] == server.objects[name]["metadata"]["resourceVersion"]


@pytest.mark.parametrize(
    ("mutate", "generation"),
    [
        (lambda s: s["spec"]["pool"].update(generation=5), 6),
        (lambda s: s["spec"]["pool"].update(resourceSliceCount=3), 2),
        (lambda s: s["metadata"].update(ownerReferences=[]), 2),
        (lambda s: s["spec"]["devices"][0]["attributes"].pop(f"{D}/vfID"), 2),
    ],
    ids=[
        "mixed-generations-are-rewritten",
        "wrong-slice-count-is-rewritten",
        "missing-node-owner-is-rewritten",
        "edited-attribute-is-rewritten",
    ],
)
def test_any_drift_from_the_desired_pool_is_rewritten_above_the_highest_generation(
    mutate: Any, generation: int
) -> None:
    server = FakeServer()
    server.sync(devices(200))
    mutate(server.objects[slices.slice_name(DRIVER, NODE, 0)])
    writes = server.sync(devices(200))
    assert (writes.generation, len(writes.updates)) == (generation, 4)
    assert slice_view.pool_devices(server.slices()) == as_json(devices(200))
    assert server.sync(devices(200)).empty


indices = st.sets(st.integers(0, 1500), max_size=400)


@given(first=indices, second=indices, seed=st.integers(0, 2**16))
def test_plan_round_trips_any_device_set(first: set[int], second: set[int], seed: int) -> None:
    server = FakeServer()
    for wanted, last in ((first, 1), (second, 2)):
        devs = [device(i) for i in wanted]
        random.Random(seed).shuffle(devs)
        server.sync(devs)
        assert slice_view.pool_devices(server.slices()) == as_json(devs)
        count = max(1, -(-len(devs) // slices.MAX_DEVICES_PER_SLICE))
        assert sorted(server.objects) == sorted(slices.slice_name(DRIVER, NODE, i) for i in range(count))
        assert {s["spec"]["pool"]["resourceSliceCount"] for s in server.slices()} == {count}
        assert server.sync(list(reversed(devs))).empty, "an equal resync writes nothing"
        generation = server.slices()[0]["spec"]["pool"]["generation"]
        assert generation <= last and {s["spec"]["pool"]["generation"] for s in server.slices()} == {
            generation
        }
