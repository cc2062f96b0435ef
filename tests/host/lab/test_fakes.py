"""The lab's stand-ins the product does not ship: the fault killer, the plugin launcher's seams."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from sriov_dra.driver import faults
from sriov_dra.driver import main as plugin_main
from sriov_dra_lab import launch_plugin
from sriov_dra_lab.fakes import fake_devlink, fake_pci, fake_sysfs, fault_kill


@pytest.mark.parametrize(
    ("env", "expected"),
    [({}, None), ({fault_kill.ENV_VAR: "prepare:bound"}, "prepare:bound")],
    ids=["unset-means-no-faults", "named-point-kills-there"],
)
def test_fault_injection_is_off_unless_the_environment_names_a_point(
    env: dict[str, str], expected: str | None
) -> None:
    hook = fault_kill.from_environment(env)
    assert (hook.point if isinstance(hook, fault_kill.KillAt) else None) == expected
    assert (hook is faults.NO_FAULTS) == (expected is None)


def test_fault_injection_refuses_an_unknown_point() -> None:
    with pytest.raises(ValueError, match="names no fault point; use one of prepare:checkpointed"):
        fault_kill.from_environment({fault_kill.ENV_VAR: "prepare:nowhere"})


def test_launcher_refuses_an_unknown_fault_point_before_the_plugin_starts(
    capsys: pytest.CaptureFixture[str],
) -> None:
    status = launch_plugin.main(["--node-name", "n"], {fault_kill.ENV_VAR: "prepare:nowhere"})
    assert status == plugin_main.EXIT_BAD_SETTINGS
    assert "SRIOV_DRA_TEST_KILL_AT='prepare:nowhere' names no fault point" in capsys.readouterr().err


def test_launcher_fills_every_plugin_seam_with_the_lab_fakes() -> None:
    got = launch_plugin.seams({fault_kill.ENV_VAR: "unprepare:status"})
    assert got.kernel is launch_plugin.fake_kernel
    assert got.eswitch_modes is fake_sysfs.FakeEswitchModes
    assert isinstance(got.fault, fault_kill.KillAt) and got.fault.point == "unprepare:status"
    assert plugin_main.PRODUCTION.fault is faults.NO_FAULTS
    assert (plugin_main.PRODUCTION.kernel, plugin_main.PRODUCTION.eswitch_modes) == (None, None)


def test_launcher_fake_kernel_refuses_the_host_sysfs() -> None:
    with pytest.raises(plugin_main.StartupError, match="fake sysfs trees only, not the host's /sys"):
        launch_plugin.fake_kernel(Path("/"))


def test_fake_devlink_answers_the_fake_trees_eswitch_file_as_iproute2_does(tmp_path: Path) -> None:
    pf = fake_pci.FakePf(bdf="0000:3b:00.0", ifname="ens2f0np0", eswitch_mode="switchdev")
    fake_sysfs.build(tmp_path, (pf, fake_pci.FakePf(bdf="0000:5e:00.0", ifname="ens3f0")))
    status, out, _ = fake_devlink.answer(["-j", "dev", "eswitch", "show", "pci/0000:3b:00.0"], tmp_path)
    assert (status, json.loads(out)["dev"]["pci/0000:3b:00.0"]["mode"]) == (0, "switchdev")
    assert fake_devlink.answer(["-j", "dev", "eswitch", "show", "pci/0000:5e:00.0"], tmp_path) == (
        1, "", "kernel answers: Operation not supported\n")  # fmt: skip
    assert fake_devlink.answer(["-j", "dev", "eswitch", "show", "pci/0000:99:00.0"], tmp_path)[2] == (
        "kernel answers: No such device\n")  # fmt: skip
    assert fake_devlink.answer(["dev", "show"], tmp_path)[0] == 2
