"""Tests for sriov_dra_rules.topology: pcieRoot of a device path, NUMA node of a numa_node text."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra_rules import topology

VMBUS_GUID = "5d2a1f4e-0001-4d2c-9a1b-6c3e8f7a9b01"


P = pytest.param
VMBUS_GEN2 = f"LNXSYSTM:00/LNXSYBUS:00/ACPI0004:00/VMBUS:00/{VMBUS_GUID}"
VMBUS_PNP = f"LNXSYSTM:00/LNXSYBUS:00/PNP0A03:00/device:07/VMBUS:01/{VMBUS_GUID}"
BRIDGES3 = "0000:80:03.0/0000:85:00.0/0000:86:08.0"
NO_ROOT, OTHER, BAD_BDF = "has no PCI root bus component", "does not end with 0000:03:00.0", "not a lowercase"

# (device path under /sys/devices, BDF, root) or (..., None, what the reason says)
LAYOUTS = [
    P("pci0000:00/0000:00:01.0/0000:03:00.0", "0000:03:00.0", "pci0000:00", id="behind-one-root-port"),
    P(f"pci0000:80/{BRIDGES3}/0000:87:00.0", "0000:87:00.0", "pci0000:80", id="behind-three-bridges"),
    P("pci0000:00/0000:00:1f.0", "0000:00:1f.0", "pci0000:00", id="root-complex-integrated-device"),
    P("pci0000:20/0000:20:00.0/0000:21:00.0", "0000:21:00.0", "pci0000:20", id="qemu-pxb-pcie-expander-root"),
    P("pci0001:c0/0001:c0:01.0/0001:c1:00.0", "0001:c1:00.0", "pci0001:c0", id="non-zero-domain"),
    P(
        f"{VMBUS_GEN2}/pci0001:00/0001:00:00.0",
        "0001:00:00.0",
        "pci0001:00",
        id="hyperv-vmbus-under-acpi0004",
    ),
    P(f"{VMBUS_PNP}/pci7870:00/7870:00:02.0", "7870:00:02.0", "pci7870:00", id="hyperv-vmbus-under-pnp0a03"),
    P(
        "pci0000:00/0000:00:0e.0/pci10000:00/0000:01:00.0",
        "0000:01:00.0",
        "pci10000:00",
        id="nearest-root-wins",
    ),
    P("pci-0/pci0000:00/0000:00:00.0", "0000:00:00.0", "pci0000:00", id="xen-pcifront-parent-is-no-root"),
    P("platform/soc/0000:03:00.0", "0000:03:00.0", NO_ROOT, id="platform-device"),
    P("virtual/0000:03:00.0", "0000:03:00.0", NO_ROOT, id="virtual-device"),
    P("pci_odd/0000:03:00.0", "0000:03:00.0", NO_ROOT, id="pci-prefixed-name-that-is-no-root-bus"),
    P("pci0000:00/0000:03:00.7", "0000:03:00.0", OTHER, id="path-names-another-function"),
    P("pci0000:00", "0000:03:00.0", OTHER, id="path-is-the-root-itself"),
    P("pci0000:00/0000:03:00.0", "0000:03:00.A", BAD_BDF, id="uppercase-bdf"),
    P("pci10000:00/10000:01:00.0", "10000:01:00.0", BAD_BDF, id="five-digit-domain-refused-as-the-helper"),
    P("pci0000:00/03:00.0", "03:00.0", BAD_BDF, id="short-bdf"),
]


@pytest.mark.parametrize(("path", "bdf", "expected"), LAYOUTS)
def test_pcie_root_is_the_nearest_root_bus_component_or_none_with_a_reason(
    path: str, bdf: str, expected: str
) -> None:
    found = topology.pcie_root(path, bdf)
    if topology.ROOT_BUS_RE.fullmatch(expected):
        assert found == topology.PcieRoot(bdf, expected, None)
    else:
        assert (found.root, expected in (found.problem or "")) == (None, True)


_HEX = "0123456789abcdef"
_COMPONENT = st.text(alphabet=_HEX + ":.-_ABCDEFGHIJKLMNOPQRSTUVWXYZpcix", max_size=14)


@given(parts=st.lists(_COMPONENT, max_size=8), bdf=st.text(alphabet=_HEX + ":.", max_size=14))
def test_any_path_yields_one_of_its_components_or_none(parts: list[str], bdf: str) -> None:
    path = "/".join([*parts, bdf])
    found = topology.pcie_root(path, bdf)
    assert found.root is None or found.root in path.split("/")
    assert found.root != ""
    assert (found.root is None) != (found.problem is None)


@given(
    domain=st.text(_HEX, min_size=4, max_size=4),
    bus=st.text(_HEX, min_size=2, max_size=2),
    bridges=st.lists(
        st.builds(lambda d, f: f"{d:02x}.{f}", st.integers(0, 0x1F), st.integers(0, 7)), max_size=4
    ),
    dev=st.integers(0, 0x1F),
    fn=st.integers(0, 7),
)
def test_equals_the_kubernetes_helpers_first_element_on_pci_layouts(
    domain: str, bus: str, bridges: list[str], dev: int, fn: int
) -> None:
    """On ``/sys/devices/pciDDDD:BB/...`` the helper's answer (the first element) is ours."""
    bdf = f"{domain}:{bus}:{dev:02x}.{fn}"
    chain = [f"pci{domain}:{bus}", *(f"{domain}:{bus}:{b}" for b in bridges), bdf]
    assert topology.pcie_root("/".join(chain), bdf).root == chain[0]


