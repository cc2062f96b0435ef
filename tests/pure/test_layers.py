"""Layering rules that must hold for every module, read from the syntax tree.

The import-linter contracts (``.importlinter``) are run by ``make lint``, part of ``make check`` and
``make test``.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "runtime" / "sriov_dra"
RULES = Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "sriov_dra_rules"


def imported_modules(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative import: stays inside the package
                found.append((node.lineno, "sriov_dra.core." + (node.module or "")))
            else:
                found.append((node.lineno, node.module or ""))
    return found


CORE_FILES = sorted((PACKAGE / "core").rglob("*.py"))
IO_MODULES = {"os", "io", "socket", "subprocess", "time", "datetime", "pathlib", "random", "threading"}
"""Standard modules that touch the node, the clock or chance: none in core or the pure shared rules."""


@pytest.mark.parametrize("path", CORE_FILES, ids=[p.name for p in CORE_FILES])
def test_core_module_imports_only_stdlib_and_core(path: Path) -> None:
    bad = [
        f"{path.name}:{line}: {mod}"
        for line, mod in imported_modules(path)
        if mod.split(".")[0] not in sys.stdlib_module_names
        and mod != "sriov_dra.core"
        and not mod.startswith("sriov_dra.core.")
        and mod != "sriov_dra_rules"
        and not mod.startswith("sriov_dra_rules.")
    ]
    assert not bad, f"sriov_dra.core must import only the standard library and itself: {bad}"


RULES_FILES = sorted(RULES.rglob("*.py"))
NODE_READING_RULES = {
    "sysfs_read.py",
    "preflight_node.py",
    "cni_install.py",
    "checkpoint_read.py",
    "multus_cache.py",
    "guard_route.py",
}
"""Shared rules modules that read the node; import-linter keeps them to ``sriov_dra.host`` (and the preflight
CLI); ``cni_install`` (the guard's CNI install contract) is read by the guard's installer and the preflight too;
``checkpoint_read`` (the plugin's checkpoint files, read only) by ``host.checkpoint_files`` and the collection's module;
``multus_cache`` (Multus's delegate cache before DEL) and ``guard_route`` (the plugin's checkpoint, through
``checkpoint_read``) by the ``multus-guard`` shim alone."""
PURE_FILES = CORE_FILES + [p for p in RULES_FILES if p.name not in NODE_READING_RULES]


@pytest.mark.parametrize("path", PURE_FILES, ids=[f"{p.parent.name}/{p.name}" for p in PURE_FILES])
def test_core_and_pure_shared_rules_do_no_io_or_clock(path: Path) -> None:
    """core, and the shared rules it may import, are pure; the node readers feed them text."""
    bad = [
        f"{path.name}:{line}: {mod}"
        for line, mod in imported_modules(path)
        if mod.split(".")[0] in IO_MODULES
    ]
    assert not bad, f"core and the pure shared rules do no I/O, read no clock, draw no chance: {bad}"


@pytest.mark.parametrize("path", RULES_FILES, ids=[p.name for p in RULES_FILES])
def test_shared_rules_import_only_stdlib_and_siblings_by_relative_import(path: Path) -> None:
    """Each shared rules module loads under both of its package names (docs/layout.md)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    bad = []
    for node in ast.walk(tree):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        bad += [
            f"{path.name}:{node.lineno}: {n}" for n in names if n.split(".")[0] not in sys.stdlib_module_names
        ]
    assert not bad, f"sriov_dra_rules imports only the standard library and, relatively, itself: {bad}"


def test_shared_rules_live_once_in_git() -> None:
    """No runtime module has the name of a shared rules module (one copy of every rule)."""
    shared = {p.name for p in RULES_FILES} - {"__init__.py"}
    twins = sorted(
        str(p.relative_to(PACKAGE))
        for p in PACKAGE.rglob("*.py")
        if "core" in p.relative_to(PACKAGE).parts and p.name in shared
    )
    assert not twins, f"these shadow a sriov_dra_rules module: {twins}"
