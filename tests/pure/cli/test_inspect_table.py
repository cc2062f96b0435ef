"""``sriov_dra.cli.inspect_table``: the correlation table and the JSON output."""

from __future__ import annotations

import json

from tests.fakes import inspect_world as iw

from sriov_dra.cli import inspect_table


def test_json_output_carries_every_row_and_its_verdict() -> None:
    out = json.loads(inspect_table.render_json(iw.rows(iw.world())))
    assert [(r["request"], r["ok"]) for r in out] == [("nic-0", True), ("nic-1", True)]


def test_addresses_without_prefix_get_a_footnote_naming_netns() -> None:
    footnote = "IPs without prefix: Multus's network-status carries none; --netns <the Pod's network"
    from_status = inspect_table.render_table(iw.rows(iw.world()))
    assert "192.0.2.10 " in from_status and footnote in from_status
    from_netns = inspect_table.render_table(
        iw.rows(iw.world(), netns={"dra0": ["192.0.2.77/24"], "dra1": ["198.51.100.77/24"]})
    )
    assert "(IPs from netns)" in from_netns and footnote not in from_netns


def test_the_claim_conditions_are_a_column_and_each_requests_metadata_file_follows_the_table() -> None:
    world = iw.world()
    claim = world["resourceclaims"][0]
    ready = {
        "type": "Ready",
        "status": "True",
        "reason": "Prepared",
        "message": "",
        "lastTransitionTime": "t",
    }
    down = {**ready, "type": "NetworkReady", "status": "False", "reason": "NotAttached"}
    claim["status"]["devices"] = [
        {"driver": iw.SRIOV, "pool": "lab-node-1", "device": "0000-03-00-2", "conditions": [ready, down]},
        {"driver": "gpu.nvidia.com", "pool": "lab-node-1", "device": "gpu-0", "conditions": [ready]},
    ]
    doc = '{\n  "kind": "DeviceMetadata"\n}\n'
    rows = iw.rows(world, metadata={("ai", "pairs-devices", "nic-0"): doc})
    by_request = {r.request: r for r in rows}
    assert by_request["nic-0"].conditions == ("Ready=True", "NetworkReady=False")
    assert by_request["nic-1"].conditions == ()
    assert (by_request["nic-0"].metadata, by_request["nic-1"].metadata) == (doc, "")
    table = inspect_table.render_table(rows)
    header, first = table.splitlines()[1:3]
    assert header.rstrip().endswith("CONDITIONS") and first.rstrip().endswith("Ready=True,NetworkReady=False")
    assert 'device metadata of pairs-devices request nic-0:\n  {\n    "kind": "DeviceMetadata"\n  }' in table
    assert "request nic-1" not in table
    assert json.loads(inspect_table.render_json(rows))[0]["metadata"] == doc
