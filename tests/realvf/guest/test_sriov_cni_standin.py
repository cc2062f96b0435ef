"""The lab's sriov-cni stand-in checked against the real sriov-cni on one real VF.

The lab's VFs are veth ends with no PCI function behind them, so the lab runs
:mod:`sriov_dra_lab.sriov_cni` where sriov-cni itself cannot run. Here the same sequence of CNI
calls (:data:`SEQUENCE`: VERSION, refused configs, ADD, a second ADD refused, DEL with and without
a cache record, DEL after the netns was deleted and the ADD that follows it) runs through the real
plugin and then through the stand-in (in this process, with ``--real-vfs``, which finds the VF
through sysfs and programs its PF as sriov-cni does) on the same VF, each from an empty cache dir
and host-local dir. After every call the test records the outcome: exit status, the result or
error JSON (netns paths by role), the VF's netdev name on the host and in each netns, its line of
the PF's VF table, the names of the files in the cache dir, the allocation record and the
addresses host-local holds. Both lists must be equal; what the comparison leaves out on purpose
is :data:`NOT_COMPARED`, listed with its reason in docs/realvf.md.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import sys
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.realvf.guest import realvfs, sriovcni

from sriov_dra_lab import sriov_cni

SUBNET = "10.56.3.0/24"
NOT_COMPARED = (
    "the cache file's contents: sriov-cni's NetConf, the stand-in's own record (nothing in the product reads either)",
)


@dataclass(frozen=True)
class Call:
    """One step: a CNI command for a container in the netns of a role (or VERSION)."""

    what: str
    command: str
    role: str = ""
    container: str = ""
    settings: Mapping[str, object] | None = None
    """The VF settings of the config; None: no ``deviceID`` at all."""
    delete_netns_first: bool = False


SEQUENCE = (
    Call("version", "VERSION"),
    Call("ADD without deviceID", "ADD", "a", "c0", None),
    Call("ADD with vlan 5000", "ADD", "a", "c0", {"vlan": 5000}),
    Call("ADD with vlanQoS and no vlan", "ADD", "a", "c0", {"vlanQoS": 2}),
    Call("ADD with link_state up", "ADD", "a", "c0", {"link_state": "up"}),
    Call("ADD", "ADD", "a", "c1", {"vlan": 100, "spoofchk": "off", "trust": "on"}),
    Call("second ADD on the VF in use", "ADD", "b", "c2", {"vlan": 300}),
    Call("DEL of the refused ADD (no cache record)", "DEL", "b", "c2", {"vlan": 300}),
    Call("DEL with the netns present", "DEL", "a", "c1", {"vlan": 100, "spoofchk": "off", "trust": "on"}),
    Call("ADD for a netns deleted next", "ADD", "c", "c3", {"vlan": 200, "trust": "on"}),
    Call("DEL after the netns was deleted", "DEL", "c", "c3", {"vlan": 200, "trust": "on"}, True),
    Call("ADD after that DEL", "ADD", "d", "c4", {"spoofchk": "off"}),
    Call("DEL of that ADD", "DEL", "d", "c4", {"spoofchk": "off"}),
)


def standin_plugin(env: Mapping[str, str], stdin: bytes) -> tuple[int, str]:
    """The stand-in's CNI entry, run in this process as its wrapper would exec it (``--real-vfs``)."""
    saved = {key: os.environ.get(key) for key in env}
    os.environ.update(env)
    old_stdin, out = sys.stdin, io.StringIO()
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin))
    try:
        with contextlib.redirect_stdout(out):
            status = sriov_cni.run(["--real-vfs"])
    finally:
        sys.stdin = old_stdin
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
    return status, out.getvalue()


def _by_role(value: Any, roles: Mapping[str, str]) -> Any:
    """``value`` with every netns path replaced by ``<netns of role>``."""
    text = json.dumps(value)
    for role, path in roles.items():
        text = text.replace(path, f"<netns {role}>")
    return json.loads(text)


def run_sequence(plugin: sriovcni.Plugin, vf: sriovcni.Vf, data_dir: Path) -> list[dict[str, Any]]:
    """Run :data:`SEQUENCE` through ``plugin``; one observation per call (see the module docstring)."""
    shutil.rmtree(sriovcni.CACHE_DIR, ignore_errors=True)
    calls = sriovcni.Calls(plugin, data_dir, SUBNET)
    roles: dict[str, str] = {}
    observed = []
    try:
        for step in SEQUENCE:
            if step.role and step.role not in roles:
                roles[step.role] = calls.netns()
            if step.delete_netns_first:
                calls.remove_netns(roles[step.role])
            started = time.monotonic()
            if step.command == "VERSION":
                status, out = plugin({"CNI_COMMAND": "VERSION"}, b"{}")
                printed = json.loads(out)
            else:
                conf = calls.conf(vf.bdf if step.settings is not None else None, **(step.settings or {}))
                status, printed = calls(step.command, conf, netns=roles[step.role], container=step.container)
            took = time.monotonic() - started
            if step.delete_netns_first:
                realvfs.wait_until("the VF back in the host", lambda: bool(realvfs.raw_vf(vf.bdf).net))
            observed.append(_observe(step, status, printed, vf, calls, roles))
            observed[-1]["seconds"] = round(took, 2)
    finally:
        calls.cleanup()
        sriovcni.rename_back(vf.bdf, vf.name)
    return observed


def _observe(
    step: Call, status: int, printed: Any, vf: sriovcni.Vf, calls: sriovcni.Calls, roles: Mapping[str, str]
) -> dict[str, Any]:
    inside = {
        role: [link.name for link in sriovcni.inside(path)]
        for role, path in roles.items()
        if os.path.exists(path)
    }
    cache = sorted(
        str(p.relative_to(sriovcni.CACHE_DIR)) for p in sriovcni.CACHE_DIR.rglob("*") if p.is_file()
    )
    return {
        "step": step.what,
        "status": status,
        "printed": _by_role(printed, roles),
        "host netdev": realvfs.raw_vf(vf.bdf).net,
        "in netns": inside,
        "vf table": vf.table_line(),
        "cache files": cache,
        "allocation": _by_role(sriovcni.allocation(vf.bdf), roles),
        "host-local": calls.allocations(),
    }


@pytest.fixture
def vf(real_pfs: list[realvfs.RealPf]) -> sriovcni.Vf:
    sriovcni.require_binaries("sriov", "host-local")
    pf = real_pfs[1]
    first = realvfs.raw_vfs(pf)[0]
    (name,) = first.net or ("",)
    return sriovcni.Vf(pf, first, name)


def _differences(real: list[dict[str, Any]], standin: list[dict[str, Any]]) -> list[str]:
    out = []
    for want, got in zip(real, standin, strict=True):
        for key in want:
            if key != "seconds" and want[key] != got[key]:
                out.append(f"{want['step']}: {key}: sriov-cni {want[key]!r}, stand-in {got[key]!r}")
    return out


def test_the_stand_in_gives_the_outcomes_results_errors_cache_files_and_vf_states_of_sriov_cni(
    vf: sriovcni.Vf, tmp_path: Path
) -> None:
    real = run_sequence(sriovcni.real_plugin, vf, tmp_path / "real")
    standin = run_sequence(standin_plugin, vf, tmp_path / "standin")
    print("sriov-cni, step by step (seconds: sriov-cni exec'd, the stand-in in this process):")
    for step, other in zip(real, standin, strict=True):
        print(f"  {json.dumps(step)} stand-in {other['seconds']}s")
    differences = _differences(real, standin)
    assert not differences, "the stand-in differs from sriov-cni:\n" + "\n".join(differences)
