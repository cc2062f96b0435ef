"""A real-node lab that dies leaves nothing on the machine: SIGKILL then ``lab down``, and Ctrl-C during ``lab demo``.

Each test runs ``sriov-dra lab`` as a child process with two real nodes (kubelet v1.36 +
containerd), waits until a Pod sandbox runs on a real node (containerd shims, pause and
containers run in their own sessions, in the node's cgroups), then either SIGKILLs the whole
process tree of the lab (nothing of it gets to clean up; the shims survive) and runs ``lab down``,
or sends SIGINT to ``lab demo`` and lets it stop. One more SIGKILLs only the ``lab up`` process
while its roles install (its ``ansible-playbook`` run, stopped first so that it outlives the lab,
is left behind with workers that left the run's session) and runs ``lab down``. :func:`_machine_leftovers` then lists what of
the lab is still on the machine, and the list must be empty. It checks, by the lab id of the work
directory's ``lab.json``:

- network namespaces ``sdl<id>-*`` and ``sdrn<id>-*``;
- links ``sdrnb<id>`` (the bridge) and ``sdrnv<id>*`` (node veths);
- cgroups ``/sdrn<id>-*`` (the real nodes) and ``/sdl<id>-*`` (the lab's ansible runs) in every
  cgroup hierarchy;
- mounts in the initial mount namespace under the work directory or ``/run/sdl-<id>``;
- the run directory ``/run/sdl-<id>``;
- processes whose command line names the work directory, ``/run/sdl-<id>`` or the node namespaces;
- host iptables rules (``iptables-save``) naming the lab's links or added on ``203.0.113.0/24``;
- the global sysctls the kubelet rewrites (``real_node.KUBELET_SYSCTLS``) kept their values.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from tests import tiers
from tests.waiting import eventually

REPO = Path(__file__).resolve().parents[3]
START_TIMEOUT_S = 900


def _sriov_dra() -> str:
    return str(Path(sys.executable).parent / "sriov-dra")


class _Lab:
    """``sriov-dra lab <argv>`` as a child process with its output collected by a thread."""

    def __init__(self, argv: list[str], workdir: Path) -> None:
        self.workdir = workdir
        self.proc = subprocess.Popen(
            [_sriov_dra(), "lab", *argv, "--workdir", str(workdir)],
            cwd=REPO,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        self.lines: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))

    def close(self) -> None:
        """Kill the lab if it still runs, reap it and close its pipes."""
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.close()
        self.reader.join(timeout=30)
        self.proc.stdout.close()

    def output(self) -> str:
        return "\n".join(self.lines)

    def lab_id(self) -> str:
        return str(json.loads((self.workdir / "lab.json").read_text())["labId"])

    def wait_for(self, what: str, check: Any, timeout_s: float = START_TIMEOUT_S) -> None:
        deadline = time.monotonic() + timeout_s
        while not check():
            if self.proc.poll() is not None:
                pytest.fail(f"the lab exited {self.proc.returncode} before {what}:\n{self.output()[-4000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"no {what} in {timeout_s} s:\n{self.output()[-4000:]}")
            time.sleep(1)


def _lab_down(workdir: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [_sriov_dra(), "lab", "down", "--workdir", str(workdir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
    )


def _cgroup_pids(lab_id: str, *, pods_only: bool) -> set[int]:
    from sriov_dra_lab import real_node

    pids: set[int] = set()
    for hierarchy in real_node.cgroup_hierarchies():
        for top in hierarchy.glob(f"sdrn{lab_id}-*"):
            for dirpath, _dirs, files in os.walk(top):
                rel = Path(dirpath).relative_to(top).parts
                if pods_only and (not rel or rel[0] == "system"):
                    continue
                if "cgroup.procs" in files:
                    try:
                        pids.update(int(p) for p in (Path(dirpath) / "cgroup.procs").read_text().split())
                    except OSError:
                        continue
    return pids


def _tree(root: int) -> list[int]:
    """``root`` and every process descending from it (by ``/proc/<pid>/stat`` parent), root first."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo += children.get(pid, [])
    return out


def _iptables() -> set[str]:
    lines: set[str] = set()
    for table in ("filter", "nat", "mangle", "raw"):
        done = subprocess.run(["iptables-save", "-t", table], capture_output=True, text=True, check=False)
        lines |= {line for line in done.stdout.splitlines() if line.startswith("-A")}
    return lines


