"""The device health monitor and the health stream (``driver.device_health_monitor``, ``dra_service.HealthServicer``)."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable, Mapping
from typing import NoReturn

import pytest

from sriov_dra.core import device_health as dh
from sriov_dra.core import identities
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.core.plugin import device_taints
from sriov_dra.driver import device_health_monitor, health_taints
from sriov_dra.host import discovery
from sriov_dra.host import sysfs as sysfs_mod
from sriov_dra.kubeletapi import dra_service, messages
from sriov_dra.kubeletapi import drahealth_v1alpha1_pb2 as pb

UP = dh.PfLink(True, True, "up")
NO_CARRIER = dh.PfLink(True, False, "lowerlayerdown")


def vf(name: str, pci: str, driver: str | None = "iavf") -> discovery.DiscoveredVf:
    return discovery.DiscoveredVf(
        name=name,
        pci_address=identities.PciAddress(pci),
        vf_id=0,
        vendor="8086",
        device_id="1889",
        pf_device_id="1592",
        pf_name="ens1f0",
        pf_pci_address=identities.PciAddress("0000:03:00.0"),
        eswitch_mode=sysfs_mod.EswitchMode.LEGACY,
        link_type=sysfs_mod.LinkType.ETHERNET,
        numa_node=0,
        pcie_root="pci0000:00",
        rdma_capable=False,
        driver=driver,
        netdev=None,
        driver_override=None,
        attributes={},
    )


INVENTORY = {"a": vf("a", "0000:03:02.0"), "b": vf("b", "0000:03:02.1"), "c": vf("c", "0000:03:02.2", None)}


def record(device: str, driver: str, pool: str = "node-1") -> model.ClaimRecord:
    return model.ClaimRecord(
        claim_uid=identities.ClaimUid("uid-" + device),
        namespace="ns",
        name="claim",
        pod_uid=identities.PodUid("pod"),
        devices=(
            model.PreparedDevice(
                request_names=("vf",),
                pool=pool,
                device=device,
                pci_address=INVENTORY[device].pci_address,
                original_driver="",
                vf_config={"driver": driver},
                interface_name="net1",
                cdi_device_ids=(),
                net_attach_def_config="",
            ),
        ),
    )


def test_watch_targets_are_published_and_prepared_devices_with_the_driver_each_must_have() -> None:
    targets = device_health_monitor.watch_targets(
        "node-1", INVENTORY, published=["a"], claims=[record("b", "vfio-pci"), record("c", "", pool="other")]
    )
    assert [(t.device, t.expect) for t in targets] == [
        ("a", dh.DriverExpectation("iavf", bound=True)),
        ("b", dh.DriverExpectation("vfio-pci", bound=True)),
    ]
    assert {(t.pf_pci_address, t.pf_name) for t in targets} == {("0000:03:00.0", "ens1f0")}


class FakeReader:
    """Answers every target with ``self.link`` as its PF's link; ``fail`` makes a read raise."""

    def __init__(self) -> None:
        self.link: dh.PfLink | None = UP
        self.fail: Exception | None = None

    def read(self, targets: Iterable[dh.HealthTarget]) -> Mapping[str, dh.VfReading]:
        if self.fail is not None:
            raise self.fail
        return {t.device: dh.VfReading(True, "iavf", True, "ens1f0", self.link) for t in targets}


def monitor(
    reader: FakeReader, on_change: Callable[[], None] | None = None
) -> device_health_monitor.DeviceHealthMonitor:
    return device_health_monitor.DeviceHealthMonitor(
        targets=lambda: device_health_monitor.watch_targets("node-1", INVENTORY, ["a"], []),
        reader=reader,
        on_change=on_change,
    )


def test_monitor_logs_each_transition_once_with_device_pf_and_reason(
    caplog: pytest.LogCaptureFixture,
) -> None:
    reader, changes = FakeReader(), []
    mon = monitor(reader, on_change=lambda: changes.append(1))
    caplog.set_level(logging.INFO, logger=device_health_monitor.LOG.name)
    assert mon.poll() == ()  # a healthy start is not a transition
    reader.link = NO_CARRIER
    (down,) = mon.poll()
    assert mon.poll() == ()
    reader.link = UP
    (up,) = mon.poll()
    assert (down.after.health, up.after.health) == (dh.Health.UNHEALTHY, dh.Health.HEALTHY)
    logged = [r for r in caplog.records if r.getMessage() == "device health changed"]
    assert [(r.levelname, r.device, r.pf, r.outcome) for r in logged] == [  # type: ignore[attr-defined]
        ("WARNING", "a", "ens1f0", "HEALTHY -> UNHEALTHY"),
        ("INFO", "a", "ens1f0", "UNHEALTHY -> HEALTHY"),
    ]
    assert "PF ens1f0 has no carrier (operstate lowerlayerdown)" in logged[0].reason  # type: ignore[attr-defined]
    assert len(changes) == 3, "on_change after the first poll and after each change, not on a quiet poll"


