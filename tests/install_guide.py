"""The commands of docs/install.md that its test runs: the bash blocks marked ``<!-- install-test: <step> -->``.

A marked block is the fenced ``bash`` block right after the marker line. The e2e tier runs them in page
order against the lab (``tests/e2e/test_install_guide.py``); the pure tier checks that the page still has
every step (``tests/pure/test_install_guide.py``).
"""

from __future__ import annotations

import re
from pathlib import Path

GUIDE = Path(__file__).resolve().parents[1] / "docs" / "install.md"
STEPS = ("inventory", "push", "collection", "site", "preflight", "first-pod", "remove-example", "uninstall")
"""The steps, in the page's order: what a user does from nothing to a Pod and back."""
_MARKED = re.compile(r"^<!-- install-test: ([\w-]+) -->\n```bash\n(.*?)^```$", re.M | re.S)


def steps(path: Path = GUIDE) -> list[tuple[str, str]]:
    """``(step, script)`` for each marked block of ``path``, in page order."""
    return [(m.group(1), m.group(2)) for m in _MARKED.finditer(path.read_text(encoding="utf-8"))]
