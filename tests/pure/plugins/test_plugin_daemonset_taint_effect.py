"""The plugin role's DaemonSet taints unhealthy VFs NoSchedule by default; NoExecute only when asked.

Rendered from ``roles/plugin/templates/daemonset.yaml.j2`` with the role's defaults, as
``test_plugin_daemonset_sysfs_root`` renders it; the values are parsed by the plugin's own settings.
"""

from __future__ import annotations

from tests.pure.plugins.test_plugin_daemonset_sysfs_root import _render

from sriov_dra.driver import settings


def _effect(**overrides: object) -> str:
    container = _render(**overrides)["spec"]["template"]["spec"]["containers"][0]
    return str(settings.parse(container["args"], {"NODE_NAME": "n1"}).unhealthy_taint_effect)


def test_by_default_the_plugin_taints_no_schedule() -> None:
    assert _effect() == "NoSchedule"


def test_no_execute_is_an_opt_in_role_variable() -> None:
    assert _effect(plugin_unhealthy_taint_effect="NoExecute") == "NoExecute"
