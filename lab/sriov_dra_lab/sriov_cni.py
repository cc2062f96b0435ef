"""LAB ONLY: the lab's ``sriov`` CNI plugin, a stand-in for upstream sriov-cni (it is not sriov-cni).

Upstream sriov-cni cannot be a pinned test binary here (the Go module proxy refuses the module and
Debian has no package), so this plugin keeps the parts of sriov-cni's contract the guard, Multus
and the tests depend on, and nothing more. It has two modes.

**Real-VF mode** (``--real-vfs``, the realvf tier's kernel VFs): the device move and IPAM are done
by the pinned upstream ``host-device`` reference plugin (found on ``CNI_PATH``, given
``pciBusID`` = the config's ``deviceID`` and the config's ``ipam``); only the VF settings are done
here, through the PF's netlink (:func:`sriov_dra_lab.fakes.net_edit.set_vf`): ``vlan``/``vlanQoS``,
``spoofchk``, ``trust``, ``min_tx_rate``/``max_tx_rate`` and ``link_state``. What matches
sriov-cni v2.10:

* errors are CNI code 999 with sriov-cni's texts: no ``deviceID`` ->
  ``SRIOV-CNI failed to load netconf: LoadConf(): VF pci addr is required``; a VF whose allocation
  record names a netns that still exists -> ``pci address <bdf> is already allocated``, checked
  before anything is read from or written to the VF (a record of a deleted netns is stale and
  dropped, as sriov-cni's ``IsAllocated`` does);
* cache files ``<state-dir>/<containerid>-<ifname>`` (this plugin's JSON record: the VF, its PF
  and index, its original netdev name and VF-table state, the settings applied) and
  ``<state-dir>/pci/<bdf>`` (the netns path), ``<state-dir>`` defaulting to ``/var/lib/cni/sriov``;
* ADD applies the VF settings before the move, and undoes them (and the records) when the move
  or IPAM fails; DEL without a cache record succeeds and does nothing; DEL resets exactly the
  settings ADD applied to the values the PF's VF table showed before ADD;
* DEL after the netns was deleted: the kernel has already given the VF back to the host under the
  Pod's interface name, and ``host-device`` refuses a missing netns, so this plugin runs IPAM DEL
  itself (same stdin ``host-device`` got) and renames the netdev back to its original name.

Not done (sriov-cni does them): MAC programming through the PF (igb refuses a VF MAC change once
the PF set one), DPDK/userspace-driver VFs, ``ipam`` results applied to anything but the one VF
netdev, the ``vf_lock`` file lock (the tier never runs two ADDs at once).

**Lab mode** (``--vf-map``, machines without SR-IOV hardware): a lab VF is a veth end:

* ADD requires ``deviceID`` (a PCI BDF); without it it fails with sriov-cni's own message
  ``LoadConf(): VF pci addr is required``. The BDF is mapped to a host interface through the lab
  VF map file (``--vf-map``, written by :func:`sriov_dra_lab.netns.write_vf_map`) where sriov-cni
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
Run as ``python -m sriov_dra_lab.sriov_cni --vf-map FILE --state-dir DIR`` from a wrapper in the
lab's CNI bin dir (:func:`sriov_dra_lab.cni.build_bin_dir`), or with ``--real-vfs [--state-dir DIR]
[--sysfs-root DIR]`` on real VFs.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from sriov_dra.host import atomic_file, netlink, sysfs
from sriov_dra_lab.fakes import net_edit

SUPPORTED_VERSIONS = ("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")


class PluginError(Exception):
    """A CNI error: ``code`` per the CNI spec (7 invalid config, 11 try again, 999 other)."""

    def __init__(self, code: int, msg: str, details: str = "") -> None:
        super().__init__(msg)
        self.code, self.msg, self.details = code, msg, details


def _find_plugin(plugin: str, what: str) -> str:
    for directory in os.environ.get("CNI_PATH", "").split(os.pathsep):
        path = os.path.join(directory, plugin)
        if directory and os.access(path, os.X_OK):
            return path
    raise PluginError(7, f"{what} plugin {plugin!r} not found on CNI_PATH")


def _ipam(conf: dict[str, Any], command: str, stdin: bytes) -> dict[str, Any] | None:
    ipam = conf.get("ipam")
    if not isinstance(ipam, dict) or not ipam.get("type"):
        return None
    plugin = str(ipam["type"])
    path = _find_plugin(plugin, "IPAM")
    env = dict(os.environ, CNI_COMMAND=command)
    proc = subprocess.run([path], input=stdin, capture_output=True, env=env, check=False, timeout=120)
    if proc.returncode != 0:
        raise PluginError(
            999, f"IPAM {plugin} {command} failed: {proc.stdout.decode()} {proc.stderr.decode()}"
        )
    out = proc.stdout.decode().strip()
    return json.loads(out) if out else {}


def _state_path(state_dir: Path, container_id: str, ifname: str, suffix: str = ".json") -> Path:
    return state_dir / f"{container_id}-{ifname}{suffix}"


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
    atomic_file.write_atomic(state, json.dumps(record).encode())
    marker.parent.mkdir(parents=True, exist_ok=True)
    atomic_file.write_atomic(marker, netns.encode())
    try:
        net_edit.move_link(host_ifname, target_netns=netns, new_name=ifname)
    except BaseException:
        atomic_file.remove_durable(state)
        atomic_file.remove_durable(marker)
        raise
    result: dict[str, Any] | None = None
    try:
        result = _ipam(conf, "ADD", stdin) or {}
        for ip in result.get("ips", []):
            net_edit.add_address(ifname, ip["address"], netns_path=netns)
        net_edit.set_up(ifname, netns_path=netns)
        for route in result.get("routes", []):
            net_edit.add_route(route["dst"], gateway=route.get("gw"), name=ifname, netns_path=netns)
        mac = next((link.mac for link in netlink.links(netns) if link.name == ifname), None)
    except BaseException:
        if result is not None:  # IPAM ADD succeeded: release before failing
            # The ADD's own error is the one to report; the runtime's DEL has no record left.
            with contextlib.suppress(PluginError):
                _ipam(conf, "DEL", stdin)
        net_edit.move_link(ifname, target_netns=None, new_name=host_ifname, netns_path=netns)
        atomic_file.remove_durable(state)
        atomic_file.remove_durable(marker)
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
    raw = atomic_file.read_optional(path)
    if raw is None:
        return  # nothing recorded for this attachment: nothing to undo (sriov-cni without its cache)
    record = json.loads(raw)
    _ipam(conf, "DEL", stdin)
    netns = record["netns"]
    if os.path.exists(netns) and ifname in netlink.link_names(netns):
        net_edit.move_link(ifname, target_netns=None, new_name=record["hostIfname"], netns_path=netns)
    atomic_file.remove_durable(_marker(state_dir, record["deviceID"]))
    atomic_file.remove_durable(path)


def _check(state_dir: Path, suffix: str = ".json") -> None:
    container, ifname = os.environ.get("CNI_CONTAINERID", ""), os.environ.get("CNI_IFNAME", "")
    raw = atomic_file.read_optional(_state_path(state_dir, container, ifname, suffix))
    if raw is None:
        raise PluginError(999, f"no lab VF attached for {container}/{ifname}")
    netns = json.loads(raw)["netns"]
    if ifname not in netlink.link_names(netns):
        raise PluginError(999, f"{ifname} is missing from {netns}")


# --- real-VF mode ------------------------------------------------------------------------------

DEFAULT_CNI_DIR = Path("/var/lib/cni/sriov")
"""sriov-cni's ``config.DefaultCNIDir``: its cache files and the ``pci/`` allocation records."""
LOAD_CONF = "SRIOV-CNI failed to load netconf: LoadConf(): "
NETDEV_RETURN_S = 30.0
"""How long DEL waits for the kernel to give back a VF whose netns was deleted (netns teardown is
asynchronous; under TCG it takes seconds)."""
_ON_OFF = {"on": True, "off": False}


