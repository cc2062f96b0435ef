"""Fakes of the guard daemon's seams (``guard.cni_hooks``): clock, API reads, Multus, netns, metadata files.

Each implements the Protocol the hooks declare and records what it was asked, so a test can prove
what happened (e.g. that Multus never ran, or ran DEL after a failed verification).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from sriov_dra.guard import multus, shim
from sriov_dra.kube import errors as kube_errors


class FakeClock:
    """Monotonic time that moves only when told (``sleep`` advances it)."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@dataclass
class FakeApi:
    """Live reads served from dicts; ``failures`` scripts errors for the next reads of a key.

    ``read_s`` is how far each read moves ``clock`` (a slow API server).
    """

    clock: FakeClock
    objects: dict[tuple[str, str, str], dict[str, Any]] = field(default_factory=dict)
    failures: dict[tuple[str, str, str], list[Exception]] = field(default_factory=dict)
    reads: list[tuple[str, str, str, float]] = field(default_factory=list)
    read_s: float = 0.0
    on_read: Callable[[str, str, str], None] | None = None

    def put(self, kind: str, obj: Mapping[str, Any]) -> None:
        meta = obj["metadata"]
        self.objects[(kind, meta["namespace"], meta["name"])] = copy.deepcopy(dict(obj))

    def _get(self, kind: str, namespace: str, name: str, timeout_s: float) -> dict[str, Any]:
        self.reads.append((kind, namespace, name, timeout_s))
        self.clock.now += self.read_s
        if self.on_read is not None:
            self.on_read(kind, namespace, name)
        pending = self.failures.get((kind, namespace, name))
        if pending:
            raise pending.pop(0)
        try:
            return copy.deepcopy(self.objects[(kind, namespace, name)])
        except KeyError:
            raise kube_errors.NotFound(
                f"get {kind} {namespace}/{name}: HTTP 404 NotFound", status=404
            ) from None

    def get_pod(self, namespace: str, name: str, *, timeout_s: float) -> dict[str, Any]:
        return self._get("pods", namespace, name, timeout_s)

    def get_nad(self, namespace: str, name: str, *, timeout_s: float) -> dict[str, Any]:
        return self._get("network-attachment-definitions", namespace, name, timeout_s)


@dataclass
class Call:
    """One Multus run the fake runner was asked for."""

    command: str
    env: dict[str, str]
    config: dict[str, Any]
    timeout_s: float


@dataclass
class FakeRunner:
    """Multus stand-in: records calls, answers from ``answers`` (per command) or succeeds.

    ``effect`` runs on each call (e.g. to make interfaces appear as the real Multus would).
    """

    clock: FakeClock
    answers: dict[str, list[multus.MultusRun]] = field(default_factory=dict)
    calls: list[Call] = field(default_factory=list)
    duration_s: float = 0.2
    effect: Callable[[str], None] | None = None
    unavailable: bool = False

    def run(
        self, conf: shim.GuardConf, env: Mapping[str, str], *, command: str, timeout_s: float
    ) -> multus.MultusRun:
        if self.unavailable:
            raise multus.MultusUnavailable("multus not found in CNI_PATH ['/opt/cni/bin']")
        self.calls.append(
            Call(command, dict(env), shim.multus_config(conf, teardown=command != "ADD"), timeout_s)
        )
        self.clock.now += self.duration_s
        if self.effect is not None:
            self.effect(command)
        queued = self.answers.get(command)
        if queued:
            return queued.pop(0)
        stdout = '{"cniVersion":"1.0.0","interfaces":[{"name":"eth0"}]}' if command == "ADD" else ""
        return multus.MultusRun(
            command=command, exit_code=0, stdout=stdout, stderr="", duration_s=self.duration_s
        )


@dataclass(frozen=True)
class FakeLink:
    name: str
    parent_bus: str | None = None
    parent_device: str | None = None
    mac: str | None = None
    addresses: tuple[str, ...] = ()


@dataclass
class FakeNetns:
    """Interfaces per netns path; reads are recorded."""

    links: dict[str, list[FakeLink]] = field(default_factory=dict)
    reads: list[str] = field(default_factory=list)

    def __call__(self, path: str) -> list[FakeLink]:
        self.reads.append(path)
        if path not in self.links:
            raise FileNotFoundError(f"network namespace {path} does not exist")
        return list(self.links[path])


@dataclass
class FakeMetadataFiles:
    """FAKE of ``host.pod_metadata_files.PodMetadataFiles``: documents in memory, keyed by path.

    ``fail`` makes every call raise it (a file system fault at the boundary).
    """

    docs: dict[Path, dict[str, Any]] = field(default_factory=dict)
    fail: Exception | None = None

    def claim_files(self, namespace: str, claim_uids: Collection[str]) -> list[Path]:
        if self.fail is not None:
            raise self.fail
        return sorted(
            p
            for p, d in self.docs.items()
            if p.parts[-3].startswith(f"{namespace}_") and d["metadata"]["uid"] in claim_uids
        )

    def update(self, path: Path, edit: Callable[[Mapping[str, object]], dict[str, Any] | None]) -> bool:
        if self.fail is not None:
            raise self.fail
        new = edit(self.docs[path])
        if new is None:
            return False
        self.docs[path] = new
        return True
