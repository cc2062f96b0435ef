"""A FAKE node for auto-attach tests: fake sysfs host, fake API, real checkpoint, real handler.

**Test harness.** :class:`ManagedNode` runs the real ``driver.prepare``/``driver.unprepare``
handler with ``ClaimContext.managed`` set (the ``--multus-auto-attach`` path) on a fake-sysfs node
(two PFs under two PCIe roots, rail A and rail B), with the FAKE claim API of
``tests.fakes.claims_api`` and the FAKE Pod/NAD API of ``tests.fakes.kube_objects``. The
checkpoint is the real file store; its write can be made to fail or to "crash" before or after
the file is replaced. :meth:`ManagedNode.restart` is a new plugin process (memory lost, state
re-read from disk). The device snapshot is a FAKE of the policy controller's, with eligibility
and the per-rail ``netAttachDefName`` attribute set by the test.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.fakes import cdi_files, faulty_checkpoint
from tests.fakes import claims_api as fx
from tests.fakes import kube_objects as ko
from tests.fakes.inventory import StaticInventory

from sriov_dra.core import attributes
from sriov_dra.driver import claim_context, locks, prepare
from sriov_dra.driver.managed import lock_order, observe, seams, service
from sriov_dra.host import cdi, checkpoint, checkpoint_files, discovery, vf_driver_binding
from sriov_dra.kubeletapi import messages
from sriov_dra_lab.fakes import fake_pci, fake_sysfs
from sriov_dra_rules import checkpoint_doc, names

NS = "ns-a"
NODE_UID = "0a0a0a0a-0000-4000-8000-00000000000a"
PF_A, PF_B = "0000:03:00.0", "0000:81:00.0"
VF_A0, VF_A1 = fake_pci.vf_address(PF_A, 0), fake_pci.vf_address(PF_A, 1)
VF_B0, VF_B1 = fake_pci.vf_address(PF_B, 0), fake_pci.vf_address(PF_B, 1)
DEV_A0, DEV_A1, DEV_B0, DEV_B1 = (discovery.device_name(v) for v in (VF_A0, VF_A1, VF_B0, VF_B1))


def sriov_source(name: str, cni_name: str, cidr: str) -> dict[str, Any]:
    """A template NAD of the gpu-nic-pairs shape (no deviceID, no resourceName)."""
    config = {
        "cniVersion": "1.0.0",
        "name": cni_name,
        "type": "sriov",
        "ipam": {"type": "whereabouts", "network_name": cni_name, "range": cidr},
    }
    return {
        "apiVersion": "k8s.cni.cncf.io/v1",
        "kind": "NetworkAttachmentDefinition",
        "metadata": {"name": name, "namespace": NS},
        "spec": {"config": json.dumps(config, indent=2)},
    }


def pod_json(
    name: str, uid: str, claims: Sequence[tuple[str, str, bool]], *, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    """A scheduled Pod; ``claims`` are ``(alias, claim name, from template)``."""
    spec_claims, statuses = [], []
    for alias, claim, template in claims:
        if template:
            spec_claims.append({"name": alias, "resourceClaimTemplateName": "tmpl"})
            statuses.append({"name": alias, "resourceClaimName": claim})
        else:
            spec_claims.append({"name": alias, "resourceClaimName": claim})
    meta: dict[str, Any] = {"name": name, "namespace": NS, "uid": uid}
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": meta,
        "spec": {"nodeName": fx.NODE, "resourceClaims": spec_claims, "containers": [{"name": "c"}]},
        "status": {"resourceClaimStatuses": statuses},
    }


@dataclass
class FakeDeviceView:
    """FAKE policy snapshot: full inventory, an eligible set, published attributes."""

    inventory: dict[str, discovery.DiscoveredVf]
    eligible: set[str]
    references: dict[str, str]

    def is_eligible(self, device: str) -> bool:
        return device in self.eligible

    def attributes_of(self, device: str) -> dict[str, attributes.AttributeValue] | None:
        if device not in self.eligible:
            return None
        out = dict(self.inventory[device].attributes)
        if device in self.references:
            out[names.ATTR_NET_ATTACH_DEF_NAME] = attributes.string_value(self.references[device])
        return out


@dataclass
class FakeDevices:
    """FAKE ``DeviceSource``: hands out the current :class:`FakeDeviceView`."""

    view: FakeDeviceView

    def snapshot(self) -> FakeDeviceView:
        return self.view


@dataclass
class ManagedNode:
    """The harness (see the module docstring)."""

    root: Path
    kube: ko.FakeKube = field(default_factory=ko.FakeKube)
    claims: fx.FakeClaimsApi = field(default_factory=fx.FakeClaimsApi)
    clock: ko.FakeClock = field(default_factory=ko.FakeClock)
    events: ko.RecordedEvents = field(default_factory=ko.RecordedEvents)
    store_faults: list[tuple[str, BaseException, int]] = field(default_factory=list)
    kill_at: str = ""
    writes: int = 0
    worker_host_releases: int = 0
    lock_order: list[tuple[str, str]] = field(default_factory=list)
    points: list[str] = field(default_factory=list)
    live_node_uid: str | None = NODE_UID
    """The Node's UID as the API server has it now (``None``: deleted); the plugin recorded NODE_UID."""
    node_uid_reads: int = 0
    cdi_write_error: BaseException | None = None
    """Raised by every CDI spec write while set (a full or read-only CDI directory)."""
    on_write: Callable[[bytes], None] | None = None
    """Called with the bytes of every checkpoint write once they are durable (side-effect order)."""

    def __post_init__(self) -> None:
        pfs = fake_pci.two_root_pfs(vfs_per_pf=2)
        self.fake = fake_sysfs.build(self.root / "host", list(pfs))
        self.kernel = self.fake.kernel()
        found = discovery.by_name(discovery.discover(self.fake.sysfs))
        self.devices = FakeDevices(
            FakeDeviceView(
                inventory=dict(found),
                eligible=set(found),
                references={
                    DEV_A0: "rail-a-net",
                    DEV_A1: "rail-a-net",
                    DEV_B0: "rail-b-net",
                    DEV_B1: "rail-b-net",
                },
            )
        )
        self.inventory = StaticInventory(found)
        self.node = seams.NodeIdentity(fx.NODE, NODE_UID)  # type: ignore[arg-type]
        self.kube.add_nad(sriov_source("rail-a-net", "ai-workloads-rail-a", "192.0.2.0/24"))
        self.kube.add_nad(sriov_source("rail-b-net", "ai-workloads-rail-b", "198.51.100.0/24"))
        (self.root / "state").mkdir(exist_ok=True)
        self.restart()

    # ------------------------------------------------------------------ process
    def fail_write(self, exc: BaseException, *, when: str = "before", skip: int = 0) -> None:
        """Make checkpoint write number ``skip + 1`` from now raise ``exc`` before or after the file
        is replaced (``after`` = the write is durable but the caller never learns it)."""
        self.store_faults.append((when, exc, skip))

    def _take(self, when: str) -> BaseException | None:
        for i, (w, exc, skip) in enumerate(self.store_faults):
            if w == when:
                if skip:
                    self.store_faults[i] = (w, exc, skip - 1)
                    return None
                del self.store_faults[i]
                return exc
        return None

    def _write(self, files: checkpoint_files.CheckpointFiles, data: bytes) -> None:
        self.writes += 1
        exc = self._take("before")
        if exc is not None:
            self._take("after")  # keep before/after counts aligned for this write
            raise exc
        checkpoint_files.CheckpointFiles.write(files, data)
        if self.on_write is not None:
            self.on_write(data)
        exc = self._take("after")
        if exc is not None:
            raise exc

    def replace_disk_checkpoint(self, data: bytes) -> None:
        """Make ``data`` all the disk holds (what a power cut left), for the next :meth:`restart`."""
        (self.root / "state" / checkpoint_doc.SLOTS_FILE_NAME).unlink(missing_ok=True)
        (self.root / "state" / checkpoint_doc.CHECKPOINT_FILE_NAME).write_bytes(data)

    def _fault(self, point: str) -> None:
        self.points.append(point)
        if point == self.kill_at:
            raise ko.Crash(point)

    def _cdi_write(self, path: Path, data: bytes) -> None:
        if self.cdi_write_error is not None:
            raise self.cdi_write_error
        cdi.default_write(path, data)

    def _read_node_uid(self) -> str | None:
        self.node_uid_reads += 1
        return self.live_node_uid

    def restart(self) -> None:
        """A new plugin process: checkpoint re-read from disk, fresh locks and in-memory state."""
        path = self.root / "state" / checkpoint_doc.CHECKPOINT_FILE_NAME
        self.store = checkpoint.CheckpointStore(
            path, files=faulty_checkpoint.FaultyCheckpointFiles(path, self._write)
        )
        self.store.load()
        self.cdi = cdi.CdiSpecs(self.root / "cdi", write=self._cdi_write)
        self.cdi.ensure_root()
        claim_locks, pod_locks = locks.KeyedLocks("claim"), locks.KeyedLocks("pod")
        self.metrics = observe.ManagedMetrics()
        self.attach = service.ManagedAttach(
            node=self.node,
            devices=self.devices,
            pods=ko.PodView(self.kube),
            nads=ko.NadView(self.kube),
            claims=self.claims,
            store=self.store,
            locks=lock_order.OperationLocks(
                claim_locks, pod_locks, observer=lambda k, v: self.lock_order.append((k, v))
            ),
            clock=self.clock,
            reporter=observe.Reporter(self.events, self.metrics),
            node_uid=self._read_node_uid,
        )
        self.ctx = claim_context.ClaimContext(
            driver_name=fx.DRIVER,
            node_name=fx.NODE,
            claims=self.claims,
            inventory=self.inventory,
            store=self.store,
            binder=vf_driver_binding.DriverBinder(self.fake.sysfs, kernel=self.kernel),
            cdi=self.cdi,
            sysfs=self.fake.sysfs,
            require_netdevice=True,
            claim_locks=claim_locks,
            pod_locks=pod_locks,
            managed=self.attach,
            fault=self._fault,
        )
        self.handler = prepare.DraHandler(self.ctx)

    # ------------------------------------------------------------------ objects
    def add_consumer(
        self,
        devices: Sequence[tuple[str, str]],
        *,
        pod: str = "consumer",
        pod_uid: str = fx.POD_UID,
        claim: str = "vf-claim",
        claim_uid: str = fx.CLAIM_UID,
        alias: str = "devices",
        template: bool = True,
        configs: Sequence[dict[str, Any]] = (),
        annotations: dict[str, str] | None = None,
        add_pod: bool = True,
    ) -> messages.ClaimRef:
        """A claim allocated ``devices`` (``(request, device)``) reserved for a new Pod."""
        body = fx.resource_claim(
            [fx.result(dev, req) for req, dev in devices],
            uid=claim_uid,
            name=claim,
            namespace=NS,
            pod_uid=pod_uid,
            pod_name=pod,
            configs=configs,
        )
        if template:
            body["metadata"]["ownerReferences"] = [
                {"apiVersion": "v1", "kind": "Pod", "name": pod, "uid": pod_uid, "controller": True}
            ]
        self.claims.add(body)
        if add_pod:
            self.kube.add_pod(pod_json(pod, pod_uid, [(alias, claim, template)], annotations=annotations))
        return messages.ClaimRef(namespace=NS, name=claim, uid=claim_uid)

    # ------------------------------------------------------------------ calls
    def prepare(self, ref: messages.ClaimRef) -> Any:
        return self.handler.prepare_resources([ref])[ref.uid]

    def unprepare(self, ref: messages.ClaimRef) -> Any:
        return self.handler.unprepare_resources([ref])[ref.uid]

    def worker(self, **settings: Any) -> Any:
        from sriov_dra.driver import unprepare
        from sriov_dra.driver.managed import repair

        def host_release(record: Any) -> None:
            self.worker_host_releases += 1
            unprepare.release_host(self.ctx, record)

        return repair.RepairWorker(
            attach=self.attach,
            host_release=host_release,
            host_prepare=lambda record: prepare.ensure_host(self.ctx, record),
            clear_status=lambda record: unprepare.clear_status(self.ctx, record),
            settings=repair.RepairSettings(**settings),
        )

    # ------------------------------------------------------------------ observations
    def phases(self) -> dict[str, list[str]]:
        return {u: [b.phase.value for b in r.managed_bindings()] for u, r in self.store.all_claims().items()}

    def shadow_state(self) -> list[tuple[str, bool, bool]]:
        """(name, protected, terminating) of every shadow."""
        return [
            (
                n["metadata"]["name"],
                names.FINALIZER_ATTACHMENT_PROTECTION in (n["metadata"].get("finalizers") or []),
                bool(n["metadata"].get("deletionTimestamp")),
            )
            for n in self.kube.shadows()
        ]

    def pod_annotations(self, pod: str = "consumer") -> dict[str, str]:
        return dict(self.kube.pod(NS, pod)["metadata"].get("annotations") or {})

    def selected(self, pod: str = "consumer") -> list[tuple[str, str]]:
        """(shadow name, interface) of every network selection of the Pod."""
        raw = self.pod_annotations(pod).get(names.NETWORKS_ANNOTATION)
        return [(s["name"], s["interface"]) for s in json.loads(raw)] if raw else []

    def drivers(self) -> list[str | None]:
        return [self.fake.sysfs.current_driver(v) for v in (VF_A0, VF_A1, VF_B0, VF_B1)]

    def cdi_files(self) -> list[str]:
        return sorted(p.name for p in cdi_files.spec_files(self.cdi.root))

    def snapshot(self) -> tuple[Any, ...]:
        """Everything observable: checkpoint phases and UIDs, shadows, Pod annotations, host."""
        records = {
            u: [(b.phase.value, b.shadow_name, b.shadow_uid, b.interface) for b in r.managed_bindings()]
            for u, r in self.store.all_claims().items()
        }
        shadows = [
            (n["metadata"]["name"], n["metadata"]["uid"], tuple(n["metadata"].get("finalizers") or []))
            for n in self.kube.shadows()
        ]
        pods = {k: v["metadata"].get("annotations") for k, v in sorted(self.kube.pods.items())}
        return records, shadows, pods, self.drivers(), self.cdi_files()


