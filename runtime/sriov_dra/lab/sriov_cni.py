"""LAB ONLY: a tiny ``sriov`` CNI plugin that attaches a lab VF (a veth end) instead of a real VF.

It stands in for sriov-cni on machines without SR-IOV hardware, keeping the parts of sriov-cni's
contract the guard and Multus depend on, and nothing more:

* ADD requires ``deviceID`` (a PCI BDF); without it it fails with sriov-cni's own message
  ``LoadConf(): VF pci addr is required``. The BDF is mapped to a host interface through the lab
  VF map file (``--vf-map``, written by :func:`sriov_dra.lab.netns.write_vf_map`) where sriov-cni
  would read ``/sys/bus/pci/devices/<bdf>/net``.
* A VF held by another live sandbox is refused (``pci address ... is already allocated``).
* The interface is moved into ``CNI_NETNS`` and renamed to ``CNI_IFNAME``; IPAM is delegated to
  the real plugin named by ``ipam.type`` (found on ``CNI_PATH``, same stdin), its addresses and
  routes are applied and the link is set up. The result is the IPAM result plus the interface.
* DEL, like sriov-cni's, reads only its own record: with no record of an ADD it succeeds and does
  nothing, not even IPAM DEL (so a lost state dir leaks like a lost sriov-cni cache). With a
  record it runs IPAM DEL with the same stdin (so host-local and whereabouts release even when
  the sandbox is gone), moves the interface back to the host namespace under its lab name if it
  is still in the sandbox, and forgets the VF. An ADD that fails after its IPAM ADD runs IPAM DEL
  before failing, as sriov-cni's deferred cleanup does.
* VLAN, trust, spoof checking, rates and MAC programming of a PF are not emulated (veth has no
  PF); those keys are accepted and ignored.

State lives in ``--state-dir`` (one JSON file per container and interface, one marker per VF).
Run as ``python -m sriov_dra.lab.sriov_cni --vf-map FILE --state-dir DIR`` from a wrapper in the
lab's CNI bin dir (:func:`sriov_dra.lab.cni.build_bin_dir`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sriov_dra.host import atomicfile, netlink

SUPPORTED_VERSIONS = ("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")


class PluginError(Exception):
    """A CNI error: ``code`` per the CNI spec (7 invalid config, 11 try again, 999 other)."""

    def __init__(self, code: int, msg: str, details: str = "") -> None:
        super().__init__(msg)
        self.code, self.msg, self.details = code, msg, details


def _ipam(conf: dict[str, Any], command: str, stdin: bytes) -> dict[str, Any] | None:
    ipam = conf.get("ipam")
    if not isinstance(ipam, dict) or not ipam.get("type"):
        return None
    plugin = str(ipam["type"])
    for directory in os.environ.get("CNI_PATH", "").split(os.pathsep):
        path = os.path.join(directory, plugin)
        if directory and os.access(path, os.X_OK):
            break
    else:
        raise PluginError(7, f"IPAM plugin {plugin!r} not found on CNI_PATH")
    env = dict(os.environ, CNI_COMMAND=command)
    proc = subprocess.run([path], input=stdin, capture_output=True, env=env, check=False, timeout=120)
    if proc.returncode != 0:
        raise PluginError(
            999, f"IPAM {plugin} {command} failed: {proc.stdout.decode()} {proc.stderr.decode()}"
        )
    out = proc.stdout.decode().strip()
    return json.loads(out) if out else {}


def _state_path(state_dir: Path, container_id: str, ifname: str) -> Path:
    return state_dir / f"{container_id}-{ifname}.json"


def _marker(state_dir: Path, pci: str) -> Path:
    return state_dir / "pci" / pci


def _add(conf: dict[str, Any], stdin: bytes, vf_map: dict[str, str], state_dir: Path) -> dict[str, Any]:
    pci = conf.get("deviceID")
    if not isinstance(pci, str) or not pci:
        raise PluginError(7, "SRIOV-CNI failed to load netconf: LoadConf(): VF pci addr is required")
    host_ifname = vf_map.get(pci)
    if host_ifname is None:
        raise PluginError(7, f"lab VF {pci} is not in the lab VF map (known: {sorted(vf_map)})")
    netns, ifname, container = (
        os.environ["CNI_NETNS"],
        os.environ["CNI_IFNAME"],
        os.environ["CNI_CONTAINERID"],
    )
    marker = _marker(state_dir, pci)
    holder = marker.read_text() if marker.exists() else ""
    if holder and holder != netns and os.path.exists(holder):
        raise PluginError(999, f"pci address {pci} is already allocated to {holder}")
    # Record the intent first, so that a DEL after any later failure knows what to undo.
    state = _state_path(state_dir, container, ifname)
    state.parent.mkdir(parents=True, exist_ok=True)
    record = {"deviceID": pci, "hostIfname": host_ifname, "netns": netns, "ifname": ifname}
    atomicfile.write_atomic(state, json.dumps(record).encode())
    marker.parent.mkdir(parents=True, exist_ok=True)
    atomicfile.write_atomic(marker, netns.encode())
    try:
        netlink.move_link(host_ifname, target_netns=netns, new_name=ifname)
    except BaseException:
        atomicfile.remove_durable(state)
        atomicfile.remove_durable(marker)
        raise
    result: dict[str, Any] | None = None
    try:
        result = _ipam(conf, "ADD", stdin) or {}
        for ip in result.get("ips", []):
            netlink.add_address(ifname, ip["address"], netns_path=netns)
        netlink.set_up(ifname, netns_path=netns)
        for route in result.get("routes", []):
            netlink.add_route(route["dst"], gateway=route.get("gw"), name=ifname, netns_path=netns)
        mac = next((link.mac for link in netlink.links(netns) if link.name == ifname), None)
    except BaseException:
        if result is not None:  # IPAM ADD succeeded: release before failing
            # The ADD's own error is the one to report; the runtime's DEL has no record left.
            with contextlib.suppress(PluginError):
                _ipam(conf, "DEL", stdin)
        netlink.move_link(ifname, target_netns=None, new_name=host_ifname, netns_path=netns)
        atomicfile.remove_durable(state)
        atomicfile.remove_durable(marker)
        raise
    out: dict[str, Any] = {"cniVersion": conf.get("cniVersion")}
    out["interfaces"] = [{"name": ifname, "mac": mac, "sandbox": netns}]
    out["ips"] = [dict(ip, interface=0) for ip in result.get("ips", [])]
    for key in ("routes", "dns"):
        if key in result:
            out[key] = result[key]
    return out


def _del(conf: dict[str, Any], stdin: bytes, state_dir: Path) -> None:
    container, ifname = os.environ.get("CNI_CONTAINERID", ""), os.environ.get("CNI_IFNAME", "")
    path = _state_path(state_dir, container, ifname)
    raw = atomicfile.read_optional(path)
    if raw is None:
        return  # nothing recorded for this attachment: nothing to undo (sriov-cni without its cache)
    record = json.loads(raw)
    _ipam(conf, "DEL", stdin)
    netns = record["netns"]
    if os.path.exists(netns) and ifname in netlink.link_names(netns):
        netlink.move_link(ifname, target_netns=None, new_name=record["hostIfname"], netns_path=netns)
    atomicfile.remove_durable(_marker(state_dir, record["deviceID"]))
    atomicfile.remove_durable(path)


def _check(state_dir: Path) -> None:
    container, ifname = os.environ.get("CNI_CONTAINERID", ""), os.environ.get("CNI_IFNAME", "")
    raw = atomicfile.read_optional(_state_path(state_dir, container, ifname))
    if raw is None:
        raise PluginError(999, f"no lab VF attached for {container}/{ifname}")
    netns = json.loads(raw)["netns"]
    if ifname not in netlink.link_names(netns):
        raise PluginError(999, f"{ifname} is missing from {netns}")


def run(argv: Sequence[str] | None = None) -> int:
    """Run one CNI command (from ``CNI_COMMAND``) and return the exit status."""
    parser = argparse.ArgumentParser(prog="lab-sriov-cni")
    parser.add_argument("--vf-map", type=Path, required=True)
    parser.add_argument("--state-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    command = os.environ.get("CNI_COMMAND", "")
    stdin = sys.stdin.buffer.read()
    version = "1.0.0"
    try:
        if command == "VERSION":
            print(
                json.dumps(
                    {"cniVersion": SUPPORTED_VERSIONS[-1], "supportedVersions": list(SUPPORTED_VERSIONS)}
                )
            )
            return 0
        conf = json.loads(stdin)
        version = str(conf.get("cniVersion") or version)
        if command == "ADD":
            vf_map = json.loads(args.vf_map.read_text())
            print(json.dumps(_add(conf, stdin, vf_map, args.state_dir)))
        elif command == "DEL":
            _del(conf, stdin, args.state_dir)
        elif command == "CHECK":
            _check(args.state_dir)
        elif command not in ("GC", "STATUS"):
            raise PluginError(4, f"unknown CNI_COMMAND {command!r}")
        return 0
    except PluginError as exc:
        error = {"cniVersion": version, "code": exc.code, "msg": exc.msg, "details": exc.details}
    except (netlink.NetlinkError, OSError, ValueError, KeyError) as exc:
        error = {"cniVersion": version, "code": 999, "msg": f"lab sriov {command}: {exc}", "details": ""}
    print(json.dumps(error))
    return 1


if __name__ == "__main__":
    sys.exit(run())
