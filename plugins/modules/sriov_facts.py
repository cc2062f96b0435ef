#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
module: sriov_facts
short_description: Gather SR-IOV PFs and VFs, their drivers, link types, PCIe roots and NUMA nodes
version_added: 0.1.0
author:
  - sriov-dra developers (@sriov-dra)
description:
  - Reads sysfs and returns every SR-IOV physical function (PF) that has a netdev, with its VFs.
  - Uses the same rules as the sriov-dra plugin's discovery, so the values equal what the plugin publishes.
  - A PF has C(sriov_totalvfs), no C(physfn) link, a network class code and a netdev.
  - C(pcie_root) is the C(resource.kubernetes.io/pcieRoot) value the plugin publishes, the nearest C(pciDDDD:BB)
    component of the PF's resolved C(/sys/devices) path. That is the answer of Kubernetes' C(deviceattribute) helper
    on C(/sys/devices/pci*) layouts; behind a Hyper-V/VMBus parent the root bus below it is found too.
    A VF reports its PF's root. It is null, with C(pcie_root_problem) saying why, when there is no such component.
  - C(numa_node) is null when the kernel reports no affinity (V(-1)) or the file is missing or not a node number;
    V(-1) is never reported as a node, as the plugin then publishes no C(dra.net/numaNode) attribute.
extends_documentation_fragment:
  - sriovnet.dra.host_root
  - sriovnet.dra.read_only
attributes:
  facts:
    support: full
    description: Sets C(ansible_facts.sriov).
options:
  pfs:
    description:
      - Only report these PFs (netdev names or PCI addresses). All PFs when omitted.
    type: list
    elements: str
"""

EXAMPLES = r"""
- name: Gather SR-IOV facts
  sriovnet.dra.sriov_facts:

- name: Show the PCIe root of each VF of ens1f0
  ansible.builtin.debug:
    msg: "{{ ansible_facts.sriov.vfs | selectattr('pf_name', 'equalto', 'ens1f0') | map(attribute='pcie_root') }}"
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: dict
  contains:
    sriov:
      description: PFs and VFs of the host.
      type: dict
      contains:
        pfs:
          description: SR-IOV PFs with a netdev, sorted by PCI address.
          type: list
          elements: dict
          contains:
            pci_address:
              description: PCI address, for example C(0000:03:00.0).
              type: str
            name:
              description: Uplink netdev name.
              type: str
            vendor:
              description: Vendor ID, lowercase hex without C(0x).
              type: str
            device_id:
              description: Device ID, lowercase hex without C(0x).
              type: str
            driver:
              description: Bound driver, or null.
              type: str
            numa_node:
              description: NUMA node, null when the kernel reports none (V(-1)) or the file is missing.
              type: int
            link_type:
              description: V(ethernet), V(infiniband) or V(unknown).
              type: str
            eswitch_mode:
              description:
                - The kernel's eswitch mode, V(legacy) or V(switchdev), asked through C(devlink -j dev eswitch show pci/<address>)
                  (iproute2). A PF whose driver answers "Operation not supported" or has no devlink instance is V(legacy).
                - Null when unknown (no C(devlink) command, a kernel without devlink, another failure);
                  C(eswitch_mode_reason) says why.
              type: str
            eswitch_mode_reason:
              description: Why C(eswitch_mode) is V(legacy) by the kernel's "not supported" answer, or why it is null; else null.
              type: str
            totalvfs:
              description: C(sriov_totalvfs).
              type: int
            numvfs:
              description: C(sriov_numvfs).
              type: int
            pcie_root:
              description: C(resource.kubernetes.io/pcieRoot) value such as C(pci0000:00), or null.
              type: str
            pcie_root_problem:
              description: Why C(pcie_root) is null, else null.
              type: str
        vfs:
          description: VFs of the reported PFs, sorted by PF PCI address, then VF index.
          type: list
          elements: dict
          contains:
            pci_address:
              description: PCI address of the VF.
              type: str
            vf_id:
              description: VF index on its PF.
              type: int
            pf_name:
              description: Netdev name of the PF.
              type: str
            pf_pci_address:
              description: PCI address of the PF.
              type: str
            vendor:
              description: Vendor ID of the VF.
              type: str
            device_id:
              description: Device ID of the VF.
              type: str
            driver:
              description: Bound driver, or null when unbound.
              type: str
            driver_override:
              description: C(driver_override), empty when cleared, null when absent.
              type: str
            netdev:
              description: The VF's netdev while a kernel driver is bound, else null.
              type: str
            numa_node:
              description: NUMA node of the VF, null when the kernel reports none (V(-1)) or the file is missing.
              type: int
            link_type:
              description: Link type of the PF.
              type: str
            rdma_devices:
              description: RDMA devices of the VF.
              type: list
              elements: str
            pcie_root:
              description: C(resource.kubernetes.io/pcieRoot) of the VF (its PF's root), or null.
              type: str
            pcie_root_problem:
              description: Why C(pcie_root) is null (the PF's problem), else null.
              type: str
"""

from ansible_collections.sriovnet.dra.plugins.module_utils import args, entry
from ansible_collections.sriovnet.dra.plugins.module_utils import sysfs as sysfs_mod


def argspec():
    """The module's argument spec (shared ``host_root`` plus ``pfs``)."""
    return args.argspec(args.HOST_ROOT_SPEC, pfs={"type": "list", "elements": "str"})


def gather(sysfs, only=None):
    """``{"pfs": [...], "vfs": [...]}`` for every PF, or for the PFs named in ``only``."""
    pfs = sysfs.pfs()
    if only:
        wanted = set(sysfs.resolve_pf(pf) for pf in only)
        pfs = [pf for pf in pfs if pf["pci_address"] in wanted]
    vfs = []
    for pf in pfs:
        vfs.extend(sysfs.vf_facts(pf, index, bdf) for index, bdf in sysfs.virtfns(pf["pci_address"]))
    return {"pfs": pfs, "vfs": vfs}


def run(module):
    """Read sysfs and return the facts; never exits."""
    sysfs = sysfs_mod.Sysfs(module.params["host_root"])
    return {"changed": False, "ansible_facts": {"sriov": gather(sysfs, module.params["pfs"])}}


def main():
    entry.main(argspec(), run)


if __name__ == "__main__":
    main()
