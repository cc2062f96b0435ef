"""What discovery knows about one VF, and the attributes discovery alone publishes for it.

:class:`DeviceFacts` is filled by the host layer and read by policy evaluation and the
ResourceSlice builder; :func:`discovered_attributes` gives upstream dra-driver-sriov's 14
discovery-owned attributes, with unknown topology omitted, never a placeholder
(docs/design.md#device-attributes). Reads neither node nor API; publishes no policy attribute.
"""

from __future__ import annotations

from dataclasses import dataclass

from sriov_dra.core import attributes

_D = attributes.DRIVER_DOMAIN


@dataclass(frozen=True)
class DeviceFacts:
    """What discovery knows about one VF; the host layer fills it, policies only read it.

    Shapes: PCI addresses ``DDDD:BB:DD.F`` lowercase; IDs lowercase hex without ``0x``
    (``vendor`` is the PF vendor, ``device_id`` the VF device); ``link_type`` ``ethernet``,
    ``infiniband`` or ``unknown``; ``eswitch_mode`` ``legacy`` or ``switchdev``; ``numa_node`` a
    node ``>= 0`` or ``None`` when the kernel reports none; ``pcie_root`` like ``pci0000:00`` or
    ``None`` when discovery failed.
    Source: upstream dra-driver-sriov's discovery (names and value formats).
    """

    pci_address: str
    vendor: str
    device_id: str
    pf_device_id: str
    pf_name: str
    pf_pci_address: str
    vf_id: int
    driver: str | None = None
    numa_node: int | None = None
    pcie_root: str | None = None
    link_type: str = "ethernet"
    eswitch_mode: str = "legacy"
    rdma_capable: bool = False

    @property
    def name(self) -> str:
        """DRA device name: the VF BDF with ``:`` and ``.`` replaced by ``-`` (``0000-3b-02-0``)."""
        return self.pci_address.replace(":", "-").replace(".", "-")


def discovered_attributes(facts: DeviceFacts) -> dict[str, attributes.AttributeValue]:
    """The discovery-owned attributes published for ``facts`` (upstream names and types).

    Shapes: the 15 reserved keys, less the unknown topology: ``resource.kubernetes.io/pcieRoot``
    is omitted, never ``""``, when unknown (``""`` would let ``matchAttribute`` pair unrelated
    devices), and ``dra.net/numaNode`` with the standard ``resource.kubernetes.io/numaNode``
    (the same int, KEP-6072) are omitted, never ``-1``, when there is no node (``None`` or
    negative; upstream publishes ``-1``, but "no node" must not match as a node).
    """
    s, i = attributes.string_value, attributes.int_value
    out = {
        f"{_D}/vendor": s(facts.vendor),
        f"{_D}/deviceID": s(facts.device_id),
        f"{_D}/pfDeviceID": s(facts.pf_device_id),
        f"{_D}/pciAddress": s(facts.pci_address),
        "k8s.cni.cncf.io/deviceID": s(facts.pci_address),
        f"{_D}/PFName": s(facts.pf_name),
        f"{_D}/EswitchMode": s(facts.eswitch_mode),
        f"{_D}/vfID": i(facts.vf_id),
        f"{_D}/pfPciAddress": s(facts.pf_pci_address),
        "resource.kubernetes.io/pciBusID": s(facts.pci_address),
        f"{_D}/linkType": s(facts.link_type),
        f"{_D}/rdmaCapable": attributes.bool_value(facts.rdma_capable),
    }
    if facts.numa_node is not None and facts.numa_node >= 0:
        out["dra.net/numaNode"] = i(facts.numa_node)
        out["resource.kubernetes.io/numaNode"] = i(facts.numa_node)
    if facts.pcie_root:
        out["resource.kubernetes.io/pcieRoot"] = s(facts.pcie_root)
    return out
