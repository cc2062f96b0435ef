"""docs/install.md keeps every step its e2e test runs, each as a marked bash block.

The e2e tier runs the marked blocks against the lab (``tests/e2e/test_install_guide.py``); a step
dropped or renamed on the page, or a marker without its block, fails here first.
"""

from __future__ import annotations

import re

from tests import install_guide


def test_the_page_marks_every_step_once_in_order_each_with_its_bash_block() -> None:
    text = install_guide.GUIDE.read_text(encoding="utf-8")
    markers = re.findall(r"<!-- install-test: ([\w-]+) -->", text)
    assert tuple(markers) == install_guide.STEPS
    found = install_guide.steps()
    assert tuple(name for name, _ in found) == install_guide.STEPS
    assert all(script.strip() for _, script in found)


def test_the_pages_steps_use_only_the_values_it_sets_first() -> None:
    """Every ``$NAME`` a step reads is set in the page's values block, exported by an earlier step, or the shell's."""
    text = install_guide.GUIDE.read_text(encoding="utf-8")
    values = set(re.findall(r"^export (\w+)=", text, re.M))
    known = values | {"HOME", "PATH"}
    for name, script in install_guide.steps():
        used = set(re.findall(r"\$\{?(\w+)", script)) - {"("}
        assert used <= known, f"step {name} reads {sorted(used - known)}, which the page never sets"
        known |= set(re.findall(r"^export (\w+)=", script, re.M))
