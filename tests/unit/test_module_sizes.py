"""Runtime modules stay small enough to be read whole in review (STYLE.md §1: split past about 500 lines).

Covers every hand-written module of the runtime package and of the shared rules package; the
generated kubeletapi stubs (``*_pb2*.py``, written by ``python -m sriov_dra.kubeletapi.generate``)
are not ours to split. A module over the limit is split by sub-concern; the allowlist below holds
only the modules that could not be split yet, each with the reason, and an entry fails once its
module is back under the limit (so the list only ever shrinks).
"""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TREES = (
    ROOT / "runtime" / "sriov_dra",
    ROOT / "plugins" / "module_utils" / "sriov_dra_rules",
    ROOT / "lab" / "sriov_dra_lab",
)
MAX_LINES = 500

ALLOWED_OVER_LIMIT: dict[str, str] = {
    "lab/sriov_dra_lab/realnode.py": (
        "another engineer's module (real kubelet nodes, lab/realnode.py), committed minutes before "
        "this split session and still changing; split it (node setup / kubelet / services) once it settles"
    ),
}


def _modules() -> list[Path]:
    return sorted(p for tree in TREES for p in tree.rglob("*.py") if "_pb2" not in p.name)


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _rel(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


@pytest.mark.parametrize("path", _modules(), ids=_rel)
def test_runtime_module_is_at_most_500_lines_or_allowlisted_with_a_reason(path: Path) -> None:
    lines = _lines(path)
    if _rel(path) in ALLOWED_OVER_LIMIT:
        assert lines > MAX_LINES, (
            f"{_rel(path)} has {lines} lines, within the limit: remove it from ALLOWED_OVER_LIMIT"
        )
        return
    assert lines <= MAX_LINES, (
        f"{_rel(path)} has {lines} lines, over {MAX_LINES}: split it by sub-concern (STYLE.md §1), "
        "keeping its public names where callers use them"
    )


def test_the_size_rule_sees_the_whole_runtime_package() -> None:
    modules = {_rel(p) for p in _modules()}
    assert "runtime/sriov_dra/core/policies.py" in modules
    assert "plugins/module_utils/sriov_dra_rules/strictjson.py" in modules
    assert not any("_pb2" in m for m in modules)
