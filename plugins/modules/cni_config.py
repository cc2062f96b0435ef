#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)

from __future__ import annotations

DOCUMENTATION = r"""
module: cni_config
short_description: Install the multus-guard runtime-facing CNI config atomically and validate it
version_added: 0.1.0
author:
  - sriov-dra developers (@sriov-dra)
description:
  - Writes the guard's conflist (by default C(00-multus-guard.conflist)) into the container runtime's CNI
    config directory with a temporary file, fsync and rename, only when its JSON content or mode differs.
  - Before writing it checks the installation contract and fails with the fix when it does not hold
    (nothing is written then).
  - The file must sort first among the C(.conf), C(.conflist) and C(.json) files of O(conf_dir), because the
    runtime uses the lexically first one.
  - The config must be a conflist with exactly one plugin of type C(multus-guard), whose C(multus.mode) is
    V(thick) or V(thin) and whose C(multus.primaryConfig) is the absolute path of the pinned primary network.
  - No recursion. The primary must not be the guard's file, a Multus-generated C(00-multus*) file, or a
    config of type C(multus), C(multus-shim) or C(multus-guard).
  - The guard's C(capabilities) must enable every capability the primary enables, so that the runtime passes
    them (port mappings, bandwidth).
  - With O(multus_daemon_config), thick Multus in C(multusConfigFile=auto) mode must pin its primary with
    C(multusMasterCNI).
attributes:
  check_mode:
    support: full
    description: Validates and reports whether the file would change; writes nothing.
  diff_mode:
    support: full
    description: Shows the file's JSON before and after.
options:
  conf_dir:
    description:
      - The container runtime's CNI config directory (usually C(/etc/cni/net.d)).
    type: path
    required: true
  name:
    description:
      - File name of the guard config; it must end in C(.conflist) and sort first in O(conf_dir).
    type: str
    default: 00-multus-guard.conflist
  config:
    description:
      - The conflist content (C(cniVersion), C(name), C(plugins) with one C(multus-guard) entry).
      - Required with O(state=present).
    type: dict
  state:
    description:
      - V(present) installs the file, V(absent) removes it.
    type: str
    choices: [present, absent]
    default: present
  mode:
    description:
      - File mode, as an octal string.
    type: str
    default: "0644"
  multus_daemon_config:
    description:
      - Path of thick Multus's C(daemon-config.json) to check for a pinned primary (C(multusMasterCNI)).
      - Omit it for thin Multus, whose primary is pinned by the DaemonSet's C(--multus-master-cni-file-name).
    type: path
"""

EXAMPLES = r"""
- name: Put the guard in front of thick Multus
  sriovnet.dra.cni_config:
    conf_dir: /etc/cni/net.d
    multus_daemon_config: /etc/cni/net.d/multus.d/daemon-config.json
    config:
      cniVersion: 1.0.0
      name: multus-cni-network
      plugins:
        - type: multus-guard
          capabilities:
            portMappings: true
          guard:
            socket: /run/sriov-dra/multus-guard.sock
          multus:
            mode: thick
            primaryConfig: /etc/cni/net.d/10-flannel.conflist
            clusterNetwork: /host/etc/cni/net.d/10-flannel.conflist

- name: Remove the guard config (uninstall)
  sriovnet.dra.cni_config:
    conf_dir: /etc/cni/net.d
    state: absent
"""

RETURN = r"""
path:
  description: Full path of the guard config file.
  returned: always
  type: str
  sample: /etc/cni/net.d/00-multus-guard.conflist
primary:
  description: The pinned primary network's config file (C(multus.primaryConfig)).
  returned: when O(state=present)
  type: str
  sample: /etc/cni/net.d/10-flannel.conflist
conf_files:
  description: The CNI config files of O(conf_dir) in the runtime's order, after the module ran.
  returned: always
  type: list
  elements: str
"""

import json
import os
import tempfile

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sriovnet.dra.plugins.module_utils import args, base
from ansible_collections.sriovnet.dra.plugins.module_utils.sriov_dra_rules import (
    cni_install,
    errors,
    strict_json,
)


