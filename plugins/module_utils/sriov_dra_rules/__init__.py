# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Rules that the runtime and the Ansible collection share, held once in git (docs/layout.md).

This directory is two packages from the same files: ``ansible_collections.sriovnet.dra.plugins.
module_utils.sriov_dra_rules`` for the collection's modules (AnsiballZ sends it to managed nodes,
where the runtime is absent) and ``sriov_dra_rules`` for the runtime (the wheel carries it next
to ``sriov_dra``). So every module here imports only the standard library and its siblings, by
relative import (``from . import errors``); a test enforces both rules.
"""
