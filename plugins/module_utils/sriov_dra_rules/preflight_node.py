# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Node checks of the preflight (docs/design.md#prerequisites), one implementation for module and CLI.

Each check returns ``{"name", "status": "pass"|"fail"|"skip", "detail", "fix"}`` (``fix`` only
on failure; a skip says why in ``detail``); :func:`node_checks` runs them in a fixed order. They
read files, run CNI binaries with ``CNI_COMMAND=VERSION`` and (``cni-add``, root only) a real
ADD and DEL between two throwaway namespaces, and change nothing else on the node. The guard's
install rules come from :mod:`cni_install`, so CLI and module give one verdict with one reason.
Standard library and siblings only.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from . import checkpoint_doc, checkpoint_read, cni_install, guard_conf

PASS = "pass"
FAIL = "fail"
SKIP = "skip"
VOLATILE_FS = ("tmpfs", "ramfs")
NETNS_DIR = "/var/run/netns"
ADD_PLUGIN = "bridge"
ADD_IPAM = "host-local"
ADD_SUBNET = "198.18.0.0/29"

DEFAULTS: dict[str, Any] = {
    "cni_conf_dir": "/etc/cni/net.d",
    "cni_bin_dir": "/opt/cni/bin",
    "guard_file": "00-multus-guard.conflist",
    "multus_mode": "thick",
    "multus_daemon_config": "/etc/cni/net.d/multus.d/daemon-config.json",
    "binaries": ["multus-guard", "sriov", "host-local", "whereabouts"],
    "cache_dirs": ["/var/lib/cni/multus", "/var/lib/cni/sriov"],
    "mounts_file": "/proc/self/mounts",
    "legacy_device_plugin_config": "/etc/pcidp/config.json",
    "exec_timeout": 10,
    "add_check": True,
    "plugin_checkpoint": guard_conf.DEFAULT_PLUGIN_CHECKPOINT,
}
"""Option -> default, shared by the module's argument spec and ``sriov-dra preflight``."""


def message(exc: BaseException) -> str:
    """An exception's actionable text (``msg`` of the collection's errors, else ``str``)."""
    return str(getattr(exc, "msg", None) or exc)


def result(name: str, ok: bool, detail: str, fix: str = "") -> dict[str, str]:
    """One check result; ``fix`` is dropped on pass."""
    return {"name": name, "status": PASS if ok else FAIL, "detail": detail, "fix": "" if ok else fix}


def skipped(name: str, why: str) -> dict[str, str]:
    """A check that could not run here; ``why`` says what would enable it."""
    return {"name": name, "status": SKIP, "detail": "skipped: " + why, "fix": ""}


def check_binaries(bin_dir: str, names: Sequence[str]) -> dict[str, str]:
    """Every CNI binary in ``names`` exists in ``bin_dir`` and is executable."""
    missing = [n for n in names if not os.access(os.path.join(bin_dir, n), os.X_OK)]
    return result(
        "cni-binaries",
        not missing,
        "missing or not executable in {}: {}".format(bin_dir, ", ".join(missing))
        if missing
        else "present in {}: {}".format(bin_dir, ", ".join(names)),
        "install {} into {} (roles sriovnet.dra.multus and sriovnet.dra.guard install Multus and the guard shim; "
        "the sriov, IPAM and tuning plugins come from containernetworking/plugins, sriov-cni and whereabouts)".format(
            ", ".join(missing), bin_dir
        ),
    )


