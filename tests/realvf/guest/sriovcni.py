"""CNI calls of an SR-IOV CNI plugin on the guest's real VFs, for the realvf guest tests.

:class:`Calls` runs ADD/DEL as a runtime does (CNI environment, config on stdin, result or error
JSON on stdout) through a :data:`Plugin` runner: :func:`real_plugin` execs the pinned sriov-cni
binary of the run image; the stand-in comparison passes its own runner. sriov-cni keeps its cache
in :data:`CACHE_DIR` (``config.DefaultCNIDir``, fixed at build time): ``<container>-<ifname>``
(its NetConf), ``pci/<bdf>`` (the netns the VF is allocated to) and ``pci/vf_lock/<bdf>.lock``.
Imported only inside the guest.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.realvf.guest import realvfs

from sriov_dra.host import netlink
from sriov_dra_lab.fakes import net_edit

CNI_PATH = realvfs.REPO / ".realvf-cni"
"""The run image's pinned CNI binaries (tests/realvf/vm.py ``GUEST_CNI_DIR``)."""
CACHE_DIR = Path("/var/lib/cni/sriov")
IFNAME = "net1"

Plugin = Callable[[Mapping[str, str], bytes], tuple[int, str]]
"""One CNI exec: (the CNI environment variables, stdin) -> (exit status, stdout)."""


def require_binaries(*names: str) -> None:
    """Skip (failing where the tier is required) when a pinned binary is not in the run image."""
    missing = [name for name in names if not os.access(CNI_PATH / name, os.X_OK)]
    if missing:
        pytest.skip(f"{missing} not in the run image (build the pinned binaries: make setup)")


def real_plugin(env: Mapping[str, str], stdin: bytes) -> tuple[int, str]:
    """Exec the pinned sriov-cni binary."""
    proc = subprocess.run(
        [str(CNI_PATH / "sriov")],
        input=stdin,
        capture_output=True,
        env={**os.environ, **env},
        check=False,
        timeout=120,
    )
    return proc.returncode, proc.stdout.decode()


def cache_file(container: str, ifname: str = IFNAME) -> Path:
    return CACHE_DIR / f"{container}-{ifname}"


def allocation(bdf: str) -> str | None:
    """The netns path sriov-cni's ``pci/<bdf>`` record names, or None without a record."""
    path = CACHE_DIR / "pci" / bdf
    return path.read_text() if path.exists() else None


def lock_file(bdf: str) -> Path:
    return CACHE_DIR / "pci" / "vf_lock" / f"{bdf}.lock"


def inside(netns: str) -> list[netlink.LinkInfo]:
    """The links of ``netns`` other than ``lo``."""
    return [link for link in netlink.links(netns) if link.name != "lo"]


def rename_back(bdf: str, name: str) -> None:
    """Give the VF's netdev its original ``name`` again once it is back in the host namespace
    (what sriov-cni does not do after a DEL whose netns was already deleted)."""
    realvfs.wait_until(f"{bdf}'s netdev in the host namespace", lambda: bool(realvfs.raw_vf(bdf).net))
    (current,) = realvfs.raw_vf(bdf).net or ("",)
    if current != name:
        net_edit.move_link(current, target_netns=None, new_name=name)


@dataclass(frozen=True)
class Vf:
    """A real VF under test: its PF, its raw sysfs facts and its netdev name before the test."""

    pf: realvfs.RealPf
    real: realvfs.RawVf
    name: str

    @property
    def bdf(self) -> str:
        return self.real.bdf

    def table_line(self) -> str:
        return realvfs.vf_table_line(self.pf.ifname, self.real.index)

    def assert_reset(self, before: str) -> None:
        """The VF's line of the PF's VF table is ``before`` again (VLAN, spoofchk, trust, MAC)."""
        assert self.table_line() == before, "DEL reset the VF's settings in the PF's VF table"


class Calls:
    """One test's CNI calls through ``plugin``, its network namespaces (removed afterwards) and its
    host-local data dir."""

    def __init__(self, plugin: Plugin, data_dir: Path, subnet: str) -> None:
        self.plugin, self.data_dir, self.subnet = plugin, data_dir, subnet
        self.netnses: list[str] = []

    def netns(self) -> str:
        name = f"pod-{uuid.uuid4().hex[:8]}"
        self.netnses.append(name)
        return net_edit.create_netns(name)

    def remove_netns(self, path: str) -> None:
        name = os.path.basename(path)
        self.netnses.remove(name)
        net_edit.remove_netns(name)

    def cleanup(self) -> None:
        for name in self.netnses:
            if (netlink.NETNS_RUN_DIR / name).exists():
                net_edit.remove_netns(name)

    def conf(self, bdf: str | None, **vf_settings: object) -> dict[str, Any]:
        """A network config of type ``sriov`` for ``bdf`` (``deviceID``) with host-local IPAM."""
        ranges = [[{"subnet": self.subnet}]]
        conf: dict[str, Any] = {"cniVersion": "1.0.0", "name": "rail-a", "type": "sriov", **vf_settings}
        if bdf is not None:
            conf["deviceID"] = bdf
        conf["ipam"] = {"type": "host-local", "dataDir": str(self.data_dir), "ranges": ranges}
        return conf

    def __call__(
        self, command: str, conf: dict[str, Any], *, netns: str, container: str, ifname: str = IFNAME
    ) -> tuple[int, dict[str, Any]]:
        """One CNI call: (exit status, the JSON it printed, or {})."""
        env = {
            "CNI_COMMAND": command,
            "CNI_CONTAINERID": container,
            "CNI_NETNS": netns,
            "CNI_IFNAME": ifname,
            "CNI_PATH": str(CNI_PATH),
        }
        status, out = self.plugin(env, json.dumps(conf).encode())
        return status, json.loads(out) if out.strip() else {}

    def allocations(self) -> list[str]:
        """host-local's allocated addresses of the network (one file per address)."""
        network = self.data_dir / "rail-a"
        if not network.is_dir():
            return []
        return sorted(p.name for p in network.iterdir() if re.fullmatch(r"[0-9.]+", p.name))
