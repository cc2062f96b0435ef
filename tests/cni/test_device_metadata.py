"""The guard fills the device metadata files' network part after a verified ADD, with real Multus.

The plugin's own writer puts the prepare's file for the Pod's claim under the node's plugin data
dir; after the guard's ADD (thin and thick) each VF's ``networkData`` in the file equals what the
plugin derives for the claim's ``status.devices[].networkData`` from the same network-status,
and the addresses and MAC are those the kernel holds on the interface in the sandbox.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tests.cni.world import World
from tests.fakes import managed_pods as mp

from sriov_dra.core import attributes
from sriov_dra.core.plugin import claim_network_data
from sriov_dra.core.plugin import device_metadata as dm
from sriov_dra.host import device_metadata_files, netlink
from sriov_dra_rules import names

DRIVER = "sriovnetwork.k8snetworkplumbingwg.io"


@pytest.mark.parametrize("mode", ["thin", "thick"])
def test_a_verified_add_fills_the_metadata_file_with_the_claims_network_data(
    world: World, mode: str, tmp_path: Path
) -> None:
    pod = world.managed_pod("reader")
    files = device_metadata_files.DeviceMetadataFiles(world.node.plugin_data_dir, tmp_path, DRIVER)
    claim = dm.ClaimIdentity(world.namespace, "pairs", mp.CLAIM_UID)
    listed = [
        dm.MetadataDevice(
            DRIVER,
            mp.NODE_NAME,
            f"vf-{i}",
            {"resource.kubernetes.io/pciBusID": attributes.string_value(p.binding.pci_address)},
        )
        for i, p in enumerate(pod.planned)
    ]
    files.write(claim, "nic", dm.document(claim, "nic", listed))

    att, added = world.attach(mode, pod.name, uid=pod.uid)
    assert added.ok, added.stdout + added.stderr

    doc = json.loads(files.read(world.namespace, "pairs", "nic") or b"null")
    assert doc["metadata"]["generation"] == 2
    status_text = world.read_pod(pod.name)["metadata"]["annotations"][names.NETWORK_STATUS_ANNOTATION]
    entries = claim_network_data.decode_network_status(status_text)
    attachments = [
        claim_network_data.Attachment(
            mp.NODE_NAME,
            f"vf-{i}",
            f"{world.namespace}/{p.name}",
            p.interface,
            claim_network_data.ipam_subnets(p.rendered.config_bytes.decode()),
        )
        for i, p in enumerate(pod.planned)
    ]
    claim_status = claim_network_data.correlate(entries, attachments)
    links = {link.name: link for link in netlink.links(att.netns)}
    for device, a in zip(doc["requests"][0]["devices"], attachments, strict=True):
        expected = claim_status[a.key].data
        assert expected is not None and expected.ips
        assert device["networkData"] == expected.to_json()
        kernel = links[a.interface]
        assert device["networkData"]["hardwareAddress"] == kernel.mac
        assert set(device["networkData"]["ips"]) <= set(kernel.addresses)
    assert world.delete(mode, att).ok
