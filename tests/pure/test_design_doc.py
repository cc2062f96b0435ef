"""docs/design.md stays citable: every anchor cited in the tree exists, every error reason is in it.

Code, tests and docs cite the contract as ``docs/design.md#<anchor>`` (inside ``docs/``:
``design.md#<anchor>``) and other pages the same way. A cited anchor must be a heading of that
page under GitHub's slug rule, every ``Reason`` of ``sriov_dra_rules.errors`` must have a row in
the page's Errors table, and every repository path the page names must exist.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from pathlib import Path

from sriov_dra_rules import errors

ROOT = Path(__file__).resolve().parents[2]
DESIGN = ROOT / "docs" / "design.md"
CITING = ("runtime", "plugins", "roles", "playbooks", "lab", "tests", "bench", "docs")
CITING_FILES = ("README.md", "CONTRIBUTING.md")
SKIP_DIRS = frozenset({"__pycache__", ".venv", "node_modules", ".git", ".mypy_cache", ".ruff_cache"})
TEXT_SUFFIXES = frozenset(
    {".py", ".md", ".yml", ".yaml", ".j2", ".txt", ".toml", ".cfg", ".sh", ".json", ".ini"}
)

URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://\S+")
LINK = re.compile(r"(?<![\w./-])((?:\.{1,2}/|[\w.-]+/)*[\w.-]+\.md)#([\w-]+)")
SELF_LINK = re.compile(r"\]\(#([\w-]+)\)")
FENCE = re.compile(r"^\s*(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
REPO_PATH = re.compile(
    r"`((?:runtime|plugins|roles|playbooks|lab|tests|bench|docs|examples|tools|collection)/[\w./-]*[\w/])`"
)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: lowercase, drop all but letters/digits/spaces/-/_, spaces to -."""
    kept = "".join(ch for ch in heading.lower() if ch.isalnum() or ch in " -_")
    return kept.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    """Every anchor GitHub gives ``page``'s headings (repeats get ``-1``, ``-2``, ...)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    fenced = False
    for line in page.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line):
            fenced = not fenced
            continue
        match = HEADING.match(line)
        if fenced or match is None:
            continue
        base = slug(match.group(2))
        count = seen.get(base, 0)
        seen[base] = count + 1
        out.add(base if count == 0 else f"{base}-{count}")
    return out


def _citing_files() -> Iterator[Path]:
    for name in CITING_FILES:
        if (ROOT / name).is_file():
            yield ROOT / name
    for top in CITING:
        for path in sorted((ROOT / top).rglob("*")):
            if path.is_file() and path.suffix in TEXT_SUFFIXES and not SKIP_DIRS & set(path.parts):
                yield path


def _page(citing: Path, target: str) -> Path | None:
    """The page a link names: relative to the citing file, else to the root, else under ``docs/``."""
    for base in (citing.parent, ROOT, ROOT / "docs"):
        candidate = (base / target).resolve()
        if candidate.is_file():
            return candidate
    return None


@functools.cache
def citations() -> list[tuple[str, str, str]]:
    """``(file:line, page, anchor)`` of every ``<page>.md#<anchor>`` in the citing files (URLs aside)."""
    found = []
    for path in _citing_files():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        for number, line in enumerate(text.splitlines(), 1):
            for match in LINK.finditer(URL.sub(" ", line)):
                found.append((f"{path.relative_to(ROOT)}:{number}", match.group(1), match.group(2)))
    return found


def errors_table_reasons() -> list[str]:
    """The reason named in the first cell of each row of the table under ``## Errors``."""
    text = DESIGN.read_text(encoding="utf-8")
    section = text.split("\n## Errors\n", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\|\s*`([A-Za-z]+)`\s*\|", section, flags=re.MULTILINE)


def test_the_slug_rule_matches_githubs() -> None:
    assert slug("Example: gpu-nic-pairs") == "example-gpu-nic-pairs"
    assert slug("CNI teardown") == "cni-teardown"
    assert slug("What each part buys") == "what-each-part-buys"
    assert slug("`inspect`, `orphans` and preflight") == "inspect-orphans-and-preflight"


def test_every_cited_anchor_is_a_heading_of_its_page() -> None:
    broken = []
    cache: dict[Path, set[str]] = {}
    for where, target, anchor in citations():
        page = _page(ROOT / where.rsplit(":", 1)[0], target)
        if page is None:
            broken.append(f"{where}: {target}#{anchor}: no such page")
            continue
        if page not in cache:
            cache[page] = anchors(page)
        if anchor not in cache[page]:
            broken.append(f"{where}: {target}#{anchor}: no heading with that anchor")
    assert not broken, "citations that do not resolve (fix the anchor or add the heading):\n" + "\n".join(
        broken
    )


def test_every_in_page_link_of_the_docs_is_a_heading_of_its_page() -> None:
    broken = [
        f"{page.relative_to(ROOT)}: #{anchor}"
        for page in sorted((ROOT / "docs").glob("*.md"))
        for anchor in SELF_LINK.findall(page.read_text(encoding="utf-8"))
        if anchor not in anchors(page)
    ]
    assert not broken, "in-page links without a heading: " + ", ".join(broken)


def test_the_design_page_is_cited_somewhere_so_the_scan_is_not_empty() -> None:
    assert any(target.endswith("design.md") for _, target, _ in citations())


def test_every_error_reason_has_a_row_in_the_errors_table() -> None:
    rows = errors_table_reasons()
    defined = {r.value for r in errors.Reason}
    assert not defined - set(rows), f"reasons without a row under ## Errors: {sorted(defined - set(rows))}"
    assert not set(rows) - defined, f"rows naming no errors.Reason: {sorted(set(rows) - defined)}"
    assert len(rows) == len(set(rows)), "a reason has two rows"


def test_every_repository_path_the_design_page_names_exists() -> None:
    cited = sorted(set(REPO_PATH.findall(DESIGN.read_text(encoding="utf-8"))))
    assert cited, "the design page names no repository path"
    missing = [c for c in cited if not (ROOT / c.rstrip("/")).exists()]
    assert not missing, f"docs/design.md names paths that do not exist (update the page): {missing}"
