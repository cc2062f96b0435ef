"""driver.prepare / driver.unprepare on a fake-sysfs node, with a FAKE claim API.

Host parts are real (checkpoint file, CDI files, driver binding through the fake kernel of
``sriov_dra_lab.fakes.fake_sysfs``); only the API server is replaced by ``tests.fakes.claims_api.FakeClaimsApi``
(a fake), so every error path can be forced. The cluster tier runs the same handler in the real
plugin process against the real API server.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from tests.fakes import cdi_files
from tests.fakes import claims_api as fx
from tests.fakes.inventory import StaticInventory

from sriov_dra.core.plugin import cdi_spec
from sriov_dra.driver import claim_context, faults, prepare, unprepare
from sriov_dra.host import atomic_file, cdi, checkpoint, discovery, vf_driver_binding
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kubeletapi import messages
from sriov_dra_lab.fakes import fake_pci, fake_sysfs
from sriov_dra_rules import checkpoint_doc, errors

PF = "0000:03:00.0"
VF0, VF1, VF2 = "0000:03:02.0", "0000:03:02.1", "0000:03:02.2"
DEV0, DEV1, DEV2 = (discovery.device_name(v) for v in (VF0, VF1, VF2))
KIND = cdi_spec.KIND


class Killed(BaseException):
    """Stands for SIGKILL at a fault point: not an Exception, so no handler code catches it."""


@dataclass
class Node:
    """A fake-sysfs node with the plugin's host parts; :meth:`restart` re-reads the checkpoint."""

    root: Path
    api: fx.FakeClaimsApi = field(default_factory=fx.FakeClaimsApi)
    require_netdevice: bool = False
    kill_at: str = ""
    points: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        vfs = (fake_pci.FakeVf(), fake_pci.FakeVf(), fake_pci.FakeVf(driver=None))
        self.fake = fake_sysfs.build(
            self.root / "host", [fake_pci.FakePf(bdf=PF, ifname="enp3s0f0", vfs=vfs)]
        )
        self.kernel = self.fake.kernel()
        self.inventory = StaticInventory(discovery.by_name(discovery.discover(self.fake.sysfs)))
        self.restart()

    def restart(self) -> None:
        """A new plugin process: fresh store loaded from disk, fresh locks."""
        self.store = checkpoint.CheckpointStore(self.root / "state" / checkpoint_doc.CHECKPOINT_FILE_NAME)
        (self.root / "state").mkdir(exist_ok=True)
        self.store.load()
        self.cdi = cdi.CdiSpecs(self.root / "cdi")
        self.cdi.ensure_root()
        self.ctx = claim_context.ClaimContext(
            driver_name=fx.DRIVER,
            node_name=fx.NODE,
            claims=self.api,
            inventory=self.inventory,
            store=self.store,
            binder=vf_driver_binding.DriverBinder(self.fake.sysfs, kernel=self.kernel),
            cdi=self.cdi,
            sysfs=self.fake.sysfs,
            require_netdevice=self.require_netdevice,
            fault=self._fault,
        )
        self.handler = prepare.DraHandler(self.ctx)

    def _fault(self, point: str) -> None:
        self.points.append(point)
        if point == self.kill_at:
            raise Killed(point)

    def driver(self, bdf: str) -> str | None:
        return self.fake.sysfs.current_driver(bdf)

    def spec(self, uid: str) -> dict[str, Any] | None:
        path = self.cdi.claim_spec_path(uid)
        return json.loads(path.read_text()) if path.exists() else None

    def cdi_files(self) -> list[str]:
        return [p.name for p in cdi_files.spec_files(self.cdi.root)]

    def prepare(self, *claims: messages.ClaimRef) -> dict[str, Any]:
        return dict(self.handler.prepare_resources(list(claims)))

    def unprepare(self, *claims: messages.ClaimRef) -> dict[str, Any]:
        return dict(self.handler.unprepare_resources(list(claims)))


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    yield Node(tmp_path)


def ref(uid: str = fx.CLAIM_UID, name: str = "vf-claim") -> messages.ClaimRef:
    return messages.ClaimRef(namespace="ns-a", name=name, uid=uid)


def add_claim(node: Node, results: list[dict[str, Any]], **kwargs: Any) -> messages.ClaimRef:
    claim = fx.resource_claim(results, **kwargs)
    node.api.add(claim)
    meta = claim["metadata"]
    return messages.ClaimRef(namespace=meta["namespace"], name=meta["name"], uid=meta["uid"])


