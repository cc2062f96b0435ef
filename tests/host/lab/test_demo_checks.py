"""The demo's verdict and its audit-log check of Multus's DRA lookups."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sriov_dra_lab import demo


def _event(user: str, group: str, resource: str) -> str:
    return json.dumps({"user": {"username": user}, "objectRef": {"apiGroup": group, "resource": resource}})


def test_only_multus_requests_to_resource_k8s_io_count(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text(
        "\n".join(
            [
                _event(demo.MULTUS_USER, "k8s.cni.cncf.io", "network-attachment-definitions"),
                _event("system:node:lab-node-1", "resource.k8s.io", "resourceclaims"),
                _event(demo.MULTUS_USER, "k8s.cni.cncf.io", "network-attachment-definitions"),
                "not json",
            ]
        )
    )
    assert (demo.multus_dra_reads(log), demo.multus_requests(log)) == (0, 2)
    with log.open("a") as f:
        f.write("\n" + _event(demo.MULTUS_USER, "resource.k8s.io", "resourceslices"))
    assert demo.multus_dra_reads(log) == 1
    assert demo.multus_dra_reads(tmp_path / "missing.log") == 0


def test_verdict_is_one_line_naming_failed_checks() -> None:
    verdict = demo.Verdict()
    assert not verdict.passed and verdict.line(1.0).startswith("FAIL: 0 of 0")
    verdict.check("pods run", True)
    verdict.sections.append("one-network-deviceclass")
    assert (
        verdict.passed and verdict.line(12.4) == "PASS: all 1 checks passed (one-network-deviceclass) in 12 s"
    )
    held = verdict.line(12.4, held_s=31.0)
    assert (
        held
        == "PASS: all 1 checks passed (one-network-deviceclass) in 12 s (demo time; 31 s at the --hold pause not counted)"
    )
    verdict.check("nothing left", False, "shadows: 1")
    line = verdict.line(3.0)
    assert not verdict.passed and line == "FAIL: 1 of 2 checks failed: nothing left" and "\n" not in line


def test_workload_yaml_check_flags_networks_annotations_and_resource_names() -> None:
    clean = [{"kind": "Pod", "metadata": {"name": "p"}, "spec": {}}]
    dirty = [
        {"kind": "Pod", "metadata": {"name": "p", "annotations": {"k8s.v1.cni.cncf.io/networks": "x"}}},
        {"kind": "DeviceClass", "metadata": {"name": "c"}, "spec": {"resourceName": "r"}},
        {
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": "n", "annotations": {"resourceName": "ok"}},
        },
    ]
    assert demo._workload_text_clean(clean)[0]
    ok, detail = demo._workload_text_clean(dirty)
    assert not ok and detail == "Pod/p, DeviceClass/c"


@pytest.mark.parametrize(
    ("expected", "got", "line"),
    [
        (
            ["dra0", "dra1"],
            ["dra0", "dra1"],
            "    [ok  ] p: interfaces: expected [dra0, dra1], got [dra0, dra1]",
        ),
        (
            ["192.0.2.0/24", "198.51.100.0/24"],
            ["192.0.2.0/24"],
            "    [FAIL] p: interfaces: expected [192.0.2.0/24, 198.51.100.0/24], got [192.0.2.0/24]",
        ),
        (2, 2, "    [ok  ] p: interfaces: expected 2, got 2"),
        ([], [], "    [ok  ] p: interfaces: expected [], got []"),
    ],
    ids=["equal-lists", "missing-rail-fails", "counts", "empty"],
)
def test_expect_prints_what_then_expected_then_got(
    expected: object, got: object, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    verdict = demo.Verdict()
    assert verdict.expect("p: interfaces", expected, got) == (expected == got)
    assert capsys.readouterr().out.rstrip("\n") == line
