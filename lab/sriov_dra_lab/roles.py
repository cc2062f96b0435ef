"""The lab's install step: ``playbooks/lab.yml`` (the collection's roles, runtime-free parts) on the lab.

Owns running the collection against a lab: the inventory (``localhost`` for the cluster objects,
one host per simulated node), a collections path on which ``sriovnet.dra`` is this checkout, the
``ansible-playbook`` runs (cluster objects on ``localhost`` while the lab still builds its nodes,
then the node hosts) with their output in ``<workdir>/ansible-<part>.log``, and one summary line
per role read back from that output.

A node host's modules run inside that node's network and mount namespaces: its
``ansible_python_interpreter`` is a small wrapper that ``nsenter``\\ s the node before starting
the lab's Python, so ``/etc/cni/net.d``, ``/opt/cni/bin`` and ``/var/lib/cni`` are the node's own
directories, exactly the paths the roles default to on a real node. Cluster tasks run on
``localhost`` with the lab's admin kubeconfig (``K8S_AUTH_KUBECONFIG``).

Must never run a role against anything but the lab: the inventory names only the lab's nodes and
the kubeconfig is always the lab control plane's.
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from sriov_dra_lab import cgroups as cgroups_mod
from sriov_dra_lab import paths

REPO: Final = paths.REPO
PLAYBOOK: Final = REPO / "playbooks" / "lab.yml"
COLLECTION: Final = ("sriovnet", "dra")
NODE_GROUP: Final = "sriov_dra_nodes"

_TASK = re.compile(r"^TASK \[(?:(?P<role>[\w.]+) : )?(?P<task>.*)\] \*+$")
_RESULT = re.compile(r"^(?P<status>ok|changed|skipping|fatal|failed): \[(?P<host>[^\]]+)\]")
_STATUS_RANK: Final = {"skipping": 0, "ok": 1, "changed": 2, "failed": 3, "fatal": 3}


class PlaybookFailed(RuntimeError):
    """``ansible-playbook`` exited non-zero; the message holds the log's path and its tail."""


@dataclass(frozen=True)
class NodeHost:
    """One simulated node as an inventory host.

    Shapes: ``exec_prefix`` the argv prefix that enters the node's namespaces (``nsenter ... --``);
    ``variables`` the node's own role variables (sysfs root, VF plan, guard socket...).
    """

    name: str
    exec_prefix: tuple[str, ...]
    variables: Mapping[str, Any]


@dataclass(frozen=True)
class RoleSummary:
    """What one role did: tasks counted once per host (a loop counts as its worst item).

    Shapes: ``hosts`` in first-seen order.
    """

    role: str
    hosts: tuple[str, ...]
    ok: int
    changed: int
    skipped: int
    failed: int

    def line(self) -> str:
        """``<role> on <hosts>: N ok (M changed), K skipped[, F failed]``."""
        failed = f", {self.failed} failed" if self.failed else ""
        return (
            f"{self.role} on {', '.join(self.hosts)}: {self.ok + self.changed} ok "
            f"({self.changed} changed), {self.skipped} skipped{failed}"
        )


def collections_path(workdir: Path) -> Path:
    """A collections path under ``workdir`` whose ``ansible_collections/sriovnet/dra`` is this checkout."""
    root = workdir / "collections"
    link = root.joinpath("ansible_collections", *COLLECTION)
    link.parent.mkdir(parents=True, exist_ok=True)
    if not link.is_symlink():
        link.symlink_to(REPO, target_is_directory=True)
    return root


def node_interpreter(path: Path, exec_prefix: Sequence[str]) -> Path:
    """Write ``path``: a shell wrapper running this Python inside a node's namespaces. Returns ``path``."""
    argv = " ".join(shlex.quote(a) for a in [*exec_prefix, sys.executable])
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(f'#!/bin/sh\n# Runs Ansible modules inside a lab node.\nexec {argv} "$@"\n')
    path.chmod(0o755)
    return path


