"""Tests for ``plugins/module_utils/numvfs_boot.py``: the ``vfs`` role's boot program on a fake sysfs root.

The fake SR-IOV kernel (``tests/ansible/fake_sriov_kernel.py``) stands behind the program's
``writer`` seam, as in the module's tests: it creates and removes VFs, binds drivers, refuses
non-zero to non-zero with EBUSY and fails scripted writes with a chosen errno. Tree: PF
``enp3s0f0`` (0000:03:00.0) with 0 of 64 VFs, PF ``enp129s0f0`` (0000:81:00.0) with 2 of 8 VFs on
iavf; ``vfio-pci`` is registered.
"""

from __future__ import annotations

import argparse
import ast
import errno
import io
import os
from pathlib import Path

import pytest
import yaml
from ansible_collections.sriovnet.dra.plugins.module_utils import numvfs, numvfs_boot
from hypothesis import given
from hypothesis import strategies as st
from tests.ansible import fake_sriov_kernel

from sriov_dra_lab.fakes import fake_pci, fake_sysfs

REPO = Path(__file__).resolve().parents[4]
MODULE_UTILS = REPO / "plugins" / "module_utils"
PF0, PF0_BDF = "enp3s0f0", "0000:03:00.0"
PF1, PF1_BDF = "enp129s0f0", "0000:81:00.0"


@pytest.fixture
def kernel(tmp_path: Path) -> fake_sriov_kernel.FakeSriovKernel:
    first, second = fake_pci.two_root_pfs(0)
    fake_sysfs.build(
        tmp_path,
        (
            fake_pci.FakePf(**{**vars(first), "totalvfs": 64}),
            fake_pci.FakePf(**{**vars(second), "totalvfs": 8, "vfs": fake_pci.make_vfs(2)}),
        ),
    )
    return fake_sriov_kernel.FakeSriovKernel(tmp_path)


