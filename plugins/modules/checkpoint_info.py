#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
module: checkpoint_info
short_description: Read the managed bindings that the sriov-dra plugin's checkpoint records on a node
version_added: 0.1.0
author:
  - sriov-dra developers (@sriov-dra)
description:
  - Reads the plugin's checkpoint on the node without writing or locking anything, and lists every device that
    carries a C(managedBinding) (a shadow NAD and its finalizer the plugin still has to release).
  - The plugin directory holds C(checkpoint.slots), the durable record, and C(checkpoint.json), a readable copy
    replaced after each durable write without a flush. The slot file wins when it exists, because the copy may
    lag behind it after a power loss until the plugin starts, or may have been removed by hand. C(checkpoint.json)
    is read only in a directory without a slot file (a build older than it).
  - A read of a live slot file that finds no valid slot is retried (a read can span two of the plugin's writes).
  - Nothing is guessed. The module fails, naming the file, for a slot file without a valid slot, bytes that are not
    strict JSON, a checksum that does not match, or another C(version).
  - The drain and cleanup roles wait and refuse with it (spec §18.1).
extends_documentation_fragment:
  - sriovnet.dra.read_only
options:
  path:
    description:
      - The plugin's C(checkpoint.json) (its sibling C(checkpoint.slots) is read when it exists), or a slot file.
      - The plugin's C(--state-dir) followed by C(/checkpoint.json).
    type: path
    default: /var/lib/kubelet/plugins/sriovnetwork.k8snetworkplumbingwg.io/checkpoint.json
notes:
  - The files are mode 0600 and owned by root; run it with C(become).
"""

EXAMPLES = r"""
- name: Read the plugin's checkpoint
  sriovnet.dra.checkpoint_info:
  become: true
  register: checkpoint

- name: Show what the plugin still has to release
  ansible.builtin.debug:
    msg: "{{ checkpoint.bindings | map(attribute='shadow') }}"
"""

RETURN = r"""
exists:
  description: Whether a checkpoint exists (no file means the plugin never prepared a claim on this node).
  returned: always
  type: bool
source:
  description: The file the checkpoint was read from (C(checkpoint.slots) or C(checkpoint.json)), null when none exists.
  returned: always
  type: str
bindings:
  description: One entry per device with a managed binding, sorted by claim UID.
  returned: always
  type: list
  elements: dict
  contains:
    claim_uid:
      description: The ResourceClaim's UID.
      type: str
    namespace:
      description: The ResourceClaim's namespace.
      type: str
    name:
      description: The ResourceClaim's name.
      type: str
    pod_uid:
      description: UID of the Pod the claim was prepared for.
      type: str
    device:
      description: The allocated device's name in the ResourceSlice pool.
      type: str
    phase:
      description: The binding's phase (C(Pending), C(Ready), C(Deleting) or C(ReleaseComplete)).
      type: str
    shadow:
      description: The shadow NAD, C(<namespace>/<name>).
      type: str
"""

from pathlib import Path

from ansible_collections.sriovnet.dra.plugins.module_utils import base, entry
from ansible_collections.sriovnet.dra.plugins.module_utils.sriov_dra_rules import (
    checkpointdoc,
    checkpointread,
    errors,
)


def argspec():
    """The module's argument spec: ``path``."""
    return {
        "path": {
            "type": "path",
            "default": "/var/lib/kubelet/plugins/sriovnetwork.k8snetworkplumbingwg.io/checkpoint.json",
        }
    }


def run(module):
    """Read the checkpoint at ``module.params["path"]`` and return ``exists``, ``source`` and ``bindings``.

    Raises: :class:`base.ModuleError` naming the file for a checkpoint that cannot be trusted (see
    ``checkpointread.read_only`` and ``checkpointdoc.managed_bindings``) or cannot be read.
    """
    path = Path(module.params["path"])
    try:
        raw, source = checkpointread.read_only(path)
    except FileNotFoundError:
        return {"changed": False, "exists": False, "source": None, "bindings": []}
    except errors.SriovDraError as exc:
        raise base.ModuleError(exc.detail, reason=str(exc.reason))
    except OSError as exc:
        raise base.ModuleError(
            "cannot read the plugin checkpoint %s: %s; run the task with become (the files are root's, mode 0600)"
            % (exc.filename or path, exc.strerror or exc)
        )
    try:
        bindings = checkpointdoc.managed_bindings(raw, source=str(source))
    except errors.SriovDraError as exc:
        raise base.ModuleError(exc.detail, reason=str(exc.reason), source=str(source))
    return {"changed": False, "exists": True, "source": str(source), "bindings": bindings}


def main():
    entry.main(argspec(), run)


if __name__ == "__main__":
    main()
