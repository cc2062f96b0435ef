"""Module unit tests: make this repository importable as ``ansible_collections.sriovnet.dra``.

The repository root is the collection root, but Python can only import a collection from a path
ending in ``ansible_collections/<namespace>/<name>``. A temporary directory holds that path as a
symlink to the repository, so the tests import exactly the files in ``plugins/``.
"""

from __future__ import annotations

import atexit
import shutil
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
_ROOT = Path(tempfile.mkdtemp(prefix="sriovnet-dra-collection-"))
(_ROOT / "ansible_collections" / "sriovnet").mkdir(parents=True)
(_ROOT / "ansible_collections" / "sriovnet" / "dra").symlink_to(REPO)
sys.path.insert(0, str(_ROOT))
atexit.register(shutil.rmtree, _ROOT, True)
