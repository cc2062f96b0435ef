"""LAB ONLY: the lab's ``sriov`` CNI plugin, a stand-in for sriov-cni (it is not sriov-cni).

The real sriov-cni (pinned in tools/versions.env) cannot drive the lab's VFs: a lab VF is one end
of a veth pair with no PCI function behind it, and sriov-cni finds a VF's netdev and PF through
``/sys/bus/pci/devices/<deviceID>``. This plugin keeps sriov-cni v2.10.0's contract for the lab,
and the realvf tier checks it against the real plugin on real VFs
(tests/realvf/guest/test_sriov_cni_standin.py runs one ADD/DEL/refusal sequence through both);
the differences that remain are listed in docs/realvf.md. It has two ways to find a VF:

* ``--vf-map FILE`` (the lab): the ``deviceID`` is looked up in the lab VF map (BDF -> veth end,
  written by :func:`sriov_dra_lab.netns.write_vf_map`); a veth has no PF, so the VF settings
  (``vlan``, ``spoofchk``, ...) are checked as sriov-cni checks them and then ignored;
* ``--real-vfs [--sysfs-root DIR]`` (the comparison on real VFs): as sriov-cni, through sysfs
  (``physfn``, ``virtfn<N>``, ``net/``); the settings are programmed through the PF's netlink
  (:func:`sriov_dra_lab.fakes.net_edit.set_vf`) and put back on DEL.

What it shares with sriov-cni v2.10.0 (``cnicommands``, ``config.LoadConf``, ``sriov``):

* errors are CNI code 999 with sriov-cni's texts, in its order: no ``deviceID`` ->
  ``SRIOV-CNI failed to load netconf: LoadConf(): VF pci addr is required``; a VF whose allocation
  record ``pci/<bdf>`` names a netns that still exists -> ``SRIOV-CNI failed to load netconf: pci
  address <bdf> is already allocated`` before anything is read from or written to the VF (a record
  of a deleted netns is stale and dropped); then the VLAN and link-state rules of ``LoadConf``;
* ADD programs the settings, moves the netdev into ``CNI_NETNS`` as ``CNI_IFNAME``, runs the IPAM
  plugin named by ``ipam.type`` (``CNI_PATH``, same stdin) and applies its addresses and routes,
  then writes its cache ``<state-dir>/<containerid>-<ifname>`` and the allocation record; a
  failure on the way undoes what was done (IPAM DEL, the netdev back, the settings reset). The
  result has sriov-cni's shape: the interface's ``name``, ``mac``, ``mtu`` and ``sandbox``, the IPAM
  addresses on interface 0, its routes and ``dns`` when not empty; an error is ``code`` and ``msg``;
* DEL reads only its own cache: without it, it succeeds and does nothing, not even IPAM DEL. With
  it: IPAM DEL (same stdin), the settings ADD changed put back to their values before ADD, then,
  if the netns still exists, the netdev back into the host under the name it had before ADD and
  the allocation record removed. If the netns was deleted first, that is all: the kernel has given
  a real VF back under the Pod's interface name, which stays, and so does the (now stale)
  allocation record; a veth end is destroyed with its netns;
* each ADD and DEL holds ``pci/vf_lock/<bdf>.lock`` (``flock``), which stays; CHECK succeeds.

Its cache holds its own small JSON record, not sriov-cni's NetConf: nothing in the product reads
either. Not done: MAC programming (``mac``), ``vlanProto`` 802.1ad, MTU restore, DPDK VFs.
State lives in ``--state-dir`` (sriov-cni's ``/var/lib/cni/sriov`` by default). Run from a wrapper
in the lab's CNI bin dir (:func:`sriov_dra_lab.cni.build_bin_dir`) as ``python -m
sriov_dra_lab.sriov_cni --vf-map FILE --state-dir DIR``.
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from sriov_dra.host import atomic_file, netlink, sysfs
from sriov_dra_lab.fakes import net_edit

SUPPORTED_VERSIONS = ("0.1.0", "0.2.0", "0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")
"""libcni's ``version.All``, what sriov-cni answers to VERSION."""
DEFAULT_CNI_DIR = Path("/var/lib/cni/sriov")
"""sriov-cni's ``config.DefaultCNIDir``: its cache files and the ``pci/`` allocation records."""
LOAD_NETCONF = "SRIOV-CNI failed to load netconf: "
LOAD_CONF = LOAD_NETCONF + "LoadConf(): "
_ON = "on"