def check_cni_exec(bin_dir: str, names: Sequence[str], timeout_s: float) -> dict[str, str]:
    """Each present binary answers ``CNI_COMMAND=VERSION`` with ``supportedVersions`` (a real exec)."""
    bad = []
    for name in names:
        path = os.path.join(bin_dir, name)
        if not os.access(path, os.X_OK):
            continue
        env = {"CNI_COMMAND": "VERSION", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        try:
            proc = subprocess.run(
                [path],
                input=b'{"cniVersion":"1.0.0"}',
                env=env,
                capture_output=True,
                timeout=timeout_s,
                check=False,
            )
            answer = json.loads(proc.stdout.decode("utf-8", "replace") or "null")
            ok = (
                proc.returncode == 0
                and isinstance(answer, dict)
                and isinstance(answer.get("supportedVersions"), list)
            )
        except (OSError, ValueError, subprocess.TimeoutExpired):
            ok = False
        if not ok:
            bad.append(name)
    return result(
        "cni-exec",
        not bad,
        "CNI_COMMAND=VERSION failed for: {}".format(", ".join(bad))
        if bad
        else "every present CNI binary answered CNI_COMMAND=VERSION",
        f"reinstall {', '.join(bad)} in {bin_dir} for this node's architecture and check that each runs "
        f"(CNI_COMMAND=VERSION {bin_dir}/<plugin>)",
    )


def check_guard_first(conf_dir: str, guard_file: str) -> dict[str, str]:
    """The guard's file exists and is the first CNI config file the runtime sees (:func:`cni_install.conf_files`)."""
    try:
        files = cni_install.conf_files(conf_dir)
    except cni_install.ContractError as exc:
        return result(
            "guard-first", False, message(exc), f"create {conf_dir} and run the sriovnet.dra.guard role"
        )
    first = files[0] if files else None
    return result(
        "guard-first",
        first == guard_file,
        f"first CNI config in {conf_dir} is {first}" if first else f"no CNI config in {conf_dir}",
        "run the sriovnet.dra.guard role so that {} is installed and sorts first (files now: {})".format(
            guard_file, ", ".join(files) or "none"
        ),
    )


def check_guard_config(
    conf_dir: str, guard_file: str, daemon_config: str | None, multus_mode: str | None = None
) -> dict[str, str]:
    """The guard's file passes the install contract (:func:`cni_install.check_installed`), runs Multus in
    ``multus_mode`` when given, incl. thick Multus's daemon config when ``daemon_config`` is given."""
    try:
        detail = cni_install.check_installed(conf_dir, guard_file, daemon_config, multus_mode)
    except cni_install.ContractError as exc:
        return result(
            "guard-config",
            False,
            message(exc),
            "correct the file or key this check's detail names, then rerun the sriovnet.dra.multus and "
            "sriovnet.dra.guard roles",
        )
    return result("guard-config", True, detail)


def check_guard_checkpoint(conf_dir: str, guard_file: str, plugin_checkpoint: str) -> dict[str, str]:
    """The guard's ``guard.pluginCheckpoint`` is ``plugin_checkpoint``, and that file reads as the plugin's checkpoint.

    The shim routes an ADD to the daemon only for a Pod UID it finds in that file; a path the plugin
    does not write holds no binding, so every Pod, managed ones too, would go to Multus alone past
    the guard's checks. ``plugin_checkpoint`` is where the plugin writes (its state directory's
    ``checkpoint.json``, which it creates at start). Skipped when the guard's file cannot be read
    (``guard-config`` names why).
    """
    name = "guard-checkpoint"
    path = os.path.join(conf_dir, guard_file)
    try:
        entry = cni_install.validate_guard_config(guard_file, cni_install.load_json(path, "guard config"))
    except cni_install.ContractError as exc:
        return skipped(name, f"the guard's config cannot be read ({message(exc)}); see guard-config")
    guard = entry.get("guard")
    configured = (guard.get("pluginCheckpoint") if isinstance(guard, dict) else None) or (
        guard_conf.DEFAULT_PLUGIN_CHECKPOINT
    )
    bypass = (
        "the shim would find no managed binding there and send every Pod, managed ones too, to Multus alone"
    )
    reinstall = (
        f"set guard_plugin_checkpoint to {plugin_checkpoint} (sriov-dra-guard install --plugin-checkpoint) and run "
        "the sriovnet.dra.guard role again; if the plugin writes elsewhere (its --state-dir, "
        "--kubelet-plugins-directory-path), give the preflight that path as plugin_checkpoint"
    )
    if os.path.normpath(str(configured)) != os.path.normpath(plugin_checkpoint):
        return result(
            name,
            False,
            f"{path}: guard.pluginCheckpoint is {configured}, but the plugin writes its checkpoint at "
            f"{plugin_checkpoint}; {bypass}",
            reinstall,
        )
    try:
        found = checkpoint_read.read(Path(configured))
        bindings = checkpoint_doc.managed_bindings(found.payload, source=str(found.source))
    except FileNotFoundError:
        return result(
            name,
            False,
            f"{path}: guard.pluginCheckpoint {configured} does not exist: the plugin creates it at start, so no "
            f"plugin runs on this node with that state directory, and {bypass}",
            "start the plugin on this node (sriovnet.dra.plugin role) and run the preflight again; if it runs, "
            + reinstall,
        )
    except Exception as exc:  # corrupt, another version, unreadable: not what the plugin writes
        return result(
            name,
            False,
            f"{path}: guard.pluginCheckpoint {configured} is not a checkpoint the plugin wrote ({message(exc)}); the "
            "shim cannot tell managed Pods there and sends every ADD to the guard daemon",
            "point guard_plugin_checkpoint at the plugin's checkpoint.json and run the sriovnet.dra.guard role "
            "again; for a damaged checkpoint see docs/plugin.md",
        )
    return result(
        name,
        True,
        f"{path}: guard.pluginCheckpoint {configured} is the plugin's checkpoint ({found.source.name}, "
        f"{len(bindings)} managed bindings)",
    )


def mount_of(path: str, mounts: Sequence[str]) -> tuple[str, str]:
    """``(mount point, fstype)`` of the longest mount-point prefix of ``path`` in ``mounts`` lines."""
    best = ("/", "")
    for line in mounts:
        fields = line.split()
        if len(fields) < 3:
            continue
        point = fields[1].replace("\\040", " ")
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best[0]):
            best = (point, fields[2])
    return best