def driver_config(name: str) -> list[dict[str, Any]]:
    return [fx.config(fx.vf_config(driver=name))]


def baseline(node: Node) -> tuple[Any, ...]:
    """Everything prepare may change on the node, for before/after comparisons."""
    return (
        [node.driver(v) for v in (VF0, VF1, VF2)],
        sorted(node.cdi_files()),
        {u: (r.pod_uid, [d.device for d in r.devices]) for u, r in node.store.all_claims().items()},
    )


# --- happy paths --------------------------------------------------------------------------------


def test_prepare_returns_top_level_requests_and_both_cdi_ids_and_records_everything(node: Node) -> None:
    claim = add_claim(
        node, [fx.result(DEV0, "nic/large")], configs=[fx.config(fx.vf_config(netAttachDefName="rail-a"))]
    )
    out = node.prepare(claim)
    assert out == {
        fx.CLAIM_UID: messages.Prepared(
            (
                messages.Device(
                    pool_name=fx.NODE,
                    device_name=DEV0,
                    request_names=("nic",),
                    cdi_device_ids=(f"{KIND}={fx.CLAIM_UID}-{DEV0}", f"{KIND}={fx.POD_UID}"),
                ),
            )
        )
    }
    record = node.store.snapshot_claim(fx.CLAIM_UID)
    assert record is not None and record.pod_uid == fx.POD_UID
    assert (record.devices[0].pci_address, record.devices[0].original_driver) == (VF0, "")
    env = node.spec(fx.CLAIM_UID)["devices"][0]["containerEdits"]["env"]  # type: ignore[index]
    assert f"SRIOVNETWORK_VF_DEVICE_{DEV0.replace('-', '_')}={VF0}" in env
    assert "SRIOVNETWORK_NET_ATTACH_DEF_NAME=rail-a" in env
    pod_spec = json.loads(node.cdi.pod_spec_path(fx.POD_UID).read_text())
    assert pod_spec["devices"][0]["containerEdits"]["env"] == [f"SRIOVNETWORK_PCI_ADDRESSES={VF0}"]
    assert node.kernel.calls == []
    status = node.api.stored("ns-a", "vf-claim")["status"]["devices"]
    (ready,) = status[0].pop("conditions")
    assert status == [
        {
            "driver": fx.DRIVER,
            "pool": fx.NODE,
            "device": DEV0,
            "data": {"apiVersion": f"{fx.DRIVER}/v1alpha1", "kind": "VfConfig", "netAttachDefName": "rail-a"},
        }
    ]
    assert (ready["type"], ready["status"], ready["reason"]) == ("Ready", "True", "Prepared")


def test_named_driver_is_bound_exposed_in_cdi_and_restored_on_unprepare(node: Node) -> None:
    claim = add_claim(node, [fx.result(DEV0)], configs=driver_config("vfio-pci"))
    assert isinstance(node.prepare(claim)[fx.CLAIM_UID], messages.Prepared)
    assert node.driver(VF0) == "vfio-pci"
    record = node.store.snapshot_claim(fx.CLAIM_UID)
    assert record is not None and record.devices[0].original_driver == "iavf"
    edits = node.spec(fx.CLAIM_UID)["devices"][0]["containerEdits"]  # type: ignore[index]
    group = node.fake.sysfs.iommu_group(VF0)
    assert {"path": f"/dev/vfio/{group}", "hostPath": f"/dev/vfio/{group}", "type": "c"} in edits[
        "deviceNodes"
    ]
    assert node.unprepare(claim) == {fx.CLAIM_UID: None}
    assert node.driver(VF0) == "iavf"
    assert node.cdi_files() == []
    assert node.store.all_claims() == {}
    assert node.api.stored("ns-a", "vf-claim")["status"]["devices"] == []


def test_default_driver_rebinds_an_unbound_vf_and_unprepare_leaves_it_unbound_again(node: Node) -> None:
    claim = add_claim(node, [fx.result(DEV2)], configs=driver_config("default"))
    assert isinstance(node.prepare(claim)[fx.CLAIM_UID], messages.Prepared)
    assert node.driver(VF2) == "iavf"
    node.unprepare(claim)
    assert node.driver(VF2) is None


