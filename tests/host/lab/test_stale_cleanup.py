"""``lab_dir.clean_stale`` removes what a killed lab left, by the lab id only (never another lab's).

Root-only: the test makes real network namespaces, a bridge, veths, cgroups in every hierarchy
with a process inside (as a containerd shim outlives a SIGKILLed lab), a mount-namespace file
under the work directory and the lab's run directory, for its own lab id and for a second id
that must survive.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from tests.fakes import detaching_run

from sriov_dra_lab import cgroups, iproute, lab_dir, real_node, roles, topology


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


def _make_cgroup(lab_id: str) -> list[Path]:
    made = [h / f"sdrn{lab_id}-1" for h in real_node.cgroup_hierarchies()]
    cgroups.create([*made, *(d / "system" for d in made)])
    return made


def _leave_real_node(lab_id: str, workdir: Path | None) -> subprocess.Popen[bytes]:
    """What a SIGKILLed real-node lab leaves: netns + veth on a bridge, cgroups with a process, mounts."""
    _ip("link", "add", f"sdrnb{lab_id}", "type", "bridge")
    iproute.add_netns(f"sdrn{lab_id}-1")
    _ip("link", "add", f"sdrnv{lab_id}1", "type", "veth", "peer", "name", "eth0", "netns", f"sdrn{lab_id}-1")
    _ip("link", "set", f"sdrnv{lab_id}1", "master", f"sdrnb{lab_id}")
    trees = [d / "system" for d in _make_cgroup(lab_id)]
    shim = subprocess.Popen(cgroups.joined(trees, ["sleep", "600"]), start_new_session=True)
    if workdir is not None:
        (workdir / lab_dir.STATE_FILE).write_text(json.dumps({"labId": lab_id}))
        topology.create_mount_namespace(workdir / "nodes" / "n1" / "ns" / "mnt", "n1")
        (topology.run_root(lab_id) / "n1").mkdir(parents=True)
    return shim


def _present(lab_id: str) -> list[str]:
    found = [f"netns {n}" for n in (f"sdrn{lab_id}-1",) if (iproute.NETNS_DIR / n).exists()]
    found += [
        f"link {n}" for n in (f"sdrnb{lab_id}", f"sdrnv{lab_id}1") if Path("/sys/class/net", n).exists()
    ]
    found += [f"cgroup {h}" for h in real_node.cgroup_hierarchies() if (h / f"sdrn{lab_id}-1").exists()]
    if topology.run_root(lab_id).exists():
        found.append(f"run dir {topology.run_root(lab_id)}")
    return found


@pytest.fixture
def two_labs(tmp_path: Path) -> Iterator[tuple[str, str, Path, list[subprocess.Popen[bytes]]]]:
    if os.geteuid() != 0:
        pytest.skip("needs root to create namespaces, links and cgroups")
    ours, other = secrets.token_hex(2), secrets.token_hex(2)
    while other == ours:
        other = secrets.token_hex(2)
    workdir = tmp_path / "lab"
    workdir.mkdir()
    shims = [_leave_real_node(ours, workdir), _leave_real_node(other, None)]
    try:
        yield ours, other, workdir, shims
    finally:
        for shim in shims:
            shim.kill()
            shim.wait()
        for lab_id in (ours, other):  # the other lab's parts, and ours should the test fail
            (tmp_path / "other").mkdir(exist_ok=True)
            (tmp_path / "other" / lab_dir.STATE_FILE).write_text(json.dumps({"labId": lab_id}))
            lab_dir.clean_stale(tmp_path / "other")


def test_clean_stale_kills_the_real_nodes_processes_and_removes_their_netns_links_cgroups_and_mounts(
    two_labs: tuple[str, str, Path, list[subprocess.Popen[bytes]]],
) -> None:
    ours, other, workdir, (shim, other_shim) = two_labs
    assert len(_present(ours)) >= 4  # the leftovers exist before the cleanup
    done = lab_dir.clean_stale(workdir)
    assert shim.wait(timeout=30) == -9
    assert _present(ours) == []
    root = str(workdir.resolve())
    with open("/proc/self/mountinfo", encoding="utf-8") as f:
        assert [m for line in f if (m := line.split()[4]).startswith(root)] == []
    assert any("killed" in line for line in done)
    assert f"removed link sdrnb{ours}" in done
    # The other lab (another id) keeps everything, its process too.
    assert other_shim.poll() is None
    assert len(_present(other)) >= 3


def test_clean_stale_reads_no_lab_id_that_the_lab_would_not_write(tmp_path: Path) -> None:
    (tmp_path / lab_dir.STATE_FILE).write_text(json.dumps({"labId": ""}))
    assert lab_dir.clean_stale(tmp_path) == []
    (tmp_path / lab_dir.STATE_FILE).write_text(json.dumps({"labId": ".*"}))
    assert lab_dir.clean_stale(tmp_path) == []


def test_lab_down_leaves_a_directory_that_is_not_a_lab_alone(tmp_path: Path) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    assert lab_dir.down(tmp_path) == []
    assert (tmp_path / "keep.txt").read_text() == "mine"


def test_clean_stale_kills_an_ansible_run_and_the_worker_that_left_its_session(tmp_path: Path) -> None:
    # A SIGKILLed lab up leaves its ansible-playbook run; ansible-core's workers call setsid, so
    # neither the run's group nor its session finds them.
    if os.geteuid() != 0:
        pytest.skip("needs root to create cgroups")
    lab_id = secrets.token_hex(2)
    (tmp_path / lab_dir.STATE_FILE).write_text(json.dumps({"labId": lab_id}))
    trees = lab_dir.run_cgroups(lab_id, "cluster")
    cgroups.create(trees)
    run = roles.PlaybookRun(
        tmp_path,
        tmp_path / "inventory.yml",
        kubeconfig=tmp_path / "k",
        limit="x",
        name="cluster",
        cgroups=trees,
    )
    run.argv = [sys.executable, "-c", detaching_run.SCRIPT]
    run.start()
    try:
        worker = _printed_pid(run.log_path)
        assert os.getsid(worker) == worker != os.getsid(run.process.pid)  # outside the run's session
        done = lab_dir.clean_stale(tmp_path)
        assert run.process.wait(timeout=30) == -9
        assert not Path(f"/proc/{worker}/cmdline").exists() or _zombie(worker)
        assert any("killed" in line for line in done)
        assert not any(t.exists() for t in trees)
    finally:
        run.kill()


def _printed_pid(log: Path) -> int:
    """The pid the stand-in run printed (the only line of digits in its log)."""
    for _ in range(300):
        found = [line for line in log.read_text().splitlines() if line.isdigit()]
        if found:
            return int(found[0])
        time.sleep(0.05)
    raise AssertionError(f"the stand-in run printed nothing: {log.read_text()!r}")


def _zombie(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True