@pytest.mark.parametrize(
    ("text", "node"),
    [
        P("0\n", 0, id="node-zero"),
        P("1\n", 1, id="node-one"),
        P(" 3 ", 3, id="whitespace-ignored"),
        P("1023", 1023, id="large-node"),
        P("-0", 0, id="minus-zero-is-zero"),
    ],
)
def test_a_node_number_is_the_node(text: str, node: int) -> None:
    assert topology.numa_affinity(text) == topology.NumaAffinity(node, None)


NOT_A_NODE = "not a decimal node number"


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        P("-1\n", "the kernel reports no NUMA affinity (-1)", id="kernel-no-affinity-is-no-node"),
        P(None, "numa_node is missing or unreadable", id="missing-file-is-no-node"),
        P("-7\n", "numa_node is -7, not a node number", id="other-negative-is-no-node"),
        P("2147483648", "numa_node is 2147483648, not a node number", id="above-int-is-no-node"),
        P("", f"numa_node holds '', {NOT_A_NODE}", id="empty-is-no-node"),
        P("garbage\n", f"numa_node holds 'garbage', {NOT_A_NODE}", id="garbage-is-no-node"),
        P("0x1", f"numa_node holds '0x1', {NOT_A_NODE}", id="hex-is-no-node"),
        P("\u0661", f"numa_node holds '\u0661', {NOT_A_NODE}", id="non-ascii-digit-is-no-node"),
    ],
)
def test_no_node_is_none_with_a_reason_never_minus_one(text: str | None, reason: str) -> None:
    assert topology.numa_affinity(text) == topology.NumaAffinity(None, reason)


@given(text=st.one_of(st.none(), st.text(max_size=12), st.integers(-(2**40), 2**40).map(str)))
def test_numa_affinity_of_any_text_is_a_node_or_none_with_a_reason(text: str | None) -> None:
    found = topology.numa_affinity(text)
    assert (found.node is None) != (found.reason is None)
    assert found.node is None or 0 <= found.node <= topology.MAX_NUMA_NODE
    stripped = None if text is None else text.strip()
    if stripped is not None and re.fullmatch(r"-?[0-9]+", stripped):
        expected = int(stripped)
        assert found.node == (expected if 0 <= expected <= topology.MAX_NUMA_NODE else None)
