"""docs/guard.md#decision-reasons lists exactly the guard's decision reasons, each once."""

from __future__ import annotations

import re
from pathlib import Path

from sriov_dra.guard import decisions

GUARD_PAGE = Path(__file__).resolve().parents[3] / "docs" / "guard.md"


def documented_reasons() -> list[str]:
    """Every reason named in the first cell of a row of the table under ``## Decision reasons``."""
    text = GUARD_PAGE.read_text(encoding="utf-8")
    section = text.split("\n## Decision reasons\n", 1)[1].split("\n## ", 1)[0]
    first_cells = re.findall(r"^\|([^|]*)\|", section, flags=re.MULTILINE)
    return [name for cell in first_cells for name in re.findall(r"`([A-Za-z]+)`", cell)]


def test_every_guard_decision_reason_has_a_row_and_every_row_names_a_reason() -> None:
    documented = documented_reasons()
    defined = {r.value for r in decisions.Reason}
    assert not defined - set(documented), f"reasons without a row: {sorted(defined - set(documented))}"
    assert not set(documented) - defined, f"rows naming no Reason: {sorted(set(documented) - defined)}"
    assert len(documented) == len(set(documented)), "a reason is documented twice"
