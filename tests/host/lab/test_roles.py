"""The lab's install step: inventory shape, node interpreters, and one summary line per role."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from tests.fakes import detaching_run
from tests.waiting import eventually

from sriov_dra_lab import roles

OUTPUT = """\
PLAY [Cluster objects] *********************************************************

TASK [sriovnet.dra.multus : Require a Multus image pinned by digest] ***********
skipping: [localhost]

TASK [sriovnet.dra.multus : Apply the NetworkAttachmentDefinition CRD (shipped manifest)] ***
changed: [localhost]

PLAY [Node files] **************************************************************

TASK [sriovnet.dra.multus : Create the persistent cache directories] ***********
ok: [lab-node-1] => (item=/var/lib/cni/multus)
changed: [lab-node-1] => (item=/var/lib/cni/sriov)
ok: [lab-node-2] => (item=/var/lib/cni/multus)
ok: [lab-node-2] => (item=/var/lib/cni/sriov)

TASK [sriovnet.dra.guard : Apply the guard's ClusterRole (shipped manifest)] ***
ok: [lab-node-1 -> localhost]

TASK [Not in a role] ***********************************************************
changed: [localhost]

TASK [sriovnet.dra.guard : Install the guard config (validated, atomic)] *******
fatal: [lab-node-2]: FAILED! => {"msg": "sorts after 00-aaa.conflist"}

PLAY RECAP *********************************************************************
localhost                  : ok=1    changed=1    unreachable=0    failed=0    skipped=1
"""


def test_summary_counts_each_task_once_per_host_with_its_worst_result() -> None:
    by_role = {s.role: s for s in roles.summarize(OUTPUT)}
    assert list(by_role) == ["sriovnet.dra.multus", "sriovnet.dra.guard"]
    multus = by_role["sriovnet.dra.multus"]
    assert (multus.hosts, multus.ok, multus.changed, multus.skipped, multus.failed) == (
        ("localhost", "lab-node-1", "lab-node-2"),
        1,
        2,
        1,
        0,
    )
    assert (
        multus.line()
        == "sriovnet.dra.multus on localhost, lab-node-1, lab-node-2: 3 ok (2 changed), 1 skipped"
    )


def test_summary_names_a_delegated_task_by_its_host_and_reports_failures() -> None:
    guard = {s.role: s for s in roles.summarize(OUTPUT)}["sriovnet.dra.guard"]
    assert guard.hosts == ("lab-node-1", "lab-node-2")
    assert (guard.ok, guard.failed) == (1, 1)
    assert guard.line().endswith("1 ok (0 changed), 0 skipped, 1 failed")


def test_merge_gives_one_line_per_role_across_runs() -> None:
    cluster = roles.RoleSummary("sriovnet.dra.guard", ("localhost",), ok=2, changed=1, skipped=3, failed=0)
    nodes = roles.RoleSummary("sriovnet.dra.guard", ("lab-node-1",), ok=3, changed=2, skipped=0, failed=0)
    vfs = roles.RoleSummary("sriovnet.dra.vfs", ("lab-node-1",), ok=5, changed=0, skipped=9, failed=0)
    merged = roles.merge([cluster, vfs, nodes])
    assert merged == [
        roles.RoleSummary(
            "sriovnet.dra.guard", ("localhost", "lab-node-1"), ok=5, changed=3, skipped=3, failed=0
        ),
        vfs,
    ]


def test_inventory_puts_each_node_in_the_node_group_with_its_own_interpreter(tmp_path: Path) -> None:
    host = roles.NodeHost("lab-node-1", ("env", "LAB_NODE=lab-node-1"), {"vfs_host_root": "/x/sysfs"})
    doc = roles.inventory(tmp_path, [host], {"multus_mode": "thin"})
    node = doc["all"]["children"][roles.NODE_GROUP]["hosts"]["lab-node-1"]
    assert node["ansible_connection"] == "local" and node["vfs_host_root"] == "/x/sysfs"
    assert doc["all"]["vars"] == {"multus_mode": "thin"}
    assert doc["all"]["hosts"]["localhost"]["ansible_python_interpreter"] == sys.executable
    wrapper = node["ansible_python_interpreter"]
    done = subprocess.run(
        [wrapper, "-c", "import os, sys; print(os.environ['LAB_NODE'], sys.executable)"],
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["lab-node-1", sys.executable]


def test_collections_path_resolves_the_collection_to_this_checkout(tmp_path: Path) -> None:
    root = roles.collections_path(tmp_path)
    link = root / "ansible_collections" / "sriovnet" / "dra"
    assert link.resolve() == roles.REPO
    assert (link / "galaxy.yml").is_file() and roles.PLAYBOOK.is_file()
    assert roles.collections_path(tmp_path) == root  # a second lab start reuses it


@pytest.mark.parametrize(
    ("code", "message"),
    [(3, "exited 3"), (None, "timed out after 1 s")],
    ids=["non-zero-exit-names-the-code-and-log", "timeout-kills-and-says-so"],
)
def test_a_failed_run_raises_with_the_log_tail(tmp_path: Path, code: int | None, message: str) -> None:
    inventory = roles.write_inventory(tmp_path, {"all": {"hosts": {}}})
    run = roles.PlaybookRun(tmp_path, inventory, kubeconfig=tmp_path / "kc", limit="localhost", name="t")
    script = "import time; time.sleep(30)" if code is None else f"print('boom'); raise SystemExit({code})"
    run.argv = [sys.executable, "-c", script]
    run.start()
    with pytest.raises(roles.PlaybookFailed, match=message) as caught:
        run.wait(timeout_s=1)
    assert str(run.log_path) in str(caught.value)
    if code is not None:
        assert "boom" in str(caught.value)
    assert run.process is not None and run.process.poll() is not None


def test_killing_a_run_also_kills_a_worker_that_left_the_runs_process_group(tmp_path: Path) -> None:
    run = roles.PlaybookRun(
        tmp_path, tmp_path / "inventory.yml", kubeconfig=tmp_path / "k", limit="x", name="t"
    )
    run.process = subprocess.Popen(
        [sys.executable, "-c", detaching_run.SCRIPT],
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert run.process.stdout is not None
    worker = int(run.process.stdout.readline())
    try:
        assert os.getpgid(worker) == worker != os.getpgid(run.process.pid)  # outside the run's group
    finally:
        run.kill()
        run.process.stdout.close()
    assert run.process.returncode == -signal.SIGKILL

    def gone() -> bool:
        try:
            with open(f"/proc/{worker}/stat") as f:
                return f.read().rsplit(")", 1)[1].split()[0] == "Z"  # killed, not yet reaped by init
        except FileNotFoundError:
            return True

    assert eventually("the worker to be killed", gone, timeout_s=10, interval_s=0.05)