def test_a_failed_poll_makes_every_watched_device_unknown_with_the_error() -> None:
    reader = FakeReader()
    mon = monitor(reader)
    mon.poll()
    reader.fail = OSError("sysfs went away")
    (change,) = mon.poll()
    assert change.after.health is dh.Health.UNKNOWN
    (report,) = mon.reports()
    assert (report.device, report.health) == (messages.DeviceId("node-1", "a"), dh.Health.UNKNOWN)
    assert "sysfs went away" in report.message


class Context:
    """The part of a gRPC servicer context the health stream uses; ``cancel`` ends the RPC."""

    def __init__(self) -> None:
        self.callbacks: list[Callable[[], None]] = []

    def add_callback(self, callback: Callable[[], None]) -> bool:
        self.callbacks.append(callback)
        return True

    def abort(self, code: object, details: str) -> NoReturn:
        raise AssertionError(f"aborted: {code} {details}")

    def cancel(self) -> None:
        for callback in self.callbacks:
            callback()


def test_servicer_streams_a_transition_when_the_monitor_notifies_it() -> None:
    reader = FakeReader()
    holder: list[dra_service.HealthServicer] = []
    mon = monitor(reader, on_change=lambda: holder and holder[0].notify())
    mon.poll()
    servicer = dra_service.HealthServicer(mon.reports, interval_s=3600, clock=lambda: 1_750_000_000.0)
    holder.append(servicer)
    context = Context()
    stream = servicer.NodeWatchResources(pb.NodeWatchResourcesRequest(), context)
    first = next(stream)
    assert [(d.device.device_name, d.health) for d in first.devices] == [("a", pb.HEALTHY)]
    got: list[pb.NodeWatchResourcesResponse] = []
    reader_thread = threading.Thread(target=lambda: got.append(next(stream)), daemon=True)
    reader_thread.start()
    reader.link = NO_CARRIER
    mon.poll()
    reader_thread.join(10)
    assert not reader_thread.is_alive(), "the change was streamed before the hour-long interval"
    (entry,) = got[0].devices
    assert entry.health == pb.UNHEALTHY
    assert entry.message == "PF ens1f0 has no carrier (operstate lowerlayerdown)"
    assert entry.last_updated_time == 1_750_000_000
    context.cancel()
    assert list(stream) == [], "a cancelled stream ends"


def test_every_poll_steps_the_health_taints_which_ask_for_a_sync_only_when_a_taint_comes_or_goes() -> None:
    now = [0.0]
    syncs: list[int] = []
    taints = health_taints.HealthTaints(
        driver="drv.example.com",
        effect=device_taints.Effect.NO_EXECUTE,
        clear_after_s=10.0,
        on_change=lambda: syncs.append(1),
        clock=lambda: now[0],
    )
    reader = FakeReader()
    mon = device_health_monitor.DeviceHealthMonitor(
        targets=lambda: device_health_monitor.watch_targets("node-1", INVENTORY, ["a"], []),
        reader=reader,
        on_poll=taints.observe,
    )
    mon.poll()
    assert (taints.current(), syncs) == ({}, [])
    reader.link = NO_CARRIER
    mon.poll()
    assert taints.current() == {
        "a": device_taints.DeviceTaint(
            "drv.example.com/unhealthy", "PfNoCarrier", device_taints.Effect.NO_EXECUTE
        )
    }
    for link in (UP, NO_CARRIER, UP):  # flapping: the taint stays, no sync asked for
        reader.link = link
        now[0] += 2.0
        mon.poll()
    assert len(syncs) == 1 and "a" in taints.current()
    now[0] += 9.0
    mon.poll()
    assert "a" in taints.current(), "healthy for 9 s of the 10"
    now[0] += 1.0
    mon.poll()
    assert (taints.current(), len(syncs)) == ({}, 2)