def inventory(workdir: Path, nodes: Sequence[NodeHost], cluster_vars: Mapping[str, Any]) -> dict[str, Any]:
    """The lab inventory: ``localhost`` plus group :data:`NODE_GROUP` of ``nodes``.

    ``cluster_vars`` become group variables of ``all`` (role variables shared by every host).
    """
    hosts: dict[str, Any] = {}
    for node in nodes:
        wrapper = node_interpreter(workdir / "interpreters" / node.name, node.exec_prefix)
        hosts[node.name] = {
            "ansible_connection": "local",
            "ansible_python_interpreter": str(wrapper),
            **node.variables,
        }
    return {
        "all": {
            "vars": dict(cluster_vars),
            "hosts": {
                "localhost": {"ansible_connection": "local", "ansible_python_interpreter": sys.executable}
            },
            "children": {NODE_GROUP: {"hosts": hosts}},
        }
    }


class PlaybookRun:
    """One ``ansible-playbook`` run of :data:`PLAYBOOK` in the background; :meth:`wait` for its summaries.

    ``limit`` restricts the run to a host pattern (``localhost`` or :data:`NODE_GROUP`), so the lab
    can apply the cluster objects while it still builds the nodes. Output goes to
    ``<workdir>/ansible-<name>.log``. With ``cgroups`` (the lab's run trees,
    ``lab_dir.run_cgroups``) the run and everything it forks start in them: ansible's workers leave
    the run's session, so only the trees find them once the lab that started them was killed.
    """

    def __init__(
        self,
        workdir: Path,
        inventory_path: Path,
        *,
        kubeconfig: Path,
        limit: str,
        name: str,
        cgroups: Sequence[Path] = (),
    ) -> None:
        self.cgroups = tuple(cgroups)
        self.log_path = workdir / f"ansible-{name}.log"
        bin_dir = Path(sys.executable).parent
        self.argv = [
            str(bin_dir / "ansible-playbook"),
            "-i",
            str(inventory_path),
            "--limit",
            limit,
            str(PLAYBOOK),
        ]
        # No inherited K8S_AUTH_* (host, context, token...) may point a role at another cluster.
        inherited = {k: v for k, v in os.environ.items() if not k.startswith("K8S_AUTH_")}
        self.env = {
            **inherited,
            "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            "ANSIBLE_COLLECTIONS_PATH": str(collections_path(workdir)),
            "ANSIBLE_LOCAL_TEMP": str(workdir / "tmp" / "local"),
            "ANSIBLE_REMOTE_TEMP": str(workdir / "tmp" / "remote"),
            "ANSIBLE_PIPELINING": "1",
            "ANSIBLE_NOCOLOR": "1",
            "ANSIBLE_FORCE_COLOR": "0",
            "ANSIBLE_STDOUT_CALLBACK": "default",
            "ANSIBLE_RETRY_FILES_ENABLED": "0",
            "ANSIBLE_DEPRECATION_WARNINGS": "0",
            "ANSIBLE_FORKS": "10",
            "K8S_AUTH_KUBECONFIG": str(kubeconfig),
        }
        self.workdir = workdir
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> PlaybookRun:
        """Start ``ansible-playbook`` (returns at once)."""
        with self.log_path.open("w") as log:
            log.write(f"$ {' '.join(self.argv)}\n")
            log.flush()
            # Its own session: a Ctrl-C on the lab reaches only the lab, whose stop kills the run's group.
            self.process = subprocess.Popen(
                cgroups_mod.joined(self.cgroups, self.argv) if self.cgroups else self.argv,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=self.env,
                cwd=self.workdir,
                start_new_session=True,
            )
        return self

    def wait(self, timeout_s: float) -> list[RoleSummary]:
        """Wait for the run; return one summary per role.

        Units: ``timeout_s`` seconds. Raises: :class:`PlaybookFailed` (non-zero exit or timeout,
        the run is killed then) naming the log and its tail.
        """
        assert self.process is not None, "start() first"
        try:
            code: int | None = self.process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.kill()
            code = None
        text = self.log_path.read_text(errors="replace")
        if code != 0:
            tail = "\n".join(text.splitlines()[-25:])
            why = f"timed out after {timeout_s:.0f} s" if code is None else f"exited {code}"
            raise PlaybookFailed(
                f"ansible-playbook {PLAYBOOK.name} {' '.join(self.argv[3:5])} {why}; "
                f"full output in {self.log_path}:\n{tail}"
            )
        return summarize(text)

    def kill(self) -> None:
        """Stop the run and its forked workers if still going (SIGKILL to every descendant, then reap).

        ansible-core's workers leave the run's process group (``WorkerProcess._detach`` calls
        ``setsid``), so the group alone misses a worker still in a task (a role's rollout wait):
        the run is stopped (no new fork), its descendants are listed from ``/proc`` and each is
        killed with its own group (a worker's module process), then the run's group.
        """
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.process.pid, signal.SIGSTOP)
            for pid in descendants(self.process.pid):
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(pid, signal.SIGKILL)  # a worker leads its own group (setsid)
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        cgroups_mod.kill_processes(self.cgroups)  # a worker the walk above missed


