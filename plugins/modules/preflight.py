#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
module: preflight
short_description: Node checks of the sriov-dra preflight
version_added: 0.1.0
author:
  - sriov-dra developers (@sriov-dra)
description:
  - Runs the node checks that are not plain commands and reports each as V(pass) or V(fail) with the fix.
  - C(cni-binaries) checks that the required CNI binaries are in the CNI bin dir.
  - C(cni-exec) runs each present binary with C(CNI_COMMAND=VERSION), a real exec of the CNI path.
  - C(cni-add) runs a real ADD and DEL of a C(bridge) + C(host-local) network between two throwaway network
    namespaces with a temporary IPAM data directory, and removes them again; V(skip) with the reason when not
    root, without C(ip), or without those plugins in O(cni_bin_dir).
  - C(guard-first) checks that the guard's file is the first CNI config the runtime sees.
  - C(guard-config) checks the guard config, its pinned primary (no recursion) and, for thick Multus, the
    daemon config's C(multusMasterCNI).
  - C(guard-checkpoint) checks that the guard's C(guard.pluginCheckpoint) is O(plugin_checkpoint) and that this file
    reads as the plugin's checkpoint; a path the plugin does not write would let every Pod, managed ones too, past
    the guard's checks.
  - C(cache-mounts) checks that the Multus and sriov-cni caches exist on persistent storage.
  - C(legacy-device-plugin) checks that no SR-IOV network device plugin is configured on the node.
  - Changes nothing on the node (the C(cni-add) namespaces and IPAM data are temporary). The same checks run
    as C(sriov-dra preflight). The cluster checks (API versions, RBAC, co-installed operators, overlapping policies) are
    in the P(sriovnet.dra.preflight#role) role.
extends_documentation_fragment:
  - sriovnet.dra.read_only
options:
  cni_conf_dir:
    description: The container runtime's CNI config directory.
    type: path
    default: /etc/cni/net.d
  cni_bin_dir:
    description: The CNI binary directory.
    type: path
    default: /opt/cni/bin
  guard_file:
    description: File name of the guard's runtime-facing config in O(cni_conf_dir).
    type: str
    default: 00-multus-guard.conflist
  multus_mode:
    description: How Multus runs; decides whether C(multus-shim) (thick) or C(multus) (thin) is required.
    type: str
    choices: [thick, thin]
    default: thick
  multus_daemon_config:
    description: Thick Multus's daemon config, checked for a pinned primary. Ignored for thin Multus.
    type: path
    default: /etc/cni/net.d/multus.d/daemon-config.json
  binaries:
    description:
      - CNI binaries that must be present besides Multus's (C(multus-shim) or C(multus)).
    type: list
    elements: str
    default: [multus-guard, sriov, host-local, whereabouts]
  cache_dirs:
    description: Cache directories that must survive reboots (Multus's delegate cache and sriov-cni's cache).
    type: list
    elements: path
    default: [/var/lib/cni/multus, /var/lib/cni/sriov]
  mounts_file:
    description: The mount table to read.
    type: path
    default: /proc/self/mounts
  legacy_device_plugin_config:
    description: Config file of the SR-IOV network device plugin; it must not exist.
    type: path
    default: /etc/pcidp/config.json
  exec_timeout:
    description: Seconds each CNI binary may take to answer C(CNI_COMMAND=VERSION).
    type: int
    default: 10
  add_check:
    description: Run the C(cni-add) test ADD/DEL (it is skipped with the reason when it cannot run).
    type: bool
    default: true
  plugin_checkpoint:
    description:
      - Where the plugin writes its checkpoint on the node (its state directory's C(checkpoint.json); the plugin
        creates it at start). The guard's C(guard.pluginCheckpoint) must name this file.
    type: path
    default: /var/lib/kubelet/plugins/sriovnetwork.k8snetworkplumbingwg.io/checkpoint.json
"""

EXAMPLES = r"""
- name: Run the node preflight
  sriovnet.dra.preflight:
    multus_mode: thick
  register: node_checks

- name: Show failed checks with their fixes
  ansible.builtin.debug:
    msg: "{{ node_checks.checks | selectattr('status', 'equalto', 'fail') }}"
"""

RETURN = r"""
checks:
  description: Every check, in a fixed order.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Check name.
      type: str
      sample: guard-first
    status:
      description: V(pass), V(fail) or V(skip) (could not run here; C(detail) says why).
      type: str
    detail:
      description: What was found.
      type: str
    fix:
      description: What to change (empty on pass).
      type: str
failed_checks:
  description: Names of the failed checks.
  returned: always
  type: list
  elements: str
"""

from ansible_collections.sriovnet.dra.plugins.module_utils import args, entry
from ansible_collections.sriovnet.dra.plugins.module_utils.sriov_dra_rules import preflight_node as checks


def argspec():
    """The module's argument spec (defaults shared with ``sriov-dra preflight``)."""
    d = checks.DEFAULTS
    return args.argspec(
        cni_conf_dir={"type": "path", "default": d["cni_conf_dir"]},
        cni_bin_dir={"type": "path", "default": d["cni_bin_dir"]},
        guard_file={"type": "str", "default": d["guard_file"]},
        multus_mode={"type": "str", "choices": ["thick", "thin"], "default": d["multus_mode"]},
        multus_daemon_config={"type": "path", "default": d["multus_daemon_config"]},
        binaries={"type": "list", "elements": "str", "default": list(d["binaries"])},
        cache_dirs={"type": "list", "elements": "path", "default": list(d["cache_dirs"])},
        mounts_file={"type": "path", "default": d["mounts_file"]},
        legacy_device_plugin_config={"type": "path", "default": d["legacy_device_plugin_config"]},
        exec_timeout={"type": "int", "default": d["exec_timeout"]},
        add_check={"type": "bool", "default": d["add_check"]},
        plugin_checkpoint={"type": "path", "default": d["plugin_checkpoint"]},
    )


def run(module):
    """Run every node check (the guard's through the shared install contract, ``sriov_dra_rules.cni_install``,
    as ``sriov-dra preflight`` does); never exits and changes nothing on the node."""
    found = checks.node_checks(module.params)
    return {"changed": False, "checks": found, "failed_checks": checks.failed(found)}


def main():
    entry.main(argspec(), run)


if __name__ == "__main__":
    main()
