"""The lab's fake tree gives every VF one RDMA device, so the NCCL hints have something to name."""

from __future__ import annotations

from pathlib import Path

from sriov_dra.host import discovery
from sriov_dra_lab import topology
from sriov_dra_lab.fakes import fake_sysfs


def test_every_lab_vf_has_its_own_rdma_device_and_is_published_rdma_capable(tmp_path: Path) -> None:
    fake = fake_sysfs.build(tmp_path, topology.fake_pfs(3))
    found = discovery.discover(fake.sysfs)
    assert len(found) == 6
    names = [fake.sysfs.rdma_devices(vf.pci_address) for vf in found]
    assert sorted(n for (n,) in names) == [f"mlx5_{i}" for i in range(2, 8)]
    assert all(
        vf.attributes["sriovnetwork.k8snetworkplumbingwg.io/rdmaCapable"].value is True for vf in found
    )
