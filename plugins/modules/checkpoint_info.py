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
  - A read of a live slot file that finds a slot not valid is retried (a read can span two of the plugin's writes).
    A slot that stays not valid (a write cut short, or damage) is reported as a warning and the other slot is read,
    compared with C(checkpoint.json); when that copy is missing or unusable too, the module fails, because the slot
    may have held bindings the other does not (starting the plugin rewrites the copy from its durable record).
  - When C(checkpoint.json) beside the slot file lists a binding the slot file does not, the binding is counted too and
    a warning says so. The copy lags after a power loss until the plugin starts, and after damage to the newest
    slot it is newer; a gate that drains or uninstalls must not pass on either.
  - No checkpoint at all (neither file) fails unless O(allow_missing), because a wrong path must never read as "nothing
    prepared". The plugin creates its checkpoint when it starts, so only a node where it never ran has none.
  - Nothing is guessed. The module fails, naming the file, for a slot file without a valid slot, bytes that are not
    strict JSON, a checksum that does not match, or another C(version).
  - The drain and cleanup roles wait and refuse with it.
extends_documentation_fragment:
  - sriovnet.dra.read_only
options:
  path:
    description:
      - The plugin's C(checkpoint.json) (its sibling C(checkpoint.slots) is read when it exists), or a slot file (its
        sibling C(checkpoint.json) is read when the slot file does not exist). A symlink is resolved first, so the
        siblings are the real file's. A file of another name is refused and never read, because a copy or a backup may be older.
      - The plugin's C(--state-dir) followed by C(/checkpoint.json).
    type: path
    default: /var/lib/kubelet/plugins/sriovnetwork.k8snetworkplumbingwg.io/checkpoint.json
  allow_missing:
    description:
      - Report no binding (RV(exists=false)) instead of failing when neither C(checkpoint.slots) nor C(checkpoint.json)
        exists, for a node where the plugin never ran.
    type: bool
    default: false
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
  description: Whether a checkpoint exists (false only with O(allow_missing)).
  returned: always
  type: bool
msg:
  description: One line, for example C(2 managed binding(s) in /var/lib/.../checkpoint.slots (ns/dra-sriov-...)).
  returned: always
  type: str
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
    checkpoint_doc,
    checkpoint_read,
    errors,
)


DEFAULT_PATH = "/var/lib/kubelet/plugins/sriovnetwork.k8snetworkplumbingwg.io/checkpoint.json"


def argspec():
    """The module's argument spec: ``path`` and ``allow_missing``."""
    return {
        "path": {"type": "path", "default": DEFAULT_PATH},
        "allow_missing": {"type": "bool", "default": False},
    }


def _key(binding):
    return (binding["claim_uid"], binding["device"], binding["shadow"])


def _summary(bindings, source):
    if not bindings:
        return "no managed binding in %s" % source
    shadows = sorted(set(b["shadow"] for b in bindings))
    return "%d managed binding(s) in %s (%s)" % (len(bindings), source, ", ".join(shadows))


def _read(path):
    """``checkpoint_read.read`` with the module's messages; ``None`` when neither file exists."""
    if path.is_dir():
        raise base.ModuleError(
            "%s is a directory; give the checkpoint file inside it (%s)"
            % (path, path / checkpoint_doc.CHECKPOINT_FILE_NAME)
        )
    name = path.resolve().name
    if name != checkpoint_doc.CHECKPOINT_FILE_NAME and not name.endswith(".slots"):
        raise base.ModuleError(
            "%s is not named %s or %s: give the plugin's own file (its --state-dir followed by /%s), whose durable "
            "%s beside it is read too; a file of another name (a copy, a backup) is never read, as it may be older"
            % (
                path,
                checkpoint_doc.CHECKPOINT_FILE_NAME,
                checkpoint_doc.SLOTS_FILE_NAME,
                checkpoint_doc.CHECKPOINT_FILE_NAME,
                checkpoint_doc.SLOTS_FILE_NAME,
            )
        )
    try:
        return checkpoint_read.read(path)
    except FileNotFoundError:
        return None
    except errors.SriovDraError as exc:
        raise base.ModuleError(exc.detail, reason=str(exc.reason))
    except PermissionError as exc:
        raise base.ModuleError(
            "cannot read the plugin checkpoint %s: %s; run the task with become (the files are root's, mode 0600)"
            % (exc.filename or path, exc.strerror or exc)
        )
    except OSError as exc:
        raise base.ModuleError(
            "cannot read the plugin checkpoint %s: %s" % (exc.filename or path, exc.strerror or exc)
        )


