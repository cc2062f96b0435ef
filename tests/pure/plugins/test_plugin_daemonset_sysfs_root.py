"""The plugin role's DaemonSet reads the node's /sys by default, or a sysfs tree the operator names (``plugin_sysfs_root``).

Rendered from ``roles/plugin/templates/daemonset.yaml.j2`` with the role's defaults and Jinja2 (the
two Ansible filters the template uses are given their Ansible meaning: ``to_json``, ``dirname``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import jinja2
import yaml

REPO = Path(__file__).resolve().parents[3]
ROLE = REPO / "roles" / "plugin"


def _render(**overrides: Any) -> dict[str, Any]:
    defaults = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())
    values = {**defaults, "plugin_image": "r/sriov-dra:1@sha256:" + "0" * 64, **overrides}
    values["plugin_policy_namespace"] = values["plugin_namespace"]
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    env.filters["to_json"] = json.dumps
    env.filters["dirname"] = os.path.dirname
    text = env.from_string((ROLE / "templates" / "daemonset.yaml.j2").read_text()).render(**values)
    doc: dict[str, Any] = yaml.safe_load(text)
    return doc


def _sys_mount(doc: dict[str, Any]) -> tuple[list[str], str, str]:
    """(plugin args, the sys volume's mount path, its hostPath)."""
    spec = doc["spec"]["template"]["spec"]
    container = spec["containers"][0]
    mount = next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == "sys")
    host = next(v["hostPath"]["path"] for v in spec["volumes"] if v["name"] == "sys")
    return container["args"], mount, host


def test_by_default_the_plugin_reads_the_nodes_own_sys_and_gets_no_sysfs_root_flag() -> None:
    args, mount, host = _sys_mount(_render())
    assert (mount, host) == ("/sys", "/sys")
    assert [a for a in args if a.startswith("--sysfs-root")] == []
    assert "--cdi-root=/var/run/cdi" in args  # not vacuous: the args were rendered


def test_a_sysfs_root_is_passed_as_the_flag_and_its_sys_is_mounted_from_the_node_at_the_same_path() -> None:
    args, mount, host = _sys_mount(_render(plugin_sysfs_root="/srv/lab/node-1/sysfs"))
    assert "--sysfs-root=/srv/lab/node-1/sysfs" in args
    assert (mount, host) == ("/srv/lab/node-1/sysfs/sys", "/srv/lab/node-1/sysfs/sys")