def _boot(kernel, *specs: str, drain: bool = True, timeout: int = 1, writer=None) -> tuple[int, str, str]:
    """Run the program as the unit does; returns (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    argv = ["--root", str(kernel.root), "--timeout", str(timeout), *(["--drain-confirmed"] if drain else [])]
    status = numvfs_boot.main([*argv, *specs], writer=writer or kernel.write, out=out, err=err)
    return status, out.getvalue(), err.getvalue()


def _path(kernel, bdf: str, name: str = "sriov_numvfs") -> str:
    return f"{kernel.root}/sys/bus/pci/devices/{bdf}/{name}"


def _links(kernel, bdf: str) -> int:
    return len(kernel.fake.sysfs.virtfns(bdf))


def _drivers(kernel, bdf: str) -> list[str | None]:
    return [kernel.fake.sysfs.current_driver(link.bdf) for link in kernel.fake.sysfs.virtfns(bdf)]


# --- PF addressing ----------------------------------------------------------------------------


def test_pf_given_by_pci_address_is_written_under_sys_bus_pci_devices(kernel):
    status, out, err = _boot(kernel, f"{PF0_BDF}=4")
    assert (status, err) == (numvfs_boot.EXIT_OK, "")
    assert kernel.calls == [(_path(kernel, PF0_BDF), "4")]
    assert _links(kernel, PF0_BDF) == 4
    assert out == (
        "PF 0000:03:00.0 (0000:03:00.0): 4 VFs as planned (had 0, 1 sysfs writes)\nsriov-dra-vfs: 1 PFs as planned\n"
    )


def test_pf_given_by_netdev_name_resolves_to_its_pci_address(kernel):
    status, out, _ = _boot(kernel, f"{PF0}=3")
    assert status == numvfs_boot.EXIT_OK
    assert kernel.calls == [(_path(kernel, PF0_BDF), "3")]
    assert out.splitlines()[0] == "PF enp3s0f0 (0000:03:00.0): 3 VFs as planned (had 0, 1 sysfs writes)"


def test_no_pf_arguments_succeed_without_touching_the_tree(kernel):
    assert _boot(kernel) == (numvfs_boot.EXIT_OK, "sriov-dra-vfs: 0 PFs as planned\n", "")
    assert kernel.calls == []


# --- every PF is tried ------------------------------------------------------------------------


def test_a_failing_pf_is_reported_with_pf_count_and_errno_meaning_and_the_next_pf_is_still_set(kernel):
    kernel.fail_next(_path(kernel, PF0_BDF), errno.ENOSPC)
    status, out, err = _boot(kernel, f"{PF0_BDF}=8", f"{PF1_BDF}=3")
    assert status == numvfs_boot.EXIT_FAILED
    assert err == (
        f"PF 0000:03:00.0 (0000:03:00.0): writing 8 to {_path(kernel, PF0_BDF)} failed with ENOSPC (No space "
        "left on device) while changing 0 -> 8 VFs: the device cannot provide that many VFs (firmware VF "
        "limit, MSI-X vectors or PCI bus numbers). Lower num_vfs, raise the firmware limit, or boot with "
        "pci=realloc.\n"
        "sriov-dra-vfs: 1 of 2 PFs are not as planned: 0000:03:00.0\n"
    )
    assert out == "PF 0000:81:00.0 (0000:81:00.0): 3 VFs as planned (had 2, 2 sysfs writes)\n"
    assert (_links(kernel, PF0_BDF), _links(kernel, PF1_BDF)) == (0, 3)


def test_an_unknown_pf_is_reported_and_the_next_pf_is_still_set(kernel):
    status, out, err = _boot(kernel, "ens9=2", f"{PF0}=2")
    assert status == numvfs_boot.EXIT_FAILED
    assert err.splitlines()[0] == (
        f"PF ens9 not found: {kernel.root}/sys/class/net/ens9/device is missing; use the PF's netdev name "
        "(ip link) or its PCI address (lspci -D), and check host_root"
    )
    assert out.startswith("PF enp3s0f0 (0000:03:00.0): 2 VFs as planned")


def test_an_unexpected_error_in_one_pf_is_reported_with_its_traceback_and_the_next_pf_is_still_set(kernel):
    def writer(path: str, text: str) -> None:
        if PF0_BDF in path:
            raise RuntimeError("driver callback crashed")
        kernel.write(path, text)

    status, out, err = _boot(kernel, f"{PF0_BDF}=2", f"{PF1_BDF}=2:vfio-pci", writer=writer)
    assert status == numvfs_boot.EXIT_FAILED
    assert err.startswith("PF 0000:03:00.0: unexpected RuntimeError: driver callback crashed\nTraceback")
    assert err.endswith("sriov-dra-vfs: 1 of 2 PFs are not as planned: 0000:03:00.0\n")
    assert out.startswith("PF 0000:81:00.0 (0000:81:00.0): 2 VFs on vfio-pci as planned")


# --- counts: zero first, refusals, the "now at 0" message ------------------------------------


def test_a_pf_with_other_vfs_is_set_to_zero_then_its_count_with_drain_confirmed(kernel):
    status, _, _ = _boot(kernel, f"{PF1_BDF}=5")
    assert status == numvfs_boot.EXIT_OK
    assert kernel.calls == [(_path(kernel, PF1_BDF), "0"), (_path(kernel, PF1_BDF), "5")]
    assert _links(kernel, PF1_BDF) == 5


def test_a_pf_with_other_vfs_is_refused_before_writing_without_drain_confirmed(kernel):
    status, _, err = _boot(kernel, f"{PF1_BDF}=5", drain=False)
    assert status == numvfs_boot.EXIT_FAILED
    assert err.splitlines()[0].startswith("PF 0000:81:00.0 (0000:81:00.0) has 2 VFs and 5 are requested;")
    assert kernel.calls == []


def test_new_count_failing_after_zero_says_the_pf_is_now_at_zero_vfs(kernel):
    kernel.fail_next(_path(kernel, PF1_BDF), errno.EBUSY, value="5")
    status, _, err = _boot(kernel, f"{PF1_BDF}=5")
    assert status == numvfs_boot.EXIT_FAILED
    assert err.splitlines()[0].endswith(
        "then rerun. The PF is now at 0 VFs: 0 was written and verified first, so the 2 VFs it had are gone "
        "until a rerun succeeds."
    )
    assert "writing 5 to" in err and "EBUSY (Device or resource busy) while changing 2 -> 5 VFs" in err
    assert _links(kernel, PF1_BDF) == 0


def test_above_totalvfs_is_refused_before_writing(kernel):
    status, _, err = _boot(kernel, f"{PF1_BDF}=9")
    assert status == numvfs_boot.EXIT_FAILED
    assert err.splitlines()[0].startswith(
        "PF 0000:81:00.0 (0000:81:00.0): 9 VFs requested but sriov_totalvfs is 8"
    )
    assert kernel.calls == []


def test_a_second_run_writes_nothing_and_succeeds(kernel):
    assert _boot(kernel, f"{PF0_BDF}=2:vfio-pci", f"{PF1_BDF}=2")[0] == numvfs_boot.EXIT_OK
    calls = len(kernel.calls)
    status, out, _ = _boot(kernel, f"{PF0_BDF}=2:vfio-pci", f"{PF1_BDF}=2")
    assert (status, len(kernel.calls)) == (numvfs_boot.EXIT_OK, calls)
    assert out.splitlines()[:2] == [
        "PF 0000:03:00.0 (0000:03:00.0): 2 VFs on vfio-pci as planned (nothing written)",
        "PF 0000:81:00.0 (0000:81:00.0): 2 VFs as planned (nothing written)",
    ]


# --- verification -----------------------------------------------------------------------------


def test_verification_fails_when_the_virtfn_links_do_not_appear_after_the_write(kernel):
    # The plain file takes the count, but no kernel creates VFs: sriov_numvfs=4, no virtfn links.
    status, out, err = _boot(kernel, f"{PF0_BDF}=4", f"{PF1_BDF}=2", timeout=0, writer=numvfs.write_attribute)
    assert status == numvfs_boot.EXIT_FAILED
    assert err.splitlines()[0] == (
        "PF 0000:03:00.0 (0000:03:00.0): wrote 4 to sriov_numvfs but after 0s sysfs shows sriov_numvfs=4 and 0 "
        "virtfn links; the PF driver did not create or remove the VFs. Check dmesg and the driver's SR-IOV "
        "support, then rerun."
    )
    assert out.startswith("PF 0000:81:00.0 (0000:81:00.0): 2 VFs as planned (nothing written)")


def test_a_count_sysfs_already_shows_without_its_virtfn_links_fails_verification_without_writing(kernel):
    os.unlink(f"{kernel.root}/sys/bus/pci/devices/{PF1_BDF}/virtfn1")
    status, _, err = _boot(kernel, f"{PF1_BDF}=2", timeout=0)
    assert status == numvfs_boot.EXIT_FAILED
    assert err.splitlines()[0] == (
        "PF 0000:81:00.0 (0000:81:00.0): expected 2 VFs but after 0s sysfs shows sriov_numvfs=2 and 1 virtfn "
        "links; the PF driver did not create or remove the VFs. Check dmesg and the driver's SR-IOV support, "
        "then rerun."
    )
    assert kernel.calls == []


# --- the recorded VF driver -------------------------------------------------------------------


def test_the_recorded_vf_driver_is_applied_with_driver_override_and_bind(kernel):
    status, out, _ = _boot(kernel, f"{PF0_BDF}=2:vfio-pci")
    assert status == numvfs_boot.EXIT_OK
    assert _drivers(kernel, PF0_BDF) == ["vfio-pci", "vfio-pci"]
    vf = "0000:03:02.0"
    assert kernel.calls[1:5] == [
        (_path(kernel, vf, "driver_override"), "vfio-pci"),
        (f"{kernel.root}/sys/bus/pci/drivers/iavf/unbind", vf),
        (f"{kernel.root}/sys/bus/pci/drivers/vfio-pci/bind", vf),
        (_path(kernel, vf, "driver_override"), "\n"),
    ]
    assert kernel.fake.sysfs.driver_override(vf) == ""
    assert (
        out.splitlines()[0]
        == "PF 0000:03:00.0 (0000:03:00.0): 2 VFs on vfio-pci as planned (had 0, 9 sysfs writes)"
    )


def test_existing_vfs_on_another_driver_are_rebound_only_with_drain_confirmed(kernel):
    status, _, err = _boot(kernel, f"{PF1_BDF}=2:vfio-pci", drain=False)
    assert status == numvfs_boot.EXIT_FAILED
    assert err.splitlines()[0].startswith(
        "PF 0000:81:00.0 (0000:81:00.0): VFs 0000:81:02.0 (iavf), 0000:81:02.1 (iavf)"
    )
    assert kernel.calls == []
    assert _boot(kernel, f"{PF1_BDF}=2:vfio-pci")[0] == numvfs_boot.EXIT_OK
    assert _drivers(kernel, PF1_BDF) == ["vfio-pci", "vfio-pci"]


def test_a_vf_driver_that_is_not_registered_fails_with_the_modprobe_hint(kernel):
    status, _, err = _boot(kernel, f"{PF0_BDF}=1:mlx5-vf")
    assert status == numvfs_boot.EXIT_FAILED
    assert err.splitlines()[0].endswith("is missing); load it first, e.g. modprobe mlx5_vf")


def test_a_vf_that_stays_on_another_driver_after_bind_fails_verification(kernel):
    def writer(path: str, text: str) -> None:
        if not path.endswith(("/unbind", "/bind")):  # the driver takes the writes but nothing moves
            kernel.write(path, text)

    status, _, err = _boot(kernel, f"{PF0_BDF}=1:vfio-pci", timeout=0, writer=writer)
    assert status == numvfs_boot.EXIT_FAILED
    assert err.splitlines()[0] == (
        "VF 0 of PF 0000:03:00.0 (0000:03:02.0): still on driver iavf 0s after binding to vfio-pci; check dmesg"
    )


def test_verify_names_the_vfs_that_are_not_on_the_recorded_driver(kernel):
    sysfs = numvfs_boot.sysfs_mod.Sysfs(str(kernel.root))
    change = numvfs.plan(sysfs, PF1, 2, drain_confirmed=False)
    with pytest.raises(numvfs.NumVfsError) as failed:
        numvfs.verify(sysfs, change, "vfio-pci", 0)
    assert failed.value.msg == (
        "PF enp129s0f0 (0000:81:00.0): VFs 0000:81:02.0 (iavf), 0000:81:02.1 (iavf) are not on vfio-pci after "
        "binding; check dmesg and that vfio-pci accepts them."
    )


# --- arguments --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("arg", "problem"),
    [
        ("0000:03:00.0", "expected PF=COUNT or PF=COUNT:DRIVER"),
        ("=4", "expected PF=COUNT or PF=COUNT:DRIVER"),
        ("enp3s0f0=-1", "the VF count '-1' is not a number 0 or more"),
        ("enp3s0f0=04", "the VF count '04' is not a number 0 or more"),
        ("enp3s0f0=4:", "the VF driver '' is not a driver name"),
        ("enp3s0f0=4:../x", "the VF driver '../x' is not a driver name"),
        ("../net/x=1", "the PF must be a PCI address or a netdev name (no '/', no spaces)"),
    ],
    ids=["no-count", "no-pf", "negative-count", "leading-zero", "empty-driver", "driver-path", "pf-path"],
)
def test_a_malformed_argument_exits_2_naming_it_before_anything_is_read(kernel, capsys, arg, problem):
    with pytest.raises(SystemExit) as exited:
        _boot(kernel, f"{PF0}=1", arg)
    assert exited.value.code == numvfs_boot.EXIT_USAGE
    assert f"{arg!r}: {problem}, e.g. 0000:03:00.0=8 or ens1f0=4:vfio-pci" in capsys.readouterr().err
    assert kernel.calls == []


_NAMES = st.text(st.characters(blacklist_characters="/=", blacklist_categories=("Zs", "Cc")), min_size=1)


@given(
    pf=_NAMES,
    count=st.integers(0, 4096),
    driver=st.none() | st.from_regex(r"[a-z0-9][a-z0-9_.-]{0,15}", fullmatch=True),
)
def test_a_well_formed_argument_parses_back_to_its_parts(pf, count, driver):
    spec = numvfs_boot.parse_spec(f"{pf}={count}" + (f":{driver}" if driver else ""))
    assert (spec.pf, spec.num_vfs, spec.vf_driver) == (pf, count, driver)


@given(st.text())
def test_any_argument_parses_or_is_refused_with_a_usage_error(text):
    try:
        spec = numvfs_boot.parse_spec(text)
    except argparse.ArgumentTypeError as exc:
        assert str(exc).startswith(repr(text))
    else:
        assert text == f"{spec.pf}={spec.num_vfs}" + (f":{spec.vf_driver}" if spec.vf_driver else "")


# --- what the role ships ----------------------------------------------------------------------


PREFIX = "ansible_collections.sriovnet.dra.plugins.module_utils"


def _module_utils_imports(name: str) -> set[str]:
    """Files (relative to ``plugins/module_utils``) that the module_utils file ``name`` imports.

    Absolute imports under :data:`PREFIX` and relative ones resolve to a module or a package's
    ``__init__.py``; any other import must be the standard library's (a node has no Ansible).
    """
    package = Path(name).parent
    found = set()
    for node in ast.walk(ast.parse((MODULE_UTILS / name).read_text())):
        if isinstance(node, ast.Import):
            assert not any(a.name.startswith("ansible") for a in node.names), (name, ast.dump(node))
            continue
        if not isinstance(node, ast.ImportFrom):
            continue
        module = (node.module or "").replace(".", "/")
        if node.level:
            where = package.joinpath(*[".."] * (node.level - 1), module)
        elif node.module and (node.module + ".").startswith(PREFIX + "."):
            where = Path(module[len(PREFIX) + 1 :])
        else:
            assert not (node.module or "").startswith("ansible"), (name, node.module)
            continue
        where = Path(os.path.normpath(where))
        if str(where) != "." and where.parts:
            found.add(str(where / "__init__.py"))
        for alias in node.names:
            module_file = where / f"{alias.name}.py"
            found.add(str(module_file if (MODULE_UTILS / module_file).exists() else where / "__init__.py"))
    missing = sorted(f for f in found if not (MODULE_UTILS / f).exists())
    assert not missing, f"{name} imports what is not under plugins/module_utils: {missing}"
    return found


def test_the_role_ships_every_module_utils_file_the_boot_program_imports():
    closure, todo = set(), ["numvfs_boot.py"]
    while todo:
        name = todo.pop()
        if name not in closure:
            closure.add(name)
            todo.extend(_module_utils_imports(name))
    role_vars = yaml.safe_load((REPO / "roles" / "vfs" / "vars" / "main.yml").read_text())
    rules = role_vars["vfs_boot_rules_package"]
    shipped = set(role_vars["vfs_boot_module_utils"])
    shipped |= {f"{rules}/{p.name}" for p in (MODULE_UTILS / rules).glob("*.py")}
    assert closure <= shipped, f"the boot program imports files the role does not copy: {closure - shipped}"
    top_level = {f for f in closure if "/" not in f}
    assert set(role_vars["vfs_boot_module_utils"]) == top_level, "the role copies a file nothing imports"
    assert role_vars["vfs_boot_packages"][-1] == PREFIX.replace(".", "/")