def convergence_problems(node: ManagedNode, *, pod: str = "consumer") -> list[str]:
    """Everything that differs from a fully prepared auto-attach state (empty list = converged).

    Checked: every binding ``Ready`` with a recorded shadow UID; that shadow live, protected,
    not terminating, exactly the expected object; the Pod selecting each binding exactly once
    with its interface; the registry recording the same UIDs; VFs on their kernel driver; the
    claim and Pod CDI specs present.
    """
    from sriov_dra.core import registry
    from sriov_dra.core.plugin import shadow_object
    from sriov_dra.driver.managed import shadow_lifecycle

    out: list[str] = []
    live = {n["metadata"]["name"]: n for n in node.kube.shadows()}
    selected = node.selected(pod)
    reg_text = node.pod_annotations(pod).get(names.MANAGED_NETWORKS_ANNOTATION)
    reg = {e.attachment_id: e for e in registry.decode_registry(reg_text).entries} if reg_text else {}
    expected_names = set()
    for record in node.store.all_claims().values():
        for target in shadow_lifecycle.targets(record):
            b = target.binding
            expected_names.add(b.shadow_name)
            if b.phase.value != "Ready":
                out.append(f"{b.shadow_name}: phase {b.phase.value}")
            obj = live.get(b.shadow_name)
            if obj is None:
                out.append(f"{b.shadow_name}: missing")
                continue
            if obj["metadata"]["uid"] != b.shadow_uid:
                out.append(f"{b.shadow_name}: uid {obj['metadata']['uid']} != recorded {b.shadow_uid!r}")
            problems = shadow_object.verify_shadow_matches(
                obj, shadow_lifecycle.expected_shadow(target, pod_name=pod)
            )
            out.extend(f"{b.shadow_name}: {p}" for p in problems)
            if selected.count((b.shadow_name, b.interface)) != 1:
                out.append(
                    f"{b.shadow_name}@{b.interface}: selected {selected.count((b.shadow_name, b.interface))} times"
                )
            entry = reg.get(b.attachment_id)
            if entry is None or entry.uid != b.shadow_uid:
                out.append(f"{b.shadow_name}: registry entry {entry}")
    extra = sorted(set(live) - expected_names)
    if extra:
        out.append(f"unexpected shadows {extra}")
    if node.drivers() != ["iavf"] * 4:
        out.append(f"drivers {node.drivers()}")
    return out


def clean_problems(node: ManagedNode, *, pod: str | None = "consumer") -> list[str]:
    """Everything left after a full release (empty list = clean)."""
    out: list[str] = []
    if node.store.all_claims():
        out.append(f"records {node.phases()}")
    if node.kube.shadows():
        out.append(f"shadows {node.shadow_state()}")
    if pod is not None and (NS, pod) in node.kube.pods:
        ann = node.pod_annotations(pod)
        if names.MANAGED_NETWORKS_ANNOTATION in ann or names.NETWORKS_ANNOTATION in ann:
            out.append(f"pod annotations {ann}")
    if node.cdi_files():
        out.append(f"cdi {node.cdi_files()}")
    if node.drivers() != ["iavf"] * 4:
        out.append(f"drivers {node.drivers()}")
    if our_status_entries(node):
        out.append(f"claim status.devices {our_status_entries(node)}")
    return out


def our_status_entries(node: ManagedNode) -> list[dict[str, Any]]:
    """This driver's ``status.devices`` entries on every stored claim."""
    return [
        entry
        for claim in node.claims.claims.values()
        for entry in (claim.get("status") or {}).get("devices") or []
        if entry.get("driver") == fx.DRIVER
    ]
