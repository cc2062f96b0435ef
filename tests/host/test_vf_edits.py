"""host.vf_edits: the CDI facts of one VF read from a fake sysfs tree (VFIO group, RDMA devices)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sriov_dra.core.plugin import cdi_spec
from sriov_dra.host import vf_edits
from sriov_dra_lab.fakes import fake_pci, fake_sysfs

PF = "0000:03:00.0"
VF = "0000:03:02.0"
DEV = "0000-03-02-0"


def tree(root: Path, vf: fake_pci.FakeVf) -> fake_sysfs.FakeSysfs:
    return fake_sysfs.build(root, [fake_pci.FakePf(bdf=PF, ifname="enp3s0f0", vfs=(vf,))])


@pytest.mark.parametrize("noiommu", [False, True], ids=["iommu-group", "vfio-noiommu-group"])
def test_vfio_bound_vf_exposes_its_group_and_the_noiommu_host_node(tmp_path: Path, noiommu: bool) -> None:
    fake = tree(tmp_path, fake_pci.FakeVf(driver="vfio-pci"))
    group = fake.sysfs.iommu_group(VF)
    assert group is not None
    if noiommu:
        fake.sysfs.path("kernel", "iommu_groups", group, "name").write_text("vfio-noiommu\n")
    edits = vf_edits.vf_edits(fake.sysfs, VF, device=DEV, net_attach_def_name="rail-a", vhost=True)
    assert edits == cdi_spec.VfEdits(
        device=DEV,
        pci_address=VF,
        net_attach_def_name="rail-a",
        vfio_group=group,
        vfio_noiommu=noiommu,
        vhost=True,
    )
    nodes = cdi_spec.container_edits(edits)["deviceNodes"]
    host = f"/dev/vfio/noiommu-{group}" if noiommu else f"/dev/vfio/{group}"
    assert {"path": f"/dev/vfio/{group}", "hostPath": host, "type": "c"} in nodes


def test_iavf_vf_has_no_vfio_group_and_no_rdma(tmp_path: Path) -> None:
    fake = tree(tmp_path, fake_pci.FakeVf())
    edits = vf_edits.vf_edits(fake.sysfs, VF, device=DEV)
    assert (edits.vfio_group, edits.rdma_device, edits.rdma_char_devices) == ("", "", ())


def test_single_rdma_device_exposes_its_character_devices(tmp_path: Path) -> None:
    fake = tree(tmp_path, fake_pci.FakeVf(rdma_devices=("mlx5_3",)))
    vf_dir = fake.device_dir(VF)
    (vf_dir / "infiniband_verbs" / "uverbs3").mkdir(parents=True)
    (vf_dir / "infiniband_mad" / "umad3").mkdir(parents=True)
    (vf_dir / "infiniband_mad" / "issm3").mkdir(parents=True)
    edits = vf_edits.vf_edits(fake.sysfs, VF, device=DEV)
    assert edits.rdma_device == "mlx5_3"
    assert edits.rdma_char_devices == (
        "/dev/infiniband/issm3",
        "/dev/infiniband/rdma_cm",
        "/dev/infiniband/umad3",
        "/dev/infiniband/uverbs3",
    )
    env = cdi_spec.container_edits(edits)["env"]
    assert "SRIOVNETWORK_0000_03_02_0_RDMA_UVERB=/dev/infiniband/uverbs3" in env
    assert "SRIOVNETWORK_0000_03_02_0_RDMA_DEVICE=mlx5_3" in env


def test_several_rdma_devices_expose_none_instead_of_failing(tmp_path: Path) -> None:
    fake = tree(tmp_path, fake_pci.FakeVf(rdma_devices=("mlx5_3", "mlx5_4")))
    edits = vf_edits.vf_edits(fake.sysfs, VF, device=DEV)
    assert (edits.rdma_device, edits.rdma_char_devices) == ("", ())