def check_cache_dirs(dirs: Sequence[str], mounts_file: str) -> dict[str, str]:
    """Multus's and sriov-cni's caches exist and live on persistent storage (not tmpfs)."""
    try:
        with open(mounts_file) as handle:
            mounts = handle.read().splitlines()
    except OSError as exc:
        return result("cache-mounts", False, f"cannot read {mounts_file}: {exc}", "run the preflight as root")
    problems = []
    for path in dirs:
        if not os.path.isdir(path):
            problems.append(f"{path} is missing")
            continue
        point, fstype = mount_of(os.path.realpath(path), mounts)
        if fstype in VOLATILE_FS:
            problems.append(f"{path} is on {fstype} ({point}), lost on reboot")
    return result(
        "cache-mounts",
        not problems,
        "; ".join(problems) if problems else "persistent: {}".format(", ".join(dirs)),
        "create these directories on persistent storage and mount them at the same host path into the Multus and "
        "sriov-cni containers (role sriovnet.dra.multus does); DEL needs the cached delegate configs after a reboot",
    )


def check_legacy_device_plugin(config_path: str) -> dict[str, str]:
    """No SR-IOV network device plugin configured on this node (it would advertise the same VFs)."""
    present = os.path.exists(config_path)
    return result(
        "legacy-device-plugin",
        not present,
        "{} {}".format(
            config_path, "exists: an SR-IOV device plugin is configured here" if present else "is absent"
        ),
        f"remove the sriov-network-device-plugin DaemonSet and {config_path}; one provider must own each VF",
    )


