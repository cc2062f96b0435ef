# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The ``main`` of a module that only needs an ``AnsibleModule`` with check mode and ``run``.

Kept apart from ``base.py``, which the node boot program (``numvfs_boot.py``) imports on a node
without Ansible; this file imports ``ansible.module_utils.basic`` and is for modules only.
"""

from __future__ import annotations

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.sriovnet.dra.plugins.module_utils import base


def main(argument_spec, run):
    """Build a check-mode-capable ``AnsibleModule`` from ``argument_spec`` (a dict of option
    specs), call ``run(module) -> dict`` through :func:`base.execute` and ``exit_json`` the result.

    Never returns: ``exit_json``, or ``fail_json`` for a :class:`base.ModuleError`, ends the run.
    """
    module = AnsibleModule(argument_spec=argument_spec, supports_check_mode=True)
    result = base.execute(module, run)
    module.exit_json(**result)
