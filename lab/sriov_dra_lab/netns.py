"""Lab network namespaces and lab VFs: a Pod sandbox per test or lab Pod, and veth pairs standing in for VFs.

A *sandbox* is a named network namespace (``/var/run/netns/<name>``), what the container runtime
creates before calling CNI ADD and removes after DEL. A *lab VF* is one end of a veth pair in the
host namespace, named after its fake PCI address; the lab ``sriov`` plugin
(:mod:`sriov_dra_lab.sriov_cni`) moves it into a sandbox as the real sriov-cni moves a VF netdev.
The peer end stays in the host namespace. Unlike a real VF, a veth end inside a namespace that is
destroyed is destroyed with it (and so is its peer): tear sandboxes down with CNI DEL first.

Everything goes through :mod:`sriov_dra_lab.fakes.net_edit` (over :mod:`sriov_dra.host.netlink`). Names carry a per-run random suffix so that
parallel runs and leftovers never collide; removal is by the exact names this module created.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from sriov_dra.host import atomic_file
from sriov_dra_lab.fakes import net_edit


def unique_name(prefix: str) -> str:
    """``<prefix>-<8 hex>``: a name no other run uses."""
    return f"{prefix}-{secrets.token_hex(4)}"


@contextlib.contextmanager
def sandbox(prefix: str = "sdra") -> Iterator[str]:
    """Create a fresh named network namespace, yield its path, remove it afterwards.

    Raises: ``netlink.NetlinkError`` when it cannot be created.
    """
    name = unique_name(prefix)
    path = net_edit.create_netns(name)
    try:
        yield path
    finally:
        net_edit.remove_netns(name)


def remove_sandbox(path: str) -> None:
    """Remove the named namespace at ``path`` (``/var/run/netns/<name>``); absent is fine."""
    net_edit.remove_netns(Path(path).name)


@dataclass(frozen=True)
class LabVf:
    """One lab VF: a fake PCI address and the host-side veth end that stands in for its netdev.

    Shapes: ``pci`` a BDF like ``0000:03:00.1``; ``ifname`` and ``peer`` at most 15 bytes.
    """

    pci: str
    ifname: str
    peer: str


def create_vfs(pcis: Sequence[str], *, prefix: str = "lvf") -> list[LabVf]:
    """Create one veth pair per PCI address in the host namespace and return them.

    On failure every pair created so far is deleted. Raises: ``netlink.NetlinkError``.
    """
    tag = secrets.token_hex(3)
    made: list[LabVf] = []
    try:
        for index, pci in enumerate(pcis):
            vf = LabVf(pci=pci, ifname=f"{prefix}{tag}{index}"[:15], peer=f"{prefix}{tag}p{index}"[:15])
            net_edit.create_veth_pair(vf.ifname, vf.peer)
            made.append(vf)
    except BaseException:
        delete_vfs(made)
        raise
    return made


def delete_vfs(vfs: Sequence[LabVf]) -> None:
    """Delete the lab VFs' veth pairs wherever their host end still is (absent is fine)."""
    for vf in vfs:
        net_edit.delete_link(vf.ifname)
        net_edit.delete_link(vf.peer)


def write_vf_map(path: Path, vfs: Sequence[LabVf]) -> Path:
    """Write the lab ``sriov`` plugin's map ``{"<pci>": "<host ifname>"}`` (atomic). Returns ``path``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_file.write_atomic(path, json.dumps({vf.pci: vf.ifname for vf in vfs}, indent=2).encode())
    return path