def _run(argv: list[str], timeout_s: float, env: Mapping[str, str] | None = None, stdin: bytes = b"") -> str:
    """Run ``argv``; return stdout. Raises: RuntimeError naming the command and its error output."""
    try:
        proc = subprocess.run(
            argv,
            input=stdin,
            env=dict(env) if env else None,
            capture_output=True,
            timeout=timeout_s,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise RuntimeError("{}: {}".format(" ".join(argv[:4]), exc)) from exc
    out = proc.stdout.decode("utf-8", "replace")
    if proc.returncode != 0:
        said = (out.strip() or proc.stderr.decode("utf-8", "replace").strip())[:300]
        raise RuntimeError(f"{' '.join(argv[:4])} exited {proc.returncode}: {said}")
    return out


def _cni(
    command: str, host_ns: str, pod_ns: str, bin_dir: str, conf: bytes, timeout_s: float
) -> dict[str, Any]:
    """One CNI call of the ``bridge`` plugin run inside ``host_ns`` for the Pod side ``pod_ns``."""
    env = {
        "CNI_COMMAND": command,
        "CNI_CONTAINERID": pod_ns,
        "CNI_NETNS": os.path.join(NETNS_DIR, pod_ns),
        "CNI_IFNAME": "eth0",
        "CNI_PATH": bin_dir,
        "PATH": os.environ.get("PATH", "/usr/sbin:/usr/bin:/sbin:/bin"),
    }
    argv = ["ip", "netns", "exec", host_ns, os.path.join(bin_dir, ADD_PLUGIN)]
    out = _run(argv, timeout_s, env, conf)
    if command == "DEL" or not out.strip():
        return {}
    answer = json.loads(out)
    return answer if isinstance(answer, dict) else {}


def _allocations(data_dir: str, network: str) -> list[str]:
    """IP reservation files host-local keeps for ``network`` (not its lock or last-reserved files)."""
    path = os.path.join(data_dir, network)
    if not os.path.isdir(path):
        return []
    return sorted(n for n in os.listdir(path) if n != "lock" and not n.startswith("last_reserved_ip"))


def check_cni_add(bin_dir: str, timeout_s: float, enabled: bool = True) -> dict[str, str]:
    """A real ADD and DEL through the IPAM path, in throwaway namespaces; skipped when not possible.

    The ``bridge`` plugin runs inside a throwaway "host" namespace and attaches a second
    throwaway "Pod" namespace, taking an address from ``host-local`` with a temporary
    ``dataDir``; after ADD the reservation must exist and the result must carry an IP, after
    DEL it must be gone. Both namespaces and the data directory are removed in every case.
    Needs root, ``ip`` (iproute2) and ``bridge`` + ``host-local`` in ``bin_dir``.
    """
    name = "cni-add"
    if not enabled:
        return skipped(name, "disabled (add_check / --no-add-check)")
    if os.geteuid() != 0:
        return skipped(name, "not root; a test ADD needs network namespaces (run the preflight as root)")
    if shutil.which("ip") is None:
        return skipped(name, "the ip command (iproute2) is not installed; install it to run a test ADD")
    absent = [p for p in (ADD_PLUGIN, ADD_IPAM) if not os.access(os.path.join(bin_dir, p), os.X_OK)]
    if absent:
        return skipped(
            name,
            "{} not in {}; install the containernetworking plugins there to run a test ADD".format(
                ", ".join(absent), bin_dir
            ),
        )
    tag = f"sriovdra-pf-{uuid.uuid4().hex[:10]}"
    host_ns, pod_ns = tag + "-h", tag + "-p"
    data_dir = tempfile.mkdtemp(prefix="sriov-dra-preflight-ipam-")
    conf = {
        "cniVersion": "1.0.0",
        "name": tag,
        "type": ADD_PLUGIN,
        "bridge": "pfbr0",
        "ipam": {"type": ADD_IPAM, "dataDir": data_dir, "ranges": [[{"subnet": ADD_SUBNET}]]},
    }
    raw = json.dumps(conf).encode("utf-8")
    made: list[str] = []
    step = "create network namespaces"
    try:
        for ns in (host_ns, pod_ns):
            _run(["ip", "netns", "add", ns], timeout_s)
            made.append(ns)
        step = "ADD"
        answer = _cni("ADD", host_ns, pod_ns, bin_dir, raw, timeout_s)
        ips = [str(ip.get("address")) for ip in answer.get("ips") or [] if isinstance(ip, dict)]
        if not ips:
            raise RuntimeError(f"the ADD result has no ips: {json.dumps(answer)[:300]}")
        if not _allocations(data_dir, tag):
            raise RuntimeError(f"{ADD_IPAM} reserved nothing in {data_dir}")
        step = "DEL"
        _cni("DEL", host_ns, pod_ns, bin_dir, raw, timeout_s)
        left = _allocations(data_dir, tag)
        if left:
            raise RuntimeError("{} still holds {} after DEL".format(ADD_IPAM, ", ".join(left)))
    except (RuntimeError, ValueError) as exc:
        return result(
            name,
            False,
            f"test {step} failed: {exc}",
            f"make {bin_dir}/{ADD_PLUGIN} and {bin_dir}/{ADD_IPAM} run on this node (same architecture, kernel "
            "bridge and veth support) and retry; the CNI path cannot attach Pods while a plain ADD fails",
        )
    finally:
        for ns in made:
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
        shutil.rmtree(data_dir, ignore_errors=True)
    return result(
        name,
        True,
        "ADD gave {} via {} + {} between throwaway namespaces; DEL released it".format(
            ", ".join(ips), ADD_PLUGIN, ADD_IPAM
        ),
    )


def node_checks(options: Mapping[str, Any]) -> list[dict[str, str]]:
    """Every node check in a fixed order; ``options`` has the keys of :data:`DEFAULTS`."""
    o = dict(DEFAULTS)
    o.update({k: v for k, v in options.items() if v is not None})
    multus_bin = "multus-shim" if o["multus_mode"] == "thick" else "multus"
    binaries = [multus_bin] + [b for b in o["binaries"] if b != multus_bin]
    daemon_config = o["multus_daemon_config"] if o["multus_mode"] == "thick" else None
    return [
        check_binaries(o["cni_bin_dir"], binaries),
        check_cni_exec(o["cni_bin_dir"], binaries, o["exec_timeout"]),
        check_cni_add(o["cni_bin_dir"], o["exec_timeout"], o["add_check"]),
        check_guard_first(o["cni_conf_dir"], o["guard_file"]),
        check_guard_config(o["cni_conf_dir"], o["guard_file"], daemon_config, o["multus_mode"]),
        check_guard_checkpoint(o["cni_conf_dir"], o["guard_file"], o["plugin_checkpoint"]),
        check_cache_dirs(o["cache_dirs"], o["mounts_file"]),
        check_legacy_device_plugin(o["legacy_device_plugin_config"]),
    ]


def failed(found: Sequence[Mapping[str, str]]) -> list[str]:
    """Names of the failed checks (skipped checks are not failures)."""
    return [c["name"] for c in found if c["status"] == FAIL]