def _vf_settings(conf: dict[str, Any]) -> dict[str, Any]:
    """The config's VF settings as :func:`net_edit.set_vf` keywords (only those given).

    Raises: PluginError 999 naming the key, the value and the accepted values (sriov-cni's
    ``LoadConf`` checks the same ranges).
    """
    out: dict[str, Any] = {}

    def bad(key: str, accepted: str) -> PluginError:
        return PluginError(999, f"{LOAD_CONF}{key} {conf[key]!r} is invalid: {accepted}")

    def number(key: str, top: int) -> int | None:
        value = conf.get(key)
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= top:
            raise bad(key, f"use a whole number 0-{top}")
        return value

    vlan, qos = number("vlan", 4094), number("vlanQoS", 7)
    if qos and not vlan:
        raise bad("vlanQoS", "vlan must be set and non-zero when vlanQoS is non-zero")
    if vlan is not None:
        out.update(vlan=vlan, qos=qos or 0)
    for key in ("spoofchk", "trust"):
        if key in conf:
            if conf[key] not in _ON_OFF:
                raise bad(key, 'use "on" or "off"')
            out[key] = _ON_OFF[conf[key]]
    if "link_state" in conf:
        if conf["link_state"] not in net_edit.VF_LINK_STATES:
            raise bad("link_state", 'use "auto", "enable" or "disable"')
        out["link_state"] = net_edit.VF_LINK_STATES[conf["link_state"]]
    rates = {key: number(key, 2**31 - 1) for key in ("min_tx_rate", "max_tx_rate")}
    if rates["min_tx_rate"] and rates["max_tx_rate"] and rates["min_tx_rate"] > rates["max_tx_rate"]:
        raise bad("min_tx_rate", "it must not be above max_tx_rate")
    if any(rate is not None for rate in rates.values()):
        out.update(min_tx_rate=rates["min_tx_rate"], max_tx_rate=rates["max_tx_rate"])
    return out


