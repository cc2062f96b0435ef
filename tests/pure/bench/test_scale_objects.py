"""The scale benchmark's object builders produce what the plugin's real prepare writes.

``bench/scale.py`` creates the shadows and Pod annotations of the simulated nodes' Pods with
``bench/scalekit/objects.py`` instead of running a plugin per node; these tests keep that
honest. A Pod with two claims of two VFs each (rail A and rail B, as on a GPU node) is prepared
through the real handler (``driver.prepare`` with ``driver.managed``) on the fake node of
``tests.fakes.managed_node``; the builders, given the same node, Pod, claims, VFs and source
NADs, must produce byte-identical shadow bodies and a Pod patch that yields the same annotations.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from bench.scalekit import objects
from tests.fakes import claims_api as fx
from tests.fakes import kube_objects as ko
from tests.fakes import managed_node as mn

from sriov_dra.kubeletapi import messages

POD, POD_UID = "trainer", "7ad00000-0000-4000-8000-000000000001"
CLAIMS = (
    (
        "nics-a",
        "c1a1c1a1-0000-4000-8000-0000000000a1",
        "vfs-0",
        ((mn.DEV_A0, mn.VF_A0), (mn.DEV_B0, mn.VF_B0)),
    ),
    (
        "nics-b",
        "c1a1c1a1-0000-4000-8000-0000000000b2",
        "vfs-1",
        ((mn.DEV_A1, mn.VF_A1), (mn.DEV_B1, mn.VF_B1)),
    ),
)
RAIL_OF = {mn.DEV_A0: "rail-a-net", mn.DEV_A1: "rail-a-net", mn.DEV_B0: "rail-b-net", mn.DEV_B1: "rail-b-net"}


def _prepared(tmp_path: Path) -> tuple[mn.ManagedNode, dict[str, Any]]:
    """The fake node after one NodePrepare of both claims; the Pod as it was before."""
    node = mn.ManagedNode(tmp_path)
    refs = []
    for name, uid, _alias, devices in CLAIMS:
        node.claims.add(
            fx.resource_claim(
                [fx.result(dev, f"nic-{i}") for i, (dev, _) in enumerate(devices)],
                uid=uid,
                name=name,
                namespace=mn.NS,
                pod_uid=POD_UID,
                pod_name=POD,
            )
        )
        refs.append(messages.ClaimRef(namespace=mn.NS, name=name, uid=uid))
    before = node.kube.add_pod(
        mn.pod_json(POD, POD_UID, [(alias, name, False) for name, _, alias, _ in CLAIMS])
    )
    outcomes = node.handler.prepare_resources(refs)
    assert all(isinstance(outcomes[r.uid], messages.Prepared) for r in refs), outcomes
    return node, before


def _claims(node: mn.ManagedNode) -> list[objects.Claim]:
    return [
        objects.Claim(
            name=name,
            uid=uid,
            alias=alias,
            vfs=tuple(
                objects.Vf(
                    request=f"nic-{i}",
                    pool=fx.NODE,
                    device=dev,
                    pci=pci,
                    source=node.kube.nads[(mn.NS, RAIL_OF[dev])],
                )
                for i, (dev, pci) in enumerate(devices)
            ),
        )
        for name, uid, alias, devices in CLAIMS
    ]


def _built(node: mn.ManagedNode) -> list[Any]:
    return objects.records(
        node_name=fx.NODE, node_uid=mn.NODE_UID, namespace=mn.NS, pod_uid=POD_UID, claims=_claims(node)
    )


def _without_server_fields(nad: dict[str, Any]) -> dict[str, Any]:
    meta = {k: v for k, v in nad["metadata"].items() if k not in ("uid", "resourceVersion")}
    return {**nad, "metadata": meta}


def test_shadow_bodies_are_byte_identical_to_the_plugins_creates(tmp_path: Path) -> None:
    node, _ = _prepared(tmp_path)
    created = sorted(
        (_without_server_fields(n) for n in node.kube.shadows(mn.NS)), key=lambda n: n["metadata"]["name"]
    )
    built = sorted(objects.shadow_bodies(_built(node), pod_name=POD), key=lambda n: n["metadata"]["name"])
    assert len(built) == 4
    assert [json.dumps(b, sort_keys=True) for b in built] == [json.dumps(c, sort_keys=True) for c in created]


def test_pod_patch_gives_the_annotations_the_plugin_wrote(tmp_path: Path) -> None:
    node, before = _prepared(tmp_path)
    uids = {n["metadata"]["name"]: n["metadata"]["uid"] for n in node.kube.shadows(mn.NS)}
    recs = objects.with_shadow_uids(_built(node), uids)
    replay = ko.FakeKube()
    pod = replay.add_pod(before)
    ko.PodView(replay).json_patch(mn.NS, POD, list(objects.pod_patch(pod, recs)))
    written = node.kube.pod(mn.NS, POD)["metadata"]["annotations"]
    assert replay.pod(mn.NS, POD)["metadata"]["annotations"] == written
    assert objects.pod_annotations(pod, recs) == written


def test_records_name_the_interfaces_of_both_claims_in_the_plugins_order(tmp_path: Path) -> None:
    node, _ = _prepared(tmp_path)
    recorded = {
        d.device: d.managed.interface
        for r in node.store.all_claims().values()
        for d in r.devices
        if d.managed is not None
    }
    built = {d.device: d.managed.interface for r in _built(node) for d in r.devices if d.managed is not None}
    assert built == recorded
    assert sorted(built.values()) == ["dra0", "dra1", "dra2", "dra3"]