def test_repeated_prepare_returns_the_same_result_without_any_write(node: Node) -> None:
    claim = add_claim(node, [fx.result(DEV0)], configs=driver_config("vfio-pci"))
    first = node.prepare(claim)
    calls, writes = list(node.kernel.calls), node.api.status_writes
    mtimes = {p: p.stat().st_mtime_ns for p in cdi_files.spec_files(node.cdi.root)}
    node.restart()  # also after a plugin restart
    assert node.prepare(claim) == first
    assert node.kernel.calls == calls
    assert node.api.status_writes == writes
    assert {p: p.stat().st_mtime_ns for p in cdi_files.spec_files(node.cdi.root)} == mtimes


def test_unprepare_of_an_unknown_claim_succeeds_and_touches_nothing(node: Node) -> None:
    before = baseline(node)
    assert node.unprepare(ref(fx.CLAIM_UID_2, "never-prepared")) == {fx.CLAIM_UID_2: None}
    assert baseline(node) == before
    assert node.api.gets == 0


def test_pod_cdi_spec_follows_the_pods_claims_until_the_last_is_unprepared(node: Node) -> None:
    a = add_claim(node, [fx.result(DEV0)])
    b = add_claim(node, [fx.result(DEV1)], uid=fx.CLAIM_UID_2, name="vf-claim-2")
    node.prepare(a, b)

    def pod_env() -> list[str]:
        spec = json.loads(node.cdi.pod_spec_path(fx.POD_UID).read_text())
        return list(spec["devices"][0]["containerEdits"]["env"])

    assert pod_env() == [f"SRIOVNETWORK_PCI_ADDRESSES={VF0},{VF1}"]
    node.unprepare(a)
    assert pod_env() == [f"SRIOVNETWORK_PCI_ADDRESSES={VF1}"]
    assert node.store.snapshot_claim(fx.CLAIM_UID_2) is not None
    node.unprepare(b)
    assert not node.cdi.pod_spec_path(fx.POD_UID).exists()


# --- errors are per claim -----------------------------------------------------------------------


def test_a_bad_claim_fails_alone_in_a_batch(node: Node) -> None:
    good = add_claim(node, [fx.result(DEV0)])
    bad = add_claim(
        node, [fx.result(DEV1)], uid=fx.CLAIM_UID_2, name="bad", configs=[fx.config(fx.vf_config(vlan=5))]
    )
    out = node.prepare(bad, good)
    assert isinstance(out[fx.CLAIM_UID], messages.Prepared)
    error = out[fx.CLAIM_UID_2]
    assert isinstance(error, messages.ClaimError)
    assert "ResourceClaim ns-a/bad" in error.message and "vlan: unknown field" in error.message
    assert node.store.snapshot_claim(fx.CLAIM_UID_2) is None


@pytest.mark.parametrize(
    ("results", "kwargs", "needle"),
    [
        ([fx.result(DEV0, pool="node-b")], {}, "another node's pool"),
        ([fx.result(DEV0)], {"uid": fx.CLAIM_UID_2}, "deleted and recreated"),
        ([fx.result("0000-09-00-0")], {}, "is not a VF discovered"),
    ],
    ids=["claim-for-another-node", "replaced-claim", "unknown-device"],
)
def test_claims_that_are_not_for_this_node_change_nothing(
    node: Node, results: list[dict[str, Any]], kwargs: dict[str, Any], needle: str
) -> None:
    claim = fx.resource_claim(results, **kwargs)
    node.api.add(claim)
    before = baseline(node)
    error = node.prepare(ref())[fx.CLAIM_UID]
    assert isinstance(error, messages.ClaimError) and needle in error.message
    assert baseline(node) == before


def test_claim_get_failure_is_reported_for_that_claim(node: Node) -> None:
    claim = add_claim(node, [fx.result(DEV0)])
    node.api.fail_get = kube_errors.Forbidden(
        "get resourceclaims ns-a/vf-claim: HTTP 403 Forbidden", status=403
    )
    error = node.prepare(claim)[fx.CLAIM_UID]
    assert isinstance(error, messages.ClaimError) and "HTTP 403" in error.message