def argspec():
    """The module's argument spec."""
    return args.argspec(
        conf_dir={"type": "path", "required": True},
        name={"type": "str", "default": cni_install.GUARD_FILE},
        config={"type": "dict"},
        state={"type": "str", "choices": ["present", "absent"], "default": "present"},
        mode={"type": "str", "default": "0644"},
        multus_daemon_config={"type": "path"},
    )


def _mode(text):
    try:
        value = int(text, 8)
    except ValueError:
        value = -1
    if not 0 <= value <= 0o7777:
        raise base.ModuleError("mode %r is not an octal file mode such as 0644" % (text,))
    return value


def render(config):
    """The exact bytes written for a config (sorted keys, 2-space indent, trailing newline)."""
    return (json.dumps(config, indent=2, sort_keys=True) + "\n").encode("utf-8")


def current_state(path):
    """``(decoded JSON or None, mode or None)`` of an existing file; content that is not strict JSON
    (a repeated key included) is None, so the module replaces it with the wanted config."""
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        return None, None
    try:
        with open(path, "rb") as handle:
            return strict_json.decode_file(handle.read(), what="guard config", source=path), mode
    except (OSError, errors.InvalidSpec):
        return None, mode


def atomic_write(path, data, mode):
    """Replace ``path`` with ``data``: temp file in the same directory, fsync, rename, dir fsync."""
    directory = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", dir=directory)
    try:
        os.write(fd, data)
        os.fchmod(fd, mode)
        os.fsync(fd)
        os.close(fd)
        fd = -1
        os.rename(tmp, path)
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError as exc:
        if fd >= 0:
            os.close(fd)
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise base.ModuleError("cannot write %s: %s" % (path, exc.strerror)) from None


def check_contract(conf_dir, name, config, daemon_config):
    """The shared install contract (``sriov_dra_rules.cni_install``) for the file about to be written;
    returns the guard's plugin entry. Raises: base.ModuleError with the contract's message."""
    try:
        entry = cni_install.validate_guard_config(name, config)
        cni_install.check_primary(conf_dir, name, entry)
        cni_install.check_sorts_first(conf_dir, name)
        if daemon_config:
            cni_install.check_multus_daemon_config(daemon_config, name)
    except cni_install.ContractError as exc:
        raise base.ModuleError(str(exc)) from None
    return entry


def run(module):
    """Validate, compare and (unless in check mode) write or remove the guard file; never exits."""
    params = module.params
    conf_dir, name = params["conf_dir"], params["name"]
    if os.sep in name:
        raise base.ModuleError(
            "name %r must be a file name, not a path; put the directory in conf_dir" % name
        )
    path = os.path.join(conf_dir, name)
    before, before_mode = current_state(path)
    result = {"path": path}
    if params["state"] == "absent":
        changed = before_mode is not None
        if changed and not module.check_mode:
            os.unlink(path)
        after = None
    else:
        config = params["config"]
        if config is None:
            raise base.ModuleError("config is required with state=present: the guard's conflist content")
        mode = _mode(params["mode"])
        entry = check_contract(conf_dir, name, config, params["multus_daemon_config"])
        changed = before != config or before_mode != mode
        if changed and not module.check_mode:
            atomic_write(path, render(config), mode)
        after = config
        result["primary"] = entry["multus"]["primaryConfig"]
    result["changed"] = changed
    result["conf_files"] = cni_install.conf_files(conf_dir) if os.path.isdir(conf_dir) else []
    if module._diff:
        result["diff"] = {
            "before_header": path,
            "after_header": path,
            "before": render(before).decode() if before is not None else "",
            "after": render(after).decode() if after is not None else "",
        }
    return result


def main():
    module = AnsibleModule(
        argument_spec=argspec(),
        supports_check_mode=True,
        required_if=[("state", "present", ("config",))],
    )
    result = base.execute(module, run)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
