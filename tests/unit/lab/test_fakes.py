"""The lab's stand-ins the product does not ship: the fault killer, the plugin launcher's seams."""

from __future__ import annotations

from pathlib import Path

import pytest

from sriov_dra.driver import faults
from sriov_dra.driver import main as plugin_main
from sriov_dra_lab import launch_plugin
from sriov_dra_lab.fakes import fakesysfs, faultkill
from sriov_dra_rules import sysfsread


@pytest.mark.parametrize(
    ("env", "expected"),
    [({}, None), ({faultkill.ENV_VAR: "prepare:bound"}, "prepare:bound")],
    ids=["unset-means-no-faults", "named-point-kills-there"],
)
def test_fault_injection_is_off_unless_the_environment_names_a_point(
    env: dict[str, str], expected: str | None
) -> None:
    hook = faultkill.from_environment(env)
    assert (hook.point if isinstance(hook, faultkill.KillAt) else None) == expected
    assert (hook is faults.NO_FAULTS) == (expected is None)


def test_fault_injection_refuses_an_unknown_point() -> None:
    with pytest.raises(ValueError, match="names no fault point; use one of prepare:checkpointed"):
        faultkill.from_environment({faultkill.ENV_VAR: "prepare:nowhere"})


def test_launcher_refuses_an_unknown_fault_point_before_the_plugin_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = launch_plugin.main(["--node-name", "n"], {faultkill.ENV_VAR: "prepare:nowhere"})
    assert status == plugin_main.EXIT_BAD_SETTINGS
    assert "SRIOV_DRA_TEST_KILL_AT='prepare:nowhere' names no fault point" in capsys.readouterr().err


def test_launcher_fills_every_plugin_seam_with_the_lab_fakes() -> None:
    got = launch_plugin.seams({faultkill.ENV_VAR: "unprepare:status"})
    assert got.kernel is launch_plugin.fake_kernel
    assert got.eswitch_modes is fakesysfs.FakeEswitchModes
    assert isinstance(got.fault, faultkill.KillAt) and got.fault.point == "unprepare:status"
    assert plugin_main.PRODUCTION.fault is faults.NO_FAULTS
    assert (plugin_main.PRODUCTION.kernel, plugin_main.PRODUCTION.eswitch_modes) == (None, None)


def test_launcher_fake_kernel_refuses_the_host_sysfs() -> None:
    with pytest.raises(plugin_main.StartupError, match="fake sysfs trees only, not the host's /sys"):
        launch_plugin.fake_kernel(Path("/"))


def test_fake_tree_eswitch_file_is_the_one_the_collection_facts_read() -> None:
    assert fakesysfs.ESWITCH_MODE_FILE == sysfsread.FAKE_ESWITCH_MODE_FILE