@pytest.mark.parametrize(
    ("device", "requested", "needle"),
    [(DEV2, "", "not bound to any driver"), (DEV0, "vfio-pci", "userspace (DPDK) driver")],
    ids=["unbound-vf", "vfio-requested"],
)
def test_netdevice_required_mode_rejects_vfs_without_a_kernel_netdevice(
    tmp_path: Path, device: str, requested: str, needle: str
) -> None:
    node = Node(tmp_path, require_netdevice=True)
    claim = add_claim(node, [fx.result(device)], configs=driver_config(requested) if requested else ())
    before = baseline(node)
    error = node.prepare(claim)[fx.CLAIM_UID]
    assert isinstance(error, messages.ClaimError) and needle in error.message
    assert baseline(node) == before


def test_failed_bind_of_a_new_claim_rolls_back_every_vf_and_the_record(node: Node) -> None:
    claim = add_claim(node, [fx.result(DEV0), fx.result(DEV1, "vf2")], configs=driver_config("vfio-pci"))
    node.kernel.fail_next("bind", VF1)
    before = baseline(node)
    error = node.prepare(claim)[fx.CLAIM_UID]
    assert isinstance(error, messages.ClaimError) and "bind failed" in error.message
    assert baseline(node) == before


def test_status_write_failure_does_not_fail_the_prepare(node: Node) -> None:
    claim = add_claim(node, [fx.result(DEV0)])
    node.api.fail_status = kube_errors.Forbidden("patch status: HTTP 403", status=403)
    assert isinstance(node.prepare(claim)[fx.CLAIM_UID], messages.Prepared)


def test_status_conflict_keeps_the_entry_another_driver_wrote_meanwhile(node: Node) -> None:
    gpu = {"driver": "gpu.nvidia.com", "pool": fx.NODE, "device": "gpu-0", "data": {"uuid": "GPU-1"}}
    claim = add_claim(node, [fx.result("gpu-0", "gpu", driver="gpu.nvidia.com"), fx.result(DEV0)])
    node.api.conflicts, node.api.intruder = 1, [gpu]
    node.prepare(claim)
    devices = node.api.stored("ns-a", "vf-claim")["status"]["devices"]
    assert [d["driver"] for d in devices] == ["gpu.nvidia.com", fx.DRIVER]
    node.unprepare(claim)
    assert node.api.stored("ns-a", "vf-claim")["status"]["devices"] == [gpu]


@dataclass
class StatusWaitsAtBarrier(fx.FakeClaimsApi):
    """FAKE claim API whose status writes first wait at ``barrier`` (when set) for the host steps."""

    barrier: threading.Barrier | None = None

    def update_device_status(self, namespace: str, name: str, **kwargs: Any) -> bool:
        if self.barrier is not None:
            self.barrier.wait()
        return super().update_device_status(namespace, name, **kwargs)


def test_unprepare_clears_the_claim_status_beside_the_host_steps_and_before_the_record_goes(
    tmp_path: Path,
) -> None:
    # The status clear and the claim CDI spec removal meet at a barrier: run one after the other,
    # the first to arrive waits alone and the barrier breaks (the unprepare then fails).
    node = Node(tmp_path, api=StatusWaitsAtBarrier())
    claim = add_claim(node, [fx.result(DEV0)])
    node.prepare(claim)
    assert [d["driver"] for d in node.api.stored("ns-a", "vf-claim")["status"]["devices"]] == [fx.DRIVER]
    barrier = node.api.barrier = threading.Barrier(2, timeout=10)
    spec = node.cdi.claim_spec_path(fx.CLAIM_UID)
    recorded_at_status: list[bool] = []

    def remove(path: Path) -> bool:
        if path == spec:
            barrier.wait()
        return atomic_file.remove_durable(path)

    def fault(point: str) -> None:
        if point == "unprepare:status":
            recorded_at_status.append(node.store.snapshot_claim(fx.CLAIM_UID) is not None)

    node.ctx = dataclasses.replace(node.ctx, cdi=cdi.CdiSpecs(node.cdi.root, remove=remove), fault=fault)
    assert unprepare.unprepare_claim(node.ctx, claim) is None
    assert node.api.stored("ns-a", "vf-claim")["status"]["devices"] == []
    assert recorded_at_status == [True], "both joined while the record is still there"
    assert node.store.snapshot_claim(fx.CLAIM_UID) is None and node.cdi_files() == []


