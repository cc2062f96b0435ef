"""Modules stay small enough to be read whole in review: split one past about 500 lines by sub-concern.

Covers every hand-written module of the runtime, the shared rules and the lab; the
generated kubeletapi stubs (``*_pb2*.py``, written by ``python -m sriov_dra.kubeletapi.generate``)
are not ours to split. A module over the limit is split by sub-concern; the allowlist below holds
only the modules that could not be split yet, each with the reason, and an entry fails once its
module is back under the limit (so the list only ever shrinks).
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TREES = (
    ROOT / "runtime" / "sriov_dra",
    ROOT / "plugins" / "module_utils" / "sriov_dra_rules",
    ROOT / "lab" / "sriov_dra_lab",
)
MAX_LINES = 500

ALLOWED_OVER_LIMIT: dict[str, str] = {
    "lab/sriov_dra_lab/real_node.py": (
        "another engineer's module (real kubelet nodes, lab/sriov_dra_lab/real_node.py), committed minutes before "
        "this split session and still changing; split it (node setup / kubelet / services) once it settles"
    ),
}


def _modules() -> list[Path]:
    return sorted(p for tree in TREES for p in tree.rglob("*.py") if "_pb2" not in p.name)


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_every_module_is_at_most_500_lines_or_allowlisted_with_a_reason() -> None:
    over: list[str] = []
    back_under: list[str] = []
    for path in _modules():
        lines, rel = _lines(path), _rel(path)
        if rel in ALLOWED_OVER_LIMIT and lines <= MAX_LINES:
            back_under.append(f"{rel} ({lines} lines)")
        elif rel not in ALLOWED_OVER_LIMIT and lines > MAX_LINES:
            over.append(f"{rel} ({lines} lines)")
    assert not over, (
        f"over {MAX_LINES} lines: {', '.join(over)}; split each by sub-concern, "
        "keeping its public names where callers use them"
    )
    assert not back_under, f"within the limit again, remove from ALLOWED_OVER_LIMIT: {', '.join(back_under)}"


def test_the_size_rule_sees_the_whole_runtime_package() -> None:
    modules = {_rel(p) for p in _modules()}
    assert "runtime/sriov_dra/core/policies.py" in modules
    assert "plugins/module_utils/sriov_dra_rules/strict_json.py" in modules
    assert not any("_pb2" in m for m in modules)
