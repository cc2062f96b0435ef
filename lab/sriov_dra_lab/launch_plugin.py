"""``python -m sriov_dra_lab.launch_plugin``: the DRA plugin on a fake sysfs tree, for the lab and tests.

The product's plugin (``sriov-dra-plugin``, ``python -m sriov_dra.driver``) writes the kernel's own
PCI sysfs files and asks devlink for eswitch modes; a fake tree has neither a kernel nor devlink.
This launcher takes the plugin's flags unchanged (``--sysfs-root`` names the fake tree) and calls
the product's entrypoint, ``sriov_dra.driver.main.main``, with the seams it exposes
(``PluginSeams``) filled by fakes the product does not ship:

- ``kernel``: ``fake_sysfs.FakeSysfs(root).kernel()``, which emulates the kernel's binding effects
  on the tree (refused for ``--sysfs-root /``: the fake would edit the host's real ``/sys``);
- ``eswitch_modes``: ``fake_sysfs.FakeEswitchModes(root)``, the tree's stand-in for devlink;
- ``fault``: ``fault_kill.from_environment()``: SIGKILL at the step boundary that
  ``SRIOV_DRA_TEST_KILL_AT`` names (the crash tests), no fault when it is unset.

Exit statuses are the plugin's; an unknown fault point is exit 2 (bad settings) with the valid
points named, before the plugin starts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from sriov_dra.driver import main as plugin_main
from sriov_dra_lab.fakes import fake_sysfs, fault_kill


def fake_kernel(root: Path) -> fake_sysfs.FakeKernelPci:
    """The fake kernel acting on the tree at ``root``.

    Raises: ``plugin_main.StartupError`` for ``/`` (a fake tree only; the host's sysfs is real).
    """
    if Path(root).resolve() == Path("/"):
        raise plugin_main.StartupError(
            "the lab's fake PCI kernel edits fake sysfs trees only, not the host's /sys: set "
            "--sysfs-root to the tree's directory, or run sriov-dra-plugin for the host"
        )
    return fake_sysfs.FakeSysfs(root).kernel()


def seams(env: Mapping[str, str] | None = None) -> plugin_main.PluginSeams:
    """The lab's seams for the plugin (module docstring). Raises: ``ValueError`` for an unknown point."""
    return plugin_main.PluginSeams(
        kernel=fake_kernel,
        eswitch_modes=fake_sysfs.FakeEswitchModes,
        fault=fault_kill.from_environment(os.environ if env is None else env),
    )


def main(argv: Sequence[str] | None = None, env: Mapping[str, str] | None = None) -> int:
    """Run the plugin with the lab's seams; return its exit status."""
    try:
        lab_seams = seams(env)
    except ValueError as exc:
        print(f"sriov-dra-plugin (lab launcher): {exc}", file=sys.stderr)
        return plugin_main.EXIT_BAD_SETTINGS
    return plugin_main.main(argv, env, seams=lab_seams)


if __name__ == "__main__":
    sys.exit(main())
