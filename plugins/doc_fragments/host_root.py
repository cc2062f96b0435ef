# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Documentation of ``host_root`` (spec ``HOST_ROOT_SPEC`` in ``plugins/module_utils/args.py``)."""

from __future__ import annotations


class ModuleDocFragment:
    """The ``host_root`` option of the modules that read or write sysfs."""

    DOCUMENTATION = r"""
options:
  host_root:
    description:
      - Directory that stands for the host's C(/); sysfs is used under C(<host_root>/sys).
      - Keep the default on a real host. Tests and molecule scenarios point it at a fake tree.
    type: path
    default: /
    version_added: 0.1.0
"""
