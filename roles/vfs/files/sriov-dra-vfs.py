# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Entry script of the boot unit ``sriov-dra-vfs.service``, installed by role ``sriovnet.dra.vfs``.

It holds no logic: the program is the collection's ``plugins/module_utils/numvfs_boot.py``,
which the role copies with the module_utils it imports into ``lib/`` next to this file. Run it
as the unit does, ``python3 -I <dir>/sriov-dra-vfs.py --help``.
"""

from __future__ import annotations

import importlib
import os
import sys


def main():
    """Put ``lib/`` first on the path (its packages win over any other ``ansible_collections``) and run."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.realpath(__file__)), "lib"))
    program = importlib.import_module("ansible_collections.sriovnet.dra.plugins.module_utils.numvfs_boot")
    return program.main()


if __name__ == "__main__":
    sys.exit(main())