def descendants(pid: int) -> list[int]:
    """Every live descendant of ``pid`` (children first), from the parent IDs in ``/proc/<n>/stat``."""
    parents: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        parents.setdefault(int(fields[1]), []).append(int(entry))
    found: list[int] = []
    todo = [pid]
    while todo:
        for child in parents.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def write_inventory(workdir: Path, inventory_doc: Mapping[str, Any]) -> Path:
    """Write ``<workdir>/inventory.yml``; return its path."""
    workdir.mkdir(parents=True, exist_ok=True)
    path = workdir / "inventory.yml"
    path.write_text(yaml.safe_dump(dict(inventory_doc), sort_keys=False))
    return path


def summarize(output: str) -> list[RoleSummary]:
    """Per role of a default-callback ``ansible-playbook`` output: tasks ok/changed/skipped/failed.

    Each (task, host) counts once with its worst result (a loop's items and a retried task fold
    into one); tasks outside a role are ignored. Shapes: roles in first-run order.
    """
    worst: dict[tuple[str, int, str], str] = {}
    hosts: dict[str, list[str]] = {}
    role: str | None = None
    task_no = 0
    for line in output.splitlines():
        if m := _TASK.match(line):
            role = m["role"]
            task_no += 1
            continue
        m = _RESULT.match(line)
        if m is None or role is None:
            continue
        host = m["host"].split(" -> ")[0]  # "lab-node-1 -> localhost" for a delegated task
        key = (role, task_no, host)
        if _STATUS_RANK[m["status"]] >= _STATUS_RANK[worst.get(key, "skipping")]:
            worst[key] = m["status"]
        seen = hosts.setdefault(role, [])
        if host not in seen:
            seen.append(host)
    out = []
    for name, seen in hosts.items():
        statuses = [s for (r, _, _), s in worst.items() if r == name]
        out.append(
            RoleSummary(
                role=name,
                hosts=tuple(seen),
                ok=statuses.count("ok"),
                changed=statuses.count("changed"),
                skipped=statuses.count("skipping"),
                failed=sum(s in ("failed", "fatal") for s in statuses),
            )
        )
    return out


def merge(summaries: Sequence[RoleSummary]) -> list[RoleSummary]:
    """One summary per role: counts added, hosts joined (first-seen order), roles in first-seen order."""
    out: dict[str, RoleSummary] = {}
    for s in summaries:
        prev = out.get(s.role)
        if prev is None:
            out[s.role] = s
            continue
        out[s.role] = RoleSummary(
            role=s.role,
            hosts=(*prev.hosts, *(h for h in s.hosts if h not in prev.hosts)),
            ok=prev.ok + s.ok,
            changed=prev.changed + s.changed,
            skipped=prev.skipped + s.skipped,
            failed=prev.failed + s.failed,
        )
    return list(out.values())