class PluginError(Exception):
    """A CNI error: ``code`` per the CNI spec (999 for every sriov-cni error)."""

    def __init__(self, code: int, msg: str, details: str = "") -> None:
        super().__init__(msg)
        self.code, self.msg, self.details = code, msg, details


@dataclass(frozen=True)
class Pf:
    """The PF netdev and VF index of a real VF (None for a lab VF, which has no PF)."""

    ifname: str
    index: int


class Vfs(Protocol):
    """How the plugin finds a VF by ``deviceID``: its PF, then (after the allocation check) its netdev."""

    def pf(self, pci: str) -> Pf | None:
        """Raises: PluginError when ``pci`` is not a VF this plugin can drive."""
        ...

    def netdev(self, pci: str) -> str:
        """The VF's netdev name in the host namespace. Raises: PluginError when it has none."""
        ...


@dataclass(frozen=True)
class LabVfs:
    """Lab VFs: veth ends named by the lab VF map."""

    vf_map: dict[str, str]

    def pf(self, pci: str) -> Pf | None:
        if pci not in self.vf_map:
            raise PluginError(
                999,
                f"{LOAD_CONF}failed to get VF information: lab VF {pci} is not in the lab VF map {sorted(self.vf_map)}",
            )
        return None

    def netdev(self, pci: str) -> str:
        return self.vf_map[pci]


@dataclass(frozen=True)
class RealVfs:
    """Kernel VFs, found through sysfs as sriov-cni finds them."""

    reader: sysfs.Sysfs

    def pf(self, pci: str) -> Pf | None:
        pf_bdf = self.reader.physfn(pci)
        pf = self.reader.pf_netdev(pf_bdf) if pf_bdf is not None else None
        index = (
            next((link.index for link in self.reader.virtfns(pf_bdf) if link.bdf == pci), None)
            if pf_bdf
            else None
        )
        if pf is None or index is None:
            raise PluginError(
                999,
                f"{LOAD_CONF}failed to get VF information: {pci} (PF {pf_bdf}, netdev {pf}, VF index {index}) is not "
                "an SR-IOV VF of a PF with a netdev",
            )
        return Pf(pf, index)

    def netdev(self, pci: str) -> str:
        netdevs = self.reader.netdevs(pci)
        if len(netdevs) != 1:
            raise PluginError(999, f"{LOAD_CONF}the VF {pci} does not have a interface name or a dpdk driver")
        return netdevs[0]


def _int(conf: dict[str, Any], key: str) -> int | None:
    value = conf.get(key)
    if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
        raise PluginError(999, f"{LOAD_NETCONF}{key} {value!r} is not an integer")
    return value


def _vf_settings(conf: dict[str, Any]) -> dict[str, Any]:
    """The config's VF settings as :func:`net_edit.set_vf` keywords (only those given), after
    ``LoadConf``'s checks with its texts. ``spoofchk``/``trust``: ``"on"`` is on, anything else off."""
    out: dict[str, Any] = {}
    vlan, qos, proto = _int(conf, "vlan"), _int(conf, "vlanQoS"), conf.get("vlanProto")
    if vlan is None:
        if qos is not None:
            raise PluginError(
                999, f"{LOAD_CONF}vlan id must be configured to set vlan QoS to a non-nil value"
            )
        if proto is not None:
            raise PluginError(
                999, f"{LOAD_CONF}vlan id must be configured to set vlan proto to a non-nil value"
            )
    else:
        if not 0 <= vlan <= 4094:
            raise PluginError(999, f"{LOAD_CONF}vlan id {vlan} invalid: value must be in the range 0-4094")
        qos = qos or 0
        if not 0 <= qos <= 7:
            raise PluginError(999, f"{LOAD_CONF}vlan QoS PCP {qos} invalid: value must be in the range 0-7")
        if qos != 0 and vlan == 0:
            raise PluginError(
                999, f"{LOAD_CONF}non-zero vlan id must be configured to set vlan QoS to a non-zero value"
            )
        proto = str(proto or "802.1q").lower()
        if proto not in ("802.1q", "802.1ad"):
            raise PluginError(
                999, f"{LOAD_CONF}vlan Proto {proto} invalid: value must be '802.1Q' or '802.1ad'"
            )
        if proto == "802.1ad" and vlan == 0:
            raise PluginError(
                999, f"{LOAD_CONF}non-zero vlan id must be configured to set vlan proto 802.1ad"
            )
        out.update(vlan=vlan, qos=qos)
    link_state = conf.get("link_state") or ""
    if link_state and link_state not in net_edit.VF_LINK_STATES:
        raise PluginError(999, f"{LOAD_CONF}invalid link_state value: {link_state}")
    rates = {key: _int(conf, key) for key in ("min_tx_rate", "max_tx_rate")}
    if any(rate is not None for rate in rates.values()):
        out.update(rates)
    for key in ("spoofchk", "trust"):
        if conf.get(key):
            out[key] = conf[key] == _ON
    if link_state:
        out["link_state"] = net_edit.VF_LINK_STATES[link_state]
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