def _reset_of(settings: dict[str, Any], before: net_edit.VfState) -> dict[str, Any]:
    """The :func:`net_edit.set_vf` keywords that put back what ``settings`` changed."""
    out: dict[str, Any] = {}
    if "vlan" in settings:
        out.update(vlan=before.vlan, qos=before.qos)
    for key in ("spoofchk", "trust", "link_state"):
        if key in settings and getattr(before, key) is not None:
            out[key] = getattr(before, key)
    if "min_tx_rate" in settings:
        out.update(min_tx_rate=before.min_tx_rate or 0, max_tx_rate=before.max_tx_rate or 0)
    return out


def _host_device(conf: dict[str, Any], pci: str) -> dict[str, Any]:
    """The config ``host-device`` gets: this network's name and IPAM, the VF by ``pciBusID``."""
    out: dict[str, Any] = {
        "cniVersion": conf.get("cniVersion"),
        "name": conf.get("name"),
        "type": "host-device",
    }
    out["pciBusID"] = pci
    if isinstance(conf.get("ipam"), dict):
        out["ipam"] = conf["ipam"]
    return out


def _exec_host_device(command: str, stdin: bytes) -> dict[str, Any]:
    """Run ``host-device`` (on ``CNI_PATH``); its CNI error is passed on with its code and message."""
    path = _find_plugin("host-device", "the device-move")
    proc = subprocess.run(
        [path],
        input=stdin,
        capture_output=True,
        env=dict(os.environ, CNI_COMMAND=command),
        check=False,
        timeout=120,
    )
    out = proc.stdout.decode().strip()
    try:
        printed = json.loads(out) if out else {}
    except ValueError:
        printed = None
    if proc.returncode == 0 and isinstance(printed, dict):
        return printed
    try:
        code, msg = int(printed["code"]), str(printed["msg"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        code, msg = 999, f"{out} {proc.stderr.decode().strip()}".strip()
    raise PluginError(code, f"host-device {command}: {msg}", proc.stderr.decode().strip())


def _allocated_to(state_dir: Path, pci: str) -> str | None:
    """The netns a VF is allocated to, or None; a record of a deleted netns is dropped."""
    marker = _marker(state_dir, pci)
    raw = atomic_file.read_optional(marker)
    if raw is None:
        return None
    holder = raw.decode()
    if holder and os.path.exists(holder):
        return holder
    atomic_file.remove_durable(marker)
    return None


def _add_real(conf: dict[str, Any], state_dir: Path, reader: sysfs.Sysfs) -> dict[str, Any]:
    pci = conf.get("deviceID")
    if not isinstance(pci, str) or not pci:
        raise PluginError(999, f"{LOAD_CONF}VF pci addr is required")
    settings = _vf_settings(conf)
    if _allocated_to(state_dir, pci) is not None:
        raise PluginError(999, f"pci address {pci} is already allocated")
    pf_bdf = reader.physfn(pci)
    if pf_bdf is None:
        raise PluginError(
            999,
            f"{LOAD_CONF}failed to get VF information: {pci} has no physfn link under {reader.pci_device_dir(pci)}; "
            "deviceID must be the PCI address of an SR-IOV VF",
        )
    pf = reader.pf_netdev(pf_bdf)
    index = next((link.index for link in reader.virtfns(pf_bdf) if link.bdf == pci), None)
    netdevs = reader.netdevs(pci)
    if pf is None or index is None or len(netdevs) != 1:
        raise PluginError(
            999,
            f"{LOAD_CONF}failed to get VF information: VF {pci} of PF {pf_bdf} (netdev {pf}, VF index {index}) "
            f"has netdevs {netdevs} in this namespace; it needs exactly one (bind a netdevice VF driver)",
        )
    before = next(state for state in net_edit.vf_states(pf) if state.vf == index)
    reset = _reset_of(settings, before)
    netns, ifname, container = (
        os.environ["CNI_NETNS"],
        os.environ["CNI_IFNAME"],
        os.environ["CNI_CONTAINERID"],
    )
    record = {
        "deviceID": pci,
        "pf": pf,
        "vfIndex": index,
        "hostIfname": netdevs[0],
        "netns": netns,
        "ifname": ifname,
        "applied": settings,
        "reset": reset,
    }
    state = _state_path(state_dir, container, ifname, suffix="")
    state.parent.mkdir(parents=True, exist_ok=True)
    atomic_file.write_atomic(state, json.dumps(record).encode())
    marker = _marker(state_dir, pci)
    marker.parent.mkdir(parents=True, exist_ok=True)
    atomic_file.write_atomic(marker, netns.encode())
    try:
        net_edit.set_vf(pf, index, **settings)
        result = _exec_host_device("ADD", json.dumps(_host_device(conf, pci)).encode())
    except BaseException:
        with contextlib.suppress(netlink.NetlinkError):
            net_edit.set_vf(pf, index, **reset)
        atomic_file.remove_durable(state)
        atomic_file.remove_durable(marker)
        raise
    return result


def _del_real(conf: dict[str, Any], state_dir: Path, reader: sysfs.Sysfs) -> None:
    container, ifname = os.environ.get("CNI_CONTAINERID", ""), os.environ.get("CNI_IFNAME", "")
    path = _state_path(state_dir, container, ifname, suffix="")
    raw = atomic_file.read_optional(path)
    if raw is None:
        return  # sriov-cni's cmdDel without its cache: nothing to undo
    record = json.loads(raw)
    pci, device_conf = record["deviceID"], _host_device(conf, record["deviceID"])
    stdin = json.dumps(device_conf).encode()
    if os.path.exists(record["netns"]):
        _exec_host_device("DEL", stdin)
    else:
        _ipam(device_conf, "DEL", stdin)
        _rename_returned(reader, pci, record["hostIfname"])
    net_edit.set_vf(record["pf"], record["vfIndex"], **record["reset"])
    atomic_file.remove_durable(_marker(state_dir, pci))
    atomic_file.remove_durable(path)


def _rename_returned(reader: sysfs.Sysfs, pci: str, original: str) -> None:
    """Name the VF's netdev ``original`` again once the kernel gave it back from a deleted netns."""
    deadline = time.monotonic() + NETDEV_RETURN_S
    while not (names := reader.netdevs(pci)):
        if time.monotonic() > deadline:
            raise PluginError(
                11,
                f"VF {pci}: its netns is deleted but its netdev is not back in this namespace after "
                f"{NETDEV_RETURN_S:.0f}s; retry DEL",
            )
        time.sleep(0.1)
    if names != [original]:
        net_edit.move_link(names[0], target_netns=None, new_name=original)


def run(argv: Sequence[str] | None = None) -> int:
    """Run one CNI command (from ``CNI_COMMAND``) and return the exit status."""
    parser = argparse.ArgumentParser(prog="lab-sriov-cni")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--vf-map", type=Path, help="lab mode: the lab VF map (BDF -> veth end)")
    mode.add_argument("--real-vfs", action="store_true", help="real-VF mode: kernel VFs through host-device")
    parser.add_argument(
        "--state-dir", type=Path, help=f"cache directory (real-VF mode default {DEFAULT_CNI_DIR})"
    )
    parser.add_argument(
        "--sysfs-root", type=Path, default=Path("/"), help="real-VF mode: the root holding sys/"
    )
    args = parser.parse_args(argv)
    if args.state_dir is None and not args.real_vfs:
        parser.error("--state-dir is required with --vf-map")
    state_dir: Path = args.state_dir or DEFAULT_CNI_DIR
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
        if args.real_vfs and command in ("ADD", "DEL"):
            reader = sysfs.Sysfs(args.sysfs_root)
            if command == "ADD":
                print(json.dumps(_add_real(conf, state_dir, reader)))
            else:
                _del_real(conf, state_dir, reader)
        elif command == "ADD":
            vf_map = json.loads(args.vf_map.read_text())
            print(json.dumps(_add(conf, stdin, vf_map, state_dir)))
        elif command == "DEL":
            _del(conf, stdin, state_dir)
        elif command == "CHECK":
            _check(state_dir, "" if args.real_vfs else ".json")
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
