"""README.md stays a page for users: short, with the two commands CI and the lab rely on."""

from __future__ import annotations

from pathlib import Path

README = Path(__file__).resolve().parents[2] / "README.md"
MAX_LINES = 150


def test_the_readme_is_at_most_150_lines_and_shows_the_main_job_and_the_test_command() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= MAX_LINES, "move detail into docs/ and link it"
    assert "make lab " in text and "make test " in text
