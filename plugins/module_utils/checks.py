# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Node checks of the preflight (spec §4.3, §18.1) that are more than a plain command.

Each check returns ``{"name", "status": "pass"|"fail", "detail", "fix"}``; ``fix`` says what to
change and is empty on pass. The checks read files and run CNI binaries with
``CNI_COMMAND=VERSION`` only; they never change the node. It must import only the standard
library (and this collection's module_utils).
"""

from __future__ import annotations

import json
import os
import subprocess

from ansible_collections.sriovnet.dra.plugins.module_utils import cni

PASS = "pass"
FAIL = "fail"
VOLATILE_FS = ("tmpfs", "ramfs")


def result(name, ok, detail, fix=""):
    """One check result; ``fix`` is dropped on pass."""
    return {"name": name, "status": PASS if ok else FAIL, "detail": detail, "fix": "" if ok else fix}


def check_binaries(bin_dir, names):
    """Every CNI binary in ``names`` exists in ``bin_dir`` and is executable."""
    missing = [n for n in names if not os.access(os.path.join(bin_dir, n), os.X_OK)]
    return result(
        "cni-binaries",
        not missing,
        "missing or not executable in %s: %s" % (bin_dir, ", ".join(missing)) if missing
        else "present in %s: %s" % (bin_dir, ", ".join(names)),
        "install %s into %s (roles sriovnet.dra.multus and sriovnet.dra.guard install Multus and the guard shim; "
        "the sriov, IPAM and tuning plugins come from containernetworking/plugins, sriov-cni and whereabouts)"
        % (", ".join(missing), bin_dir),
    )


def check_cni_exec(bin_dir, names, timeout_s):
    """Each present binary answers ``CNI_COMMAND=VERSION`` with ``supportedVersions`` (a real exec)."""
    bad = []
    for name in names:
        path = os.path.join(bin_dir, name)
        if not os.access(path, os.X_OK):
            continue
        env = {"CNI_COMMAND": "VERSION", "PATH": os.environ.get("PATH", "/usr/bin:/bin")}
        try:
            proc = subprocess.run([path], input=b'{"cniVersion":"1.0.0"}', env=env, capture_output=True,
                                  timeout=timeout_s, check=False)
            answer = json.loads(proc.stdout.decode("utf-8", "replace") or "null")
            ok = proc.returncode == 0 and isinstance(answer, dict) and isinstance(answer.get("supportedVersions"), list)
        except (OSError, ValueError, subprocess.TimeoutExpired):
            ok = False
        if not ok:
            bad.append(name)
    return result(
        "cni-exec",
        not bad,
        "CNI_COMMAND=VERSION failed for: %s" % ", ".join(bad) if bad
        else "every present CNI binary answered CNI_COMMAND=VERSION",
        "reinstall %s in %s for this node's architecture and check that each runs (CNI_COMMAND=VERSION %s/<plugin>)"
        % (", ".join(bad), bin_dir, bin_dir),
    )


def check_guard_first(conf_dir, guard_file):
    """The guard's file exists and is the first CNI config file the runtime sees."""
    try:
        files = cni.conf_files(conf_dir)
    except cni.CniConfigError as exc:
        return result("guard-first", False, exc.msg, "create %s and run the sriovnet.dra.guard role" % conf_dir)
    first = files[0] if files else None
    return result(
        "guard-first",
        first == guard_file,
        "first CNI config in %s is %s" % (conf_dir, first),
        "run the sriovnet.dra.guard role so that %s is installed and sorts first (files now: %s)"
        % (guard_file, ", ".join(files) or "none"),
    )


def check_guard_config(conf_dir, guard_file, daemon_config):
    """The guard's file passes the installation contract (module_utils/cni.py), incl. the daemon config."""
    path = os.path.join(conf_dir, guard_file)
    try:
        config = cni.load_json(path, "guard config")
        entry = cni.validate_guard_config(guard_file, config)
        cni.check_primary(conf_dir, guard_file, entry)
        if daemon_config and entry["multus"]["mode"] == "thick":
            cni.check_multus_daemon_config(daemon_config, guard_file)
    except cni.CniConfigError as exc:
        return result("guard-config", False, exc.msg,
                      "fix the guard and Multus settings named above and rerun the sriovnet.dra.multus and "
                      "sriovnet.dra.guard roles")
    return result("guard-config", True, "%s: mode %s, primary pinned to %s" % (
        path, entry["multus"]["mode"], entry["multus"]["primaryConfig"]))


def mount_of(path, mounts):
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


def check_cache_dirs(dirs, mounts_file):
    """Multus's and sriov-cni's caches exist and live on persistent storage (not tmpfs)."""
    try:
        with open(mounts_file) as handle:
            mounts = handle.read().splitlines()
    except (OSError, IOError) as exc:
        return result("cache-mounts", False, "cannot read %s: %s" % (mounts_file, exc), "run the preflight as root")
    problems = []
    for path in dirs:
        if not os.path.isdir(path):
            problems.append("%s is missing" % path)
            continue
        point, fstype = mount_of(os.path.realpath(path), mounts)
        if fstype in VOLATILE_FS:
            problems.append("%s is on %s (%s), lost on reboot" % (path, fstype, point))
    return result(
        "cache-mounts",
        not problems,
        "; ".join(problems) if problems else "persistent: %s" % ", ".join(dirs),
        "create these directories on persistent storage and mount them at the same host path into the Multus and "
        "sriov-cni containers (role sriovnet.dra.multus does); DEL needs the cached delegate configs after a reboot",
    )


def check_legacy_device_plugin(config_path):
    """No SR-IOV network device plugin configured on this node (it would advertise the same VFs)."""
    present = os.path.exists(config_path)
    return result(
        "legacy-device-plugin",
        not present,
        "%s %s" % (config_path, "exists: an SR-IOV device plugin is configured here" if present else "is absent"),
        "remove the sriov-network-device-plugin DaemonSet and %s; one provider must own each VF" % config_path,
    )