def _sysctls() -> dict[str, str]:
    from sriov_dra_lab import real_node

    return {key: Path("/proc/sys", key).read_text() for key in real_node.KUBELET_SYSCTLS}


def _machine_leftovers(workdir: Path, lab_id: str, before: tuple[set[str], dict[str, str]]) -> list[str]:
    """What of lab ``lab_id`` in ``workdir`` is still on the machine (module docstring), one line each."""
    from sriov_dra_lab import iproute, real_node, topology

    run_dir = topology.run_root(lab_id)
    out = [
        f"netns {p.name}"
        for p in (iproute.NETNS_DIR.iterdir() if iproute.NETNS_DIR.is_dir() else [])
        if p.name.startswith((f"sdl{lab_id}-", f"sdrn{lab_id}-"))
    ]
    out += [
        f"link {p.name}"
        for p in Path("/sys/class/net").iterdir()
        if p.name.startswith((f"sdrnb{lab_id}", f"sdrnv{lab_id}"))
    ]
    out += [
        f"cgroup {c}"
        for h in real_node.cgroup_hierarchies()
        for pattern in (f"sdrn{lab_id}-*", f"sdl{lab_id}-*")
        for c in h.glob(pattern)
    ]
    root = str(workdir.resolve())
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        out += [
            f"mount {m}"
            for line in f
            if (m := line.split()[4]) == root or m.startswith((f"{root}/", str(run_dir)))
        ]
    if run_dir.exists():
        out.append(f"run dir {run_dir}")
    marks = (root, str(run_dir), f"sdrn{lab_id}-", f"sdl{lab_id}-")
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                cmd = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if any(mark in cmd for mark in marks):
                out.append(f"process {entry.name} {cmd[:160]}")
    rules_before, sysctls_before = before
    out += [
        f"iptables {rule}"
        for rule in sorted(_iptables() - rules_before)
        if f"sdrn{lab_id}" in rule or "203.0.113." in rule
    ]
    out += [f"sysctl {k} changed" for k, v in _sysctls().items() if sysctls_before.get(k) != v]
    return out


@pytest.fixture
def machine_before() -> Iterator[tuple[set[str], dict[str, str]]]:
    from sriov_dra_lab import real_node

    missing = real_node.missing_parts()
    if missing:
        tiers.unavailable("e2e", "real nodes cannot run here: " + "; ".join(missing))
    yield _iptables(), _sysctls()


def _probe_pod(kubeconfig: str) -> None:
    """A Pod on a real node (busybox, local image), applied until admitted, waited until Running."""
    from sriov_dra_lab import binaries, images

    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "killed-lab-probe", "namespace": "default"},
        "spec": {
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 0,
            "containers": [
                {
                    "name": "probe",
                    "image": images.BUSYBOX_IMAGE,
                    "imagePullPolicy": "Never",
                    "command": ["sleep", "3600"],
                }
            ],
        },
    }
    kubectl = [str(binaries.find("kubectl")), f"--kubeconfig={kubeconfig}"]

    def applied() -> bool:
        done = subprocess.run(
            [*kubectl, "apply", "-f", "-"], input=json.dumps(pod), capture_output=True, text=True, check=False
        )
        return done.returncode == 0

    eventually("the probe Pod admitted", applied, timeout_s=120, interval_s=2)

    def running() -> bool:
        done = subprocess.run(
            [*kubectl, "-n", "default", "get", "pod", "killed-lab-probe", "-o", "jsonpath={.status.phase}"],
            capture_output=True,
            text=True,
            check=False,
        )
        return done.stdout == "Running"

    eventually("the probe Pod Running", running, timeout_s=240, interval_s=2)


