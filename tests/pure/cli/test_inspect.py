"""``sriov-dra inspect``: one row per SR-IOV result, correlated through slices, shadows and the netns.

Built on a fake object reader holding the objects of the gpu-nic-pairs example after prepare (a claim
with two GPU and two VF results, their ResourceSlices, two shadows with binding annotations, the
source templates, the Pod with Multus's network-status). Each check of a row is proven to fail
when its fact is broken (tests/pure/cli/test_inspect_rows.py); the command's own behaviour is here.
"""

from __future__ import annotations

from typing import Any

import pytest

from sriov_dra.cli import inspect
from sriov_dra.kube import objects


def test_unreadable_netns_is_one_line_naming_the_path_and_the_reason() -> None:
    with pytest.raises(inspect.NetnsUnreadable) as caught:
        inspect.read_netns("/nonexistent/sriov-dra-netns")
    assert str(caught.value).startswith("cannot read network namespace /nonexistent/sriov-dra-netns: ")
    assert "No such file or directory" in caught.value.reason and "\n" not in str(caught.value)


def test_inspect_command_exits_2_with_one_line_when_the_netns_cannot_be_read(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Any
) -> None:
    from types import SimpleNamespace

    from sriov_dra.kube import client as kube_client

    monkeypatch.setattr(kube_client, "from_kubeconfig", lambda path: SimpleNamespace(close=lambda: None))
    monkeypatch.setattr(objects, "Objects", lambda api, field_manager: None)

    def unreadable(*_a: Any, **_k: Any) -> Any:
        raise inspect.NetnsUnreadable("/bad", "nsenter: cannot open /bad: Permission denied")

    monkeypatch.setattr(inspect, "inspect_pod", unreadable)
    args = SimpleNamespace(
        kubeconfig=str(tmp_path / "kc"),
        namespace="ai",
        pod="p",
        netns="/bad",
        output="table",
        metadata_dir=str(tmp_path),
    )
    assert inspect.run(args) == 2
    err = capsys.readouterr().err
    assert (
        err
        == "sriov-dra inspect: cannot read network namespace /bad: nsenter: cannot open /bad: Permission denied\n"
    )
