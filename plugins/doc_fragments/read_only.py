# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Documentation of the attributes of the modules that only read the node (check and diff mode)."""

from __future__ import annotations


class ModuleDocFragment:
    """The ``check_mode`` and ``diff_mode`` attributes of a module that changes nothing."""

    DOCUMENTATION = r"""
attributes:
  check_mode:
    support: full
    description: Read-only; runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing.
"""