def test_a_sigkilled_real_node_lab_leaves_nothing_after_lab_down(
    tmp_path: Path, machine_before: tuple[set[str], dict[str, str]]
) -> None:
    workdir = tmp_path / "lab"
    lab = _Lab(["up", "--node-kind", "real"], workdir)
    try:
        lab.wait_for("ready line", lambda: any("ready in" in line for line in lab.lines))
        lab_id = lab.lab_id()
        ready = next(line for line in lab.lines if "ready in" in line)
        _probe_pod(ready.rsplit("KUBECONFIG=", 1)[1].strip())
        assert _cgroup_pids(lab_id, pods_only=True), "a Pod sandbox runs on a real node before the kill"
        for pid in _tree(lab.proc.pid):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                continue
        assert lab.proc.wait(timeout=30) == -signal.SIGKILL
        time.sleep(2)  # the children that die with their parent are gone
        left = _machine_leftovers(workdir, lab_id, machine_before)
        assert any(line.startswith("netns ") for line in left), left  # the kill left the nodes behind
        assert _cgroup_pids(lab_id, pods_only=False), "the shims outlive the killed lab"
    finally:
        lab.close()
        down = _lab_down(workdir)
    assert down.returncode == 0, down.stderr
    print(down.stdout)
    assert "removed" in down.stdout
    assert _machine_leftovers(workdir, lab_id, machine_before) == []


def _signal_run_processes(lab_id: str, signum: int) -> None:
    """Send ``signum`` to every process in the cgroups of lab ``lab_id``'s ansible runs."""
    from sriov_dra_lab import cgroups, real_node

    trees = [t for h in real_node.cgroup_hierarchies() for t in h.glob(f"sdl{lab_id}-run-*")]
    for pid in cgroups.pids(trees):
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signum)


def _run_cgroup_processes(lab_id: str) -> list[str]:
    """The command lines of the processes left in the cgroups of lab ``lab_id``'s ansible runs."""
    from sriov_dra_lab import real_node

    found: set[str] = set()
    for hierarchy in real_node.cgroup_hierarchies():
        for group in hierarchy.glob(f"sdl{lab_id}-run-*"):
            try:
                pids = (group / "cgroup.procs").read_text().split()
            except OSError:
                continue
            for pid in pids:
                try:
                    cmd = (
                        Path(f"/proc/{pid}/cmdline")
                        .read_bytes()
                        .replace(b"\0", b" ")
                        .decode(errors="replace")
                    )
                except OSError:
                    continue
                found.add(f"{pid} {cmd[:160]}")
    return sorted(found)


def test_a_lab_up_sigkilled_during_the_role_install_leaves_nothing_after_lab_down(
    tmp_path: Path, machine_before: tuple[set[str], dict[str, str]]
) -> None:
    workdir = tmp_path / "lab"
    log = workdir / "ansible" / "ansible-cluster.log"
    lab = _Lab(["up", "--node-kind", "real"], workdir)
    try:
        lab.wait_for(
            "the cluster run inside a role",
            lambda: log.exists() and "TASK [sriovnet.dra." in log.read_text(errors="replace"),
        )
        lab_id = lab.lab_id()
        # The API server dies with the lab, and a run whose task then fails ends by itself within a
        # second: stopped (SIGSTOP) first, the run is certain to outlive the lab, as a run in a long
        # task (a rollout wait) does.
        _signal_run_processes(lab_id, signal.SIGSTOP)
        lab.proc.kill()  # the lab process only: what it started is left on its own
        assert lab.proc.wait(timeout=30) == -signal.SIGKILL
        time.sleep(2)  # the children that die with their parent are gone
        outlived = _run_cgroup_processes(lab_id)
        assert outlived, (  # the run outlived the lab
            _machine_leftovers(workdir, lab_id, machine_before),
            log.read_text(errors="replace")[-3000:],
        )
    finally:
        lab.close()
        down = _lab_down(workdir)
    assert down.returncode == 0, down.stderr
    assert _machine_leftovers(workdir, lab_id, machine_before) == []


def test_ctrl_c_during_lab_demo_on_real_nodes_leaves_nothing(
    tmp_path: Path, machine_before: tuple[set[str], dict[str, str]]
) -> None:
    workdir = tmp_path / "lab"
    lab = _Lab(["demo", "--node-kind", "real"], workdir)
    try:
        lab.wait_for("lab id", lambda: (workdir / "lab.json").exists())
        lab_id = lab.lab_id()
        lab.wait_for("a Pod sandbox on a real node", lambda: bool(_cgroup_pids(lab_id, pods_only=True)))
        lab.proc.send_signal(signal.SIGINT)
        status = lab.proc.wait(timeout=600)
    finally:
        lab.close()
    print(lab.output()[-2000:])
    assert status == 130, lab.output()[-4000:]
    assert _machine_leftovers(workdir, lab_id, machine_before) == []
