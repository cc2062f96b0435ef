"""The lab reads manifests and examples through the strict YAML loader: a repeated key is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from sriov_dra_lab import stack_base, workloads
from sriov_dra_rules import errors

POD = """apiVersion: v1
kind: Pod
metadata:
  name: demo
  namespace: NS
  namespace: other
"""


def test_example_with_a_repeated_key_is_refused_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "pod.yaml"
    path.write_text("---\n" + POD)
    with pytest.raises(errors.InvalidSpec) as caught:
        workloads.load(path, {"NS": "ai-workloads"})
    assert str(path) in caught.value.summary
    assert [e.path for e in caught.value.errors] == ["$[0].metadata.namespace"]


def test_manifest_with_a_repeated_key_is_refused_with_its_path(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("kind: A\n")
    (tmp_path / "b.yaml").write_text("kind: B\n---\n" + POD)
    with pytest.raises(errors.InvalidSpec) as caught:
        stack_base.load_manifests(tmp_path)
    assert str(tmp_path / "b.yaml") in caught.value.summary
    assert [e.path for e in caught.value.errors] == ["$[1].metadata.namespace"]


def test_manifests_without_repeats_load_in_order(tmp_path: Path) -> None:
    (tmp_path / "a.yaml").write_text("kind: A\n---\n# only a comment\n")
    (tmp_path / "b.yaml").write_text(POD.replace("  namespace: other\n", ""))
    assert [d["kind"] for d in stack_base.load_manifests(tmp_path)] == ["A", "Pod"]
