#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
module: sriov_numvfs
short_description: Set the number of SR-IOV VFs of a PF safely
version_added: 0.1.0
author:
  - sriov-dra developers (@sriov-dra)
description:
  - Reads C(sriov_numvfs) and C(sriov_totalvfs) of a physical function (PF) and writes a new VF count
    only when it differs.
  - A count above C(sriov_totalvfs) fails before anything is written.
  - The kernel refuses to change a non-zero VF count to another non-zero count (EBUSY), and removing VFs
    breaks the Pods that use them. A PF that already has VFs is therefore changed only with
    O(drain_confirmed=true); the module then writes C(0), waits until the VFs are gone, writes the new count
    and waits until C(sriov_numvfs) and the C(virtfn*) links show it.
  - A failed write is not retried. The first errno is returned in RV(errno) and the message names the PF,
    both counts, the cause and the fix (EBUSY, ENOSPC, ERANGE, ENOENT and ENOMEM are explained).
  - Optionally binds every VF of the PF to O(vf_driver).
extends_documentation_fragment:
  - sriovnet.dra.host_root
attributes:
  check_mode:
    support: full
    description: Reads and reports what would change; writes nothing.
  diff_mode:
    support: full
    description: Shows the VF count and the VF drivers before and after.
options:
  pf:
    description:
      - The PF, as its netdev name (for example V(ens1f0)) or its PCI address (for example V(0000:03:00.0)).
    type: str
    required: true
  num_vfs:
    description:
      - The wanted number of VFs. V(0) removes all VFs (which needs O(drain_confirmed) when the PF has VFs).
    type: int
    required: true
  drain_confirmed:
    description:
      - Confirms that no workload uses this PF's VFs (the node was drained and the DRA plugin released its
        claims), so a PF that already has VFs may be changed.
      - Without it such a change fails before writing, naming the drain role to run first.
    type: bool
    default: false
  vf_driver:
    description:
      - Bind every VF of the PF to this driver (for example V(iavf) or V(vfio-pci)) after the count is set.
      - Each VF not on it gets C(driver_override), an unbind from its current driver, a bind and a cleared
        C(driver_override); the driver must be registered (loaded) already.
      - Rebinding VFs that already exist breaks their users, so it needs O(drain_confirmed) like a count change.
      - Omit it to leave the VF drivers alone.
    type: str
  timeout:
    description:
      - Seconds to wait after each write until sysfs shows the new count or driver.
    type: int
    default: 30
notes:
  - Persisting the count across reboots (a udev rule or a systemd unit) is the job of the P(sriovnet.dra.vfs#role) role.
"""

EXAMPLES = r"""
- name: Create 8 VFs on ens1f0 (a PF without VFs)
  sriovnet.dra.sriov_numvfs:
    pf: ens1f0
    num_vfs: 8

- name: Change a PF that already has VFs, after draining the node
  sriovnet.dra.sriov_numvfs:
    pf: "0000:03:00.0"
    num_vfs: 16
    drain_confirmed: true
    vf_driver: iavf
"""

RETURN = r"""
pf:
  description: The O(pf) as given.
  returned: always
  type: str
  sample: ens1f0
pci_address:
  description: PCI address of the PF.
  returned: success
  type: str
  sample: "0000:03:00.0"
previous_num_vfs:
  description: VF count read before any change.
  returned: success
  type: int
  sample: 0
num_vfs:
  description: VF count after the module ran (the planned count in check mode).
  returned: success
  type: int
  sample: 8
total_vfs:
  description: The PF's C(sriov_totalvfs).
  returned: success
  type: int
  sample: 64
vfs:
  description: The PF's VFs after the module ran, sorted by VF index (in check mode, as they are now).
  returned: success
  type: list
  elements: dict
  contains:
    vf_id:
      description: VF index.
      type: int
    pci_address:
      description: PCI address of the VF.
      type: str
    driver:
      description: Driver bound to the VF, or null when unbound.
      type: str
writes:
  description: The sysfs writes made, as C(<path>=<value>), in order (empty in check mode).
  returned: always
  type: list
  elements: str
errno:
  description: Name of the first errno of a failed write (for example V(EBUSY)); empty otherwise.
  returned: failure
  type: str
  sample: EBUSY
"""

from ansible_collections.sriovnet.dra.plugins.module_utils import args, entry, numvfs
from ansible_collections.sriovnet.dra.plugins.module_utils import sysfs as sysfs_mod


def argspec():
    """The module's argument spec (shared ``host_root`` plus its own options)."""
    return args.argspec(
        args.HOST_ROOT_SPEC,
        pf={"type": "str", "required": True},
        num_vfs={"type": "int", "required": True},
        drain_confirmed={"type": "bool", "default": False},
        vf_driver={"type": "str"},
        timeout={"type": "int", "default": 30},
    )


def _drivers(sysfs, bdf):
    return {vf["pci_address"]: vf["driver"] for vf in numvfs.vf_list(sysfs, bdf)}


def run(module):
    """Plan, then (unless in check mode) write the count and the drivers; never exits."""
    params = module.params
    sysfs = sysfs_mod.Sysfs(params["host_root"])
    change = numvfs.plan(sysfs, params["pf"], params["num_vfs"], params["drain_confirmed"])
    vf_driver = params["vf_driver"]
    before = {"num_vfs": change.current, "vf_drivers": _drivers(sysfs, change.bdf)}
    # With a count change every VF is new; the planned drivers are then unknown until it is made.
    pending = numvfs.rebinds(sysfs, change, vf_driver, params["drain_confirmed"])
    changed = change.count_changes or bool(pending)
    after = {"num_vfs": change.desired, "vf_drivers": dict(before["vf_drivers"])}
    if change.count_changes:
        after["vf_drivers"] = "(new VFs%s)" % (", bound to %s" % vf_driver if vf_driver else "")
    for _index, vf, _current in pending:
        after["vf_drivers"][vf] = vf_driver
    writes = []
    if changed and not module.check_mode:
        writes = numvfs.converge(sysfs, change, vf_driver, params["timeout"])
        after = {"num_vfs": sysfs.numvfs(change.bdf), "vf_drivers": _drivers(sysfs, change.bdf)}
    result = {
        "changed": changed,
        "pf": params["pf"],
        "pci_address": change.bdf,
        "previous_num_vfs": change.current,
        "num_vfs": change.desired,
        "total_vfs": change.total,
        "vfs": numvfs.vf_list(sysfs, change.bdf),
        "writes": writes,
    }
    if module._diff:
        result["diff"] = {"before": before, "after": after}
    return result


def main():
    entry.main(argspec(), run)


if __name__ == "__main__":
    main()
