# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Rules that the runtime and the Ansible collection share, held once in git (ARCHITECTURE.md §9).

This directory is two packages at once, from the same files:

- ``ansible_collections.sriovnet.dra.plugins.module_utils.sriov_dra_rules`` for the collection's
  modules (AnsiballZ packs it into a module sent to a managed node, where the runtime is absent);
- ``sriov_dra_rules`` for the runtime (``pyproject.toml`` finds it under ``plugins/module_utils``,
  so the wheel and the image carry it next to ``sriov_dra``).

So every module here imports only the standard library and its siblings, and only by relative
import (``from . import errors``): an absolute import would work under one name only. A test
walks every module's imports and enforces both rules.
"""
