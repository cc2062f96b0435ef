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
