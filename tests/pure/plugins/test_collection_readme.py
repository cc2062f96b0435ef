"""The collection's README (what Galaxy shows) names every role, playbook, module and filter it ships."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
LAB_ONLY_PLAYBOOKS = {"lab"}
"""``playbooks/lab.yml`` installs the lab, not a cluster: the README leaves it out."""


def _content_row(kind: str) -> set[str]:
    text = (REPO / "collection" / "README.md").read_text()
    row = re.search(rf"^\| {kind} \|(.*)\|$", text, re.MULTILINE)
    assert row, f"collection/README.md has no '| {kind} |' row in its Content table"
    return {name.split(".")[-1] for name in re.findall(r"`([a-z_.]+)`", row.group(1))}


def test_the_collection_readme_names_every_shipped_role_playbook_module_and_filter() -> None:
    shipped = {
        "roles": {p.name for p in (REPO / "roles").iterdir() if (p / "tasks").is_dir()},
        "playbooks": {p.stem for p in (REPO / "playbooks").glob("*.yml")} - LAB_ONLY_PLAYBOOKS,
        "modules": {p.stem for p in (REPO / "plugins" / "modules").glob("*.py") if p.stem != "__init__"},
        "filters": {p.stem for p in (REPO / "plugins" / "filter").glob("*.yml")},
    }
    missing = {kind: sorted(names - _content_row(kind)) for kind, names in shipped.items()}
    assert missing == {kind: [] for kind in shipped}