def test_a_claim_still_recorded_for_another_pod_waits_for_its_release(node: Node) -> None:
    claim = add_claim(node, [fx.result(DEV0)])
    node.prepare(claim)
    node.api.add(fx.resource_claim([fx.result(DEV0)], pod_uid=fx.OTHER_POD_UID, pod_name="next"))
    error = node.prepare(claim)[fx.CLAIM_UID]
    assert isinstance(error, messages.ClaimError)
    assert "ClaimReleaseInProgress" in error.message and fx.OTHER_POD_UID in error.message


def test_a_vf_still_prepared_for_another_claim_is_not_prepared_twice(node: Node) -> None:
    node.prepare(add_claim(node, [fx.result(DEV0)]))
    other = add_claim(node, [fx.result(DEV0)], uid=fx.CLAIM_UID_2, name="other", pod_uid=fx.OTHER_POD_UID)
    error = node.prepare(other)[fx.CLAIM_UID_2]
    assert (
        isinstance(error, messages.ClaimError)
        and "is still prepared for claim ns-a/vf-claim" in error.message
    )


def test_unprepare_that_cannot_restore_a_driver_keeps_record_and_files(node: Node) -> None:
    claim = add_claim(node, [fx.result(DEV0)], configs=driver_config("vfio-pci"))
    node.prepare(claim)
    node.kernel.fail_next("bind", VF0)
    error = node.unprepare(claim)[fx.CLAIM_UID]
    assert (
        isinstance(error, messages.ClaimError) and "cannot restore the original VF drivers" in error.message
    )
    assert node.store.snapshot_claim(fx.CLAIM_UID) is not None
    assert node.spec(fx.CLAIM_UID) is not None
    assert node.unprepare(claim) == {fx.CLAIM_UID: None}
    assert node.driver(VF0) == "iavf" and node.cdi_files() == []


# --- crash safety: a kill between any two steps ---------------------------------------------------


def _prepared_state(tmp_path: Path) -> tuple[Any, ...]:
    clean = Node(tmp_path / "reference")
    clean.prepare(add_claim(clean, [fx.result(DEV0)], configs=driver_config("vfio-pci")))
    return baseline(clean)


@pytest.mark.parametrize("point", faults.PREPARE_POINTS, ids=list(faults.PREPARE_POINTS))
@pytest.mark.parametrize("then", ["prepare", "unprepare"])
def test_kill_during_prepare_leaves_a_state_the_next_call_completes(
    tmp_path: Path, point: str, then: str
) -> None:
    node = Node(tmp_path / "node", kill_at=point)
    pristine = baseline(node)
    claim = add_claim(node, [fx.result(DEV0)], configs=driver_config("vfio-pci"))
    with pytest.raises(Killed):
        prepare.prepare_claim(node.ctx, claim)
    node.kill_at = ""
    node.restart()
    if then == "prepare":
        assert isinstance(node.prepare(claim)[fx.CLAIM_UID], messages.Prepared)
        assert baseline(node) == _prepared_state(tmp_path)
        node.unprepare(claim)
    else:
        assert node.unprepare(claim) == {fx.CLAIM_UID: None}
    assert baseline(node) == pristine


@pytest.mark.parametrize("point", faults.UNPREPARE_POINTS, ids=list(faults.UNPREPARE_POINTS))
def test_kill_during_unprepare_leaves_a_state_the_next_unprepare_completes(
    tmp_path: Path, point: str
) -> None:
    node = Node(tmp_path, kill_at=point)
    pristine = baseline(node)
    claim = add_claim(node, [fx.result(DEV0)], configs=driver_config("vfio-pci"))
    node.prepare(claim)
    with pytest.raises(Killed):
        unprepare.unprepare_claim(node.ctx, claim)
    node.kill_at = ""
    node.restart()
    assert node.unprepare(claim) == {fx.CLAIM_UID: None}
    assert baseline(node) == pristine