def _copy_bindings(module, reading, bindings):
    """``(bindings only checkpoint.json beside the slot file lists, why it could not be compared or None)``.

    Extra bindings are warned about (see DOCUMENTATION).
    """
    copy_path = reading.source.with_name(checkpoint_doc.CHECKPOINT_FILE_NAME)
    try:
        copy = checkpoint_read.copy_beside(reading.source)
    except OSError as exc:
        return [], "%s cannot be read: %s" % (copy_path, exc.strerror or exc)
    if copy is None:
        return [], "%s does not exist" % copy_path
    if copy == reading.payload:
        return [], None
    try:
        listed = checkpoint_doc.managed_bindings(copy, source=str(copy_path))
    except errors.SriovDraError as exc:
        return [], exc.detail
    known = set(_key(b) for b in bindings)
    extra = [b for b in listed if _key(b) not in known]
    if extra:
        module.warn(
            "%s lists %d managed binding(s) that %s does not (%s); they are counted. The copy is older after a power loss "
            "(the plugin rewrites it when it starts) or newer after damage to the newest slot: check the plugin's log"
            % (copy_path, len(extra), reading.source, ", ".join(sorted(set(b["shadow"] for b in extra))))
        )
    return extra, None


def _missing(path):
    """The error for a path where no checkpoint file exists (see DOCUMENTATION: never "nothing prepared")."""
    return base.ModuleError(
        "no plugin checkpoint at %s (neither %s nor %s exists there): check the path, the plugin's --state-dir followed "
        "by /%s (the plugin creates it when it starts); only on a node where the plugin never ran set allow_missing (the "
        "roles' drain_checkpoint_missing_ok, cleanup_checkpoint_missing_ok)"
        % (path, checkpoint_doc.SLOTS_FILE_NAME, checkpoint_doc.CHECKPOINT_FILE_NAME, checkpoint_doc.CHECKPOINT_FILE_NAME)
    )


def run(module):
    """Read the checkpoint at ``module.params["path"]``; return ``exists``, ``source``, ``bindings`` and ``msg``.

    Shapes: ``bindings`` as ``checkpoint_doc.bindings_of``, sorted by claim UID, plus any that only
    the readable copy lists (see DOCUMENTATION).
    Raises: :class:`base.ModuleError` naming the file for a checkpoint that cannot be trusted (see
    ``checkpoint_read.read`` and ``checkpoint_doc.managed_bindings``), that cannot be read, or that
    does not exist without ``allow_missing``.
    """
    path = Path(module.params["path"])
    reading = _read(path)
    if reading is None:
        if module.params["allow_missing"]:
            msg = "no plugin checkpoint at %s (allow_missing: a node where the plugin never ran)" % path
            return {"changed": False, "exists": False, "source": None, "bindings": [], "msg": msg}
        raise _missing(path)
    source = str(reading.source)
    for problem in reading.problems:
        module.warn("%s: %s; the other slot was read" % (source, problem))
    try:
        bindings = checkpoint_doc.managed_bindings(reading.payload, source=source)
    except errors.SriovDraError as exc:
        raise base.ModuleError(exc.detail, reason=str(exc.reason), source=source)
    if reading.source.name != checkpoint_doc.CHECKPOINT_FILE_NAME:
        extra, uncompared = _copy_bindings(module, reading, bindings)
        if uncompared is not None and reading.problems:
            raise base.ModuleError(
                "%s has a slot that is not valid (%s), and its readable copy cannot be compared (%s): the slot may have "
                "held bindings the other does not, so this checkpoint cannot show that the node holds none. Start the "
                "plugin on the node (it rewrites %s from its durable record when it starts) and rerun"
                % (source, "; ".join(reading.problems), uncompared, checkpoint_doc.CHECKPOINT_FILE_NAME),
                source=source,
            )
        if uncompared is not None:  # deleted by hand or damaged: the durable record alone decides
            module.warn("the readable copy is not used (the plugin rewrites it when it starts): %s" % uncompared)
        bindings = sorted(bindings + extra, key=_key)
    return {
        "changed": False,
        "exists": True,
        "source": source,
        "bindings": bindings,
        "msg": _summary(bindings, source),
    }


def main():
    entry.main(argspec(), run)


if __name__ == "__main__":
    main()