def _find_plugin(plugin: str) -> str:
    for directory in os.environ.get("CNI_PATH", "").split(os.pathsep):
        path = os.path.join(directory, plugin)
        if directory and os.access(path, os.X_OK):
            return path
    raise PluginError(999, f'failed to find plugin "{plugin}" in path {os.environ.get("CNI_PATH", "")}')


def _ipam(conf: dict[str, Any], command: str, stdin: bytes) -> dict[str, Any] | None:
    """Run the IPAM plugin of ``conf`` (None without one); its CNI error is passed on."""
    ipam = conf.get("ipam")
    if not isinstance(ipam, dict) or not ipam.get("type"):
        return None
    env = dict(os.environ, CNI_COMMAND=command)
    proc = subprocess.run(
        [_find_plugin(str(ipam["type"]))], input=stdin, capture_output=True, env=env, check=False, timeout=120
    )
    out = proc.stdout.decode().strip()
    if proc.returncode != 0:
        try:
            printed = json.loads(out)
            raise PluginError(int(printed["code"]), str(printed["msg"]), str(printed.get("details", "")))
        except (ValueError, KeyError, TypeError):
            raise PluginError(999, f"{out} {proc.stderr.decode().strip()}".strip()) from None
    return json.loads(out) if out else {}


@contextlib.contextmanager
def _vf_lock(state_dir: Path, pci: str) -> Iterator[None]:
    """sriov-cni's per-VF ``flock`` (its lock file stays)."""
    path = state_dir / "pci" / "vf_lock" / f"{pci}.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_CREAT | os.O_RDONLY | os.O_CLOEXEC, 0o600)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def _cache(state_dir: Path) -> Path:
    return state_dir / f"{os.environ.get('CNI_CONTAINERID', '')}-{os.environ.get('CNI_IFNAME', '')}"


def _allocation(state_dir: Path, pci: str) -> Path:
    return state_dir / "pci" / pci


def _allocated(state_dir: Path, pci: str) -> bool:
    """True when the record names a netns that exists; a record of a deleted netns is dropped."""
    raw = atomic_file.read_optional(_allocation(state_dir, pci))
    if raw is None:
        return False
    if os.path.exists(raw.decode()):
        return True
    atomic_file.remove_durable(_allocation(state_dir, pci))
    return False


def _mtu(ifname: str) -> int | None:
    with contextlib.suppress(OSError, ValueError):
        return int(Path(f"/sys/class/net/{ifname}/mtu").read_text())
    return None


def _add(conf: dict[str, Any], stdin: bytes, vfs: Vfs, state_dir: Path) -> dict[str, Any]:
    pci = conf.get("deviceID")
    if not isinstance(pci, str) or not pci:
        raise PluginError(999, f"{LOAD_CONF}VF pci addr is required")
    pf = vfs.pf(pci)
    with _vf_lock(state_dir, pci):
        if _allocated(state_dir, pci):
            raise PluginError(999, f"{LOAD_NETCONF}pci address {pci} is already allocated")
        host_ifname = vfs.netdev(pci)
        settings = _vf_settings(conf)
        netns, ifname = os.environ["CNI_NETNS"], os.environ["CNI_IFNAME"]
        if not os.path.exists(netns):
            raise PluginError(999, f"failed to open netns {netns!r}: no such file or directory")
        reset: dict[str, Any] = {}
        if pf is not None:
            reset = _reset_of(settings, next(s for s in net_edit.vf_states(pf.ifname) if s.vf == pf.index))
        mtu = _mtu(host_ifname)
        moved, result = False, None
        try:
            if pf is not None:
                net_edit.set_vf(pf.ifname, pf.index, **settings)
            net_edit.move_link(host_ifname, target_netns=netns, new_name=ifname)
            moved = True
            net_edit.set_up(ifname, netns_path=netns)
            result = _ipam(conf, "ADD", stdin) or {}
            for ip in result.get("ips", []):
                net_edit.add_address(ifname, ip["address"], netns_path=netns)
            for route in result.get("routes", []):
                net_edit.add_route(route["dst"], gateway=route.get("gw"), name=ifname, netns_path=netns)
            mac = next((link.mac for link in netlink.links(netns) if link.name == ifname), None)
            record: dict[str, Any] = {
                "deviceID": pci,
                "hostIfname": host_ifname,
                "netns": netns,
                "ifname": ifname,
                "reset": reset,
            }
            if pf is not None:
                record.update(pf=pf.ifname, vfIndex=pf.index)
            atomic_file.write_atomic(_cache(state_dir), json.dumps(record).encode())
            atomic_file.write_atomic(_allocation(state_dir, pci), netns.encode())
        except BaseException:
            if result is not None:  # IPAM ADD succeeded: release before failing
                with contextlib.suppress(PluginError):
                    _ipam(conf, "DEL", stdin)
            if moved:
                with contextlib.suppress(netlink.NetlinkError):
                    net_edit.move_link(ifname, target_netns=None, new_name=host_ifname, netns_path=netns)
            if pf is not None:
                with contextlib.suppress(netlink.NetlinkError):
                    net_edit.set_vf(pf.ifname, pf.index, **reset)
            raise
    interface: dict[str, Any] = {"name": ifname, "mac": mac}
    if mtu is not None:
        interface["mtu"] = mtu
    out: dict[str, Any] = {
        "cniVersion": conf.get("cniVersion"),
        "interfaces": [{**interface, "sandbox": netns}],
    }
    out["ips"] = [dict(ip, interface=0) for ip in result.get("ips", [])]
    for key in ("routes", "dns"):
        if result.get(key):
            out[key] = result[key]
    return out