POWER_LOSS = {
    "lost": lambda p: p.unlink(),
    "emptied": lambda p: p.write_bytes(b""),
    "torn": lambda p: p.write_bytes(p.read_bytes()[: len(p.read_bytes()) // 2]),
}
"""What a CDI spec written without fsync (``host.cdi``) can look like after a power loss."""


@pytest.mark.parametrize("spec", ["claim", "pod"])
@pytest.mark.parametrize("damage", list(POWER_LOSS), ids=list(POWER_LOSS))
def test_an_unsynced_cdi_spec_lost_by_a_power_loss_is_rebuilt_by_the_next_prepare(
    node: Node, spec: str, damage: str
) -> None:
    claim = add_claim(node, [fx.result(DEV0), fx.result(DEV1, "nic-1")])
    first = node.prepare(claim)
    paths = [node.cdi.claim_spec_path(fx.CLAIM_UID), node.cdi.pod_spec_path(fx.POD_UID)]
    written = {p: p.read_bytes() for p in paths}
    POWER_LOSS[damage](paths[0] if spec == "claim" else paths[1])
    node.restart()  # the reboot: the checkpoint record is durable, the kubelet prepares again
    assert node.prepare(claim) == first
    assert {p: p.read_bytes() for p in paths} == written


def test_fault_points_are_reached_in_the_documented_order(node: Node) -> None:
    claim = add_claim(node, [fx.result(DEV0)])
    node.prepare(claim)
    node.unprepare(claim)
    assert tuple(node.points) == faults.PREPARE_POINTS + faults.UNPREPARE_POINTS


# --- concurrency ----------------------------------------------------------------------------------


def test_concurrent_prepares_of_one_pods_claims_both_land_in_the_pod_cdi_spec(node: Node) -> None:
    a = add_claim(node, [fx.result(DEV0)])
    b = add_claim(node, [fx.result(DEV1)], uid=fx.CLAIM_UID_2, name="vf-claim-2")
    barrier = threading.Barrier(2)
    results: dict[str, Any] = {}

    def run(claim: messages.ClaimRef) -> None:
        barrier.wait()
        results.update(node.prepare(claim))

    threads = [threading.Thread(target=run, args=(c,)) for c in (a, b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert all(isinstance(v, messages.Prepared) for v in results.values()) and len(results) == 2
    env = json.loads(node.cdi.pod_spec_path(fx.POD_UID).read_text())["devices"][0]["containerEdits"]["env"]
    assert env == [f"SRIOVNETWORK_PCI_ADDRESSES={VF0},{VF1}"]
    assert node.ctx.claim_locks.active() == 0 and node.ctx.pod_locks.active() == 0


def test_describe_uses_the_reason_of_our_errors_and_the_class_name_otherwise() -> None:
    assert prepare.describe(errors.InvalidSpec("x", reason=errors.Reason.INVALID_CLAIM))[1] == "InvalidClaim"
    assert prepare.describe(OSError("disk full")) == ("disk full", "OSError")


# --- a stale prepare overtaken by the kubelet's unprepare (kubernetes-sigs/dra-driver-nvidia-gpu #1162) --


@dataclass
class FirstGetBlocks(fx.FakeClaimsApi):
    """FAKE claim API whose first GET waits until the test releases it (a slow read under load)."""

    entered: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    blocked_once: bool = False

    def get(self, namespace: str, name: str) -> dict[str, Any]:
        if not self.blocked_once:
            self.blocked_once = True
            self.entered.set()
            assert self.release.wait(30), "the test never released the first GET"
        return super().get(namespace, name)


def test_a_prepare_whose_claim_was_unprepared_while_it_read_the_claim_leaves_nothing(tmp_path: Path) -> None:
    node = Node(tmp_path, api=FirstGetBlocks())
    claim = add_claim(node, [fx.result(DEV0)], configs=driver_config("vfio-pci"))
    before = baseline(node)
    answers: dict[str, Any] = {}
    stale = threading.Thread(target=lambda: answers.update(node.prepare(claim)))
    stale.start()
    assert isinstance(node.api, FirstGetBlocks) and node.api.entered.wait(10)
    # the kubelet's deadline passed, the Pod was deleted: its unprepare finds no record, succeeds
    assert node.unprepare(claim) == {claim.uid: None}
    node.api.release.set()
    stale.join(10)
    assert not stale.is_alive()
    answer = answers[claim.uid]
    assert isinstance(answer, messages.ClaimError)
    assert "NodeUnprepareResources" in answer.message and "nothing was prepared" in answer.message
    assert baseline(node) == before  # no record, no CDI file, the VF's driver untouched
    # a later prepare of the same claim UID (a new Pod given the claim) is not blocked
    assert isinstance(node.prepare(claim)[claim.uid], messages.Prepared)
    assert node.unprepare(claim) == {claim.uid: None}
    assert baseline(node) == before
