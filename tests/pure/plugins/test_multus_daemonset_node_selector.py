"""The multus role's DaemonSets run on every node by default, or on the nodes ``multus_node_selector`` names.

Rendered from ``roles/multus/templates/multus-{thin,thick}.yaml.j2`` with the role's defaults and Jinja2
(``to_json`` given its Ansible meaning). Thick Multus's daemon reads the daemon config the role's node
part writes, so an install whose node and cluster parts run apart (the lab) labels a node once its node
part ran, and the DaemonSet never starts a daemon that would crash-loop on a missing config.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jinja2
import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "multus"


def _render(mode: str, **overrides: Any) -> dict[str, Any]:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    values = {**defaults, "multus_image": "r/multus-cni:v4.3.0@sha256:" + "0" * 64, **overrides}
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["to_json"] = json.dumps
    text = env.from_string((ROLE / "templates" / f"multus-{mode}.yaml.j2").read_text()).render(**values)
    doc: dict[str, Any] = yaml.safe_load(text)
    return doc


@pytest.mark.parametrize("mode", ["thin", "thick"])
def test_by_default_the_multus_daemonset_has_no_node_selector(mode: str) -> None:
    spec = _render(mode)["spec"]["template"]["spec"]
    assert "nodeSelector" not in spec
    assert spec["serviceAccountName"] == "multus"  # not vacuous: the Pod spec was rendered


@pytest.mark.parametrize("mode", ["thin", "thick"])
def test_a_multus_node_selector_is_the_daemonsets_node_selector(mode: str) -> None:
    selector = {"example.com/multus-config": "true", "kubernetes.io/os": "linux"}
    spec = _render(mode, multus_node_selector=selector)["spec"]["template"]["spec"]
    assert spec["nodeSelector"] == selector