def _del(conf: dict[str, Any], stdin: bytes, state_dir: Path) -> None:
    raw = atomic_file.read_optional(_cache(state_dir))
    if raw is None:
        return  # sriov-cni's cmdDel without its cache: nothing to undo
    record = json.loads(raw)
    pci, netns, ifname = record["deviceID"], record["netns"], record["ifname"]
    with _vf_lock(state_dir, pci):
        _ipam(conf, "DEL", stdin)
        if record.get("pf") is not None:
            net_edit.set_vf(record["pf"], record["vfIndex"], **record["reset"])
        if os.path.exists(netns):
            if ifname in netlink.link_names(netns):
                net_edit.move_link(ifname, target_netns=None, new_name=record["hostIfname"], netns_path=netns)
            atomic_file.remove_durable(_allocation(state_dir, pci))
        atomic_file.remove_durable(_cache(state_dir))


def run(argv: Sequence[str] | None = None) -> int:
    """Run one CNI command (from ``CNI_COMMAND``) and return the exit status."""
    parser = argparse.ArgumentParser(prog="lab-sriov-cni")
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--vf-map", type=Path, help="the lab VF map (BDF -> veth end)")
    mode.add_argument("--real-vfs", action="store_true", help="find VFs through sysfs and program their PF")
    parser.add_argument(
        "--state-dir", type=Path, default=DEFAULT_CNI_DIR, help=f"cache dir ({DEFAULT_CNI_DIR})"
    )
    parser.add_argument(
        "--sysfs-root", type=Path, default=Path("/"), help="with --real-vfs: the root holding sys/"
    )
    args = parser.parse_args(argv)
    command = os.environ.get("CNI_COMMAND", "")
    stdin = sys.stdin.buffer.read()
    try:
        if command == "VERSION":
            print(
                json.dumps(
                    {"cniVersion": SUPPORTED_VERSIONS[-1], "supportedVersions": list(SUPPORTED_VERSIONS)}
                )
            )
            return 0
        conf = json.loads(stdin)
        if command == "ADD":
            vfs: Vfs = (
                RealVfs(sysfs.Sysfs(args.sysfs_root))
                if args.real_vfs
                else LabVfs(json.loads(args.vf_map.read_text()))
            )
            print(json.dumps(_add(conf, stdin, vfs, args.state_dir)))
        elif command == "DEL":
            _del(conf, stdin, args.state_dir)
        elif command not in ("CHECK", "GC", "STATUS"):
            raise PluginError(4, f"unknown CNI_COMMAND {command!r}")
        return 0
    except PluginError as exc:
        error: dict[str, Any] = {"code": exc.code, "msg": exc.msg}
        if exc.details:
            error["details"] = exc.details
    except (netlink.NetlinkError, OSError, ValueError, KeyError) as exc:
        error = {"code": 999, "msg": f"lab sriov {command}: {exc}"}
    print(json.dumps(error))
    return 1


if __name__ == "__main__":
    sys.exit(run())
