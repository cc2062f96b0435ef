"""``sriov-dra inspect`` reads each request's device metadata file from the plugin data dir on the node."""

from __future__ import annotations

from pathlib import Path

from sriov_dra.cli import inspect
from sriov_dra.core.plugin import device_metadata


def test_the_reader_finds_the_file_where_the_plugin_writes_it_and_answers_none_elsewhere(
    tmp_path: Path,
) -> None:
    path = tmp_path.joinpath(*device_metadata.host_file_parts("ai", "pairs-devices", "nic-0"))
    path.parent.mkdir(parents=True)
    path.write_text('{"kind": "DeviceMetadata"}\n')
    read = inspect.metadata_reader(str(tmp_path))
    assert read("ai", "pairs-devices", "nic-0/fast") == '{"kind": "DeviceMetadata"}\n'
    assert read("ai", "pairs-devices", "nic-1") is None
    assert read("ai", "../escape", "nic-0") is None
    assert inspect.metadata_reader(str(tmp_path / "absent"))("ai", "pairs-devices", "nic-0") is None
