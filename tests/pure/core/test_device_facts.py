"""Tests for sriov_dra.core.device_facts: the discovery-owned attributes of one VF."""

from __future__ import annotations

from tests.fakes.policy_objects import DEVICES, D, vf

from sriov_dra.core import attributes, device_facts

# --- Discovery attributes -------------------------------------------------------------------------


def test_discovered_attributes_are_the_reserved_keys_and_omit_unknown_pcieroot() -> None:
    dev = DEVICES[0]
    published = device_facts.discovered_attributes(dev)
    assert set(published) == attributes.RESERVED_ATTRIBUTES
    assert published["resource.kubernetes.io/pcieRoot"] == attributes.string_value("pci0000:3a")
    assert published[f"{D}/vfID"] == attributes.int_value(0)
    assert published["k8s.cni.cncf.io/deviceID"] == attributes.string_value("0000:3b:02.0")
    unknown_root = vf("0000:3b:02.0", "ens1f0", "0000:3b:00.0", 0, pcie_root=None)
    assert "resource.kubernetes.io/pcieRoot" not in device_facts.discovered_attributes(unknown_root)
    assert dev.name == "0000-3b-02-0"
