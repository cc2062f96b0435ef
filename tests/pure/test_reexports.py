"""Callers import a name from the module that defines it: no module but a package's ``__init__`` re-exports.

A module re-exports a name when it imports the name from elsewhere and then hands it on: lists it in
``__all__``, imports it as ``X as X`` (the typing convention for "re-exported"), or another module
takes it from there (``from m import X`` or ``m.X``, ``m`` bound to the module by an import). The walk
reads the syntax trees of the product, the lab and the collection's shared rules (the modules that
can re-export) and of every caller in the repository (those plus ``plugins/``, ``tests/``,
``bench/`` and ``tools/``). A package's ``__init__`` may gather names on purpose and is not checked.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE_ROOTS = (REPO / "runtime", REPO / "lab", REPO / "plugins" / "module_utils")
PACKAGES = ("sriov_dra", "sriov_dra_lab", "sriov_dra_rules")
CALLER_DIRS = ("runtime", "lab", "plugins", "tests", "bench", "tools")
COLLECTION_PREFIX = "ansible_collections.sriovnet.dra.plugins.module_utils."


@dataclass
class Tree:
    """The importable modules under some roots: dotted name -> file, and what each imports by name."""

    files: dict[str, Path] = field(default_factory=dict)
    imported: dict[str, dict[str, str]] = field(default_factory=dict)
    """Per module that is not a package: local name -> module it was imported from."""
    as_itself: dict[str, set[str]] = field(default_factory=dict)
    all_names: dict[str, list[str]] = field(default_factory=dict)


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The module ``node`` imports from, with a relative import resolved against ``module``."""
    name = node.module or ""
    if not node.level:
        return name.removeprefix(COLLECTION_PREFIX)
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([name] if name else []))


def read_tree(roots: tuple[Path, ...], packages: tuple[str, ...]) -> Tree:
    tree = Tree()
    for root in roots:
        for package in packages:
            for path in sorted((root / package).rglob("*.py")) if (root / package).is_dir() else []:
                tree.files[module_name(path, root)] = path
    for module, path in tree.files.items():
        if path.name == "__init__.py":
            continue
        syntax = ast.parse(path.read_text())
        imported: dict[str, str] = {}
        itself: set[str] = set()
        for node in top_level(syntax.body):
            if isinstance(node, ast.ImportFrom):
                source = absolute(node, module, is_package=False)
                for alias in node.names:
                    if f"{source}.{alias.name}" in tree.files:
                        continue  # a module, bound as a module
                    imported[alias.asname or alias.name] = source
                    if alias.asname == alias.name:
                        itself.add(alias.name)
            elif isinstance(node, ast.Assign) and any(
                isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
            ):
                tree.all_names[module] = list(ast.literal_eval(node.value))
        tree.imported[module], tree.as_itself[module] = imported, itself
    return tree


def top_level(body: list[ast.stmt]) -> Iterator[ast.stmt]:
    """The module's statements, with those under a top-level ``if`` or ``try`` (``TYPE_CHECKING``, fallbacks)."""
    for node in body:
        yield node
        if isinstance(node, ast.If | ast.Try):
            for inner in (node.body, node.orelse, getattr(node, "finalbody", [])):
                yield from top_level(inner)
            for handler in getattr(node, "handlers", []):
                yield from top_level(handler.body)


def caller_module(path: Path, repo: Path, roots: tuple[Path, ...]) -> tuple[str, bool]:
    for root in roots:
        if path.is_relative_to(root):
            return module_name(path, root), path.name == "__init__.py"
    return module_name(path, repo), path.name == "__init__.py"


def reexports(
    repo: Path, roots: tuple[Path, ...], packages: tuple[str, ...], callers: tuple[str, ...]
) -> set[str]:
    """Every re-export found, as ``module.name: where``."""
    tree = read_tree(roots, packages)
    found: set[str] = set()
    for module, names in tree.imported.items():
        found |= {f"{module}.{n}: imported as itself" for n in tree.as_itself[module]}
        found |= {f"{module}.{n}: in __all__" for n in tree.all_names.get(module, []) if n in names}
    for directory in callers:
        for path in sorted((repo / directory).rglob("*.py")):
            module, is_package = caller_module(path, repo, roots)
            syntax = ast.parse(path.read_text())
            bound: dict[str, str] = {}
            for node in ast.walk(syntax):
                if isinstance(node, ast.ImportFrom):
                    source = absolute(node, module, is_package)
                    for alias in node.names:
                        if f"{source}.{alias.name}" in tree.files:
                            bound[alias.asname or alias.name] = f"{source}.{alias.name}"
                        elif alias.name in tree.imported.get(source, {}):
                            found.add(
                                f"{source}.{alias.name}: imported by {path.relative_to(repo)}:{node.lineno}"
                            )
                elif isinstance(node, ast.Import):
                    bound |= {a.asname: a.name for a in node.names if a.asname and a.name in tree.files}
            for node in ast.walk(syntax):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in bound
                ):
                    source = bound[node.value.id]
                    if node.attr in tree.imported.get(source, {}):
                        found.add(f"{source}.{node.attr}: used by {path.relative_to(repo)}:{node.lineno}")
    return found


def test_no_module_but_a_package_init_reexports_a_name_defined_elsewhere() -> None:
    found = sorted(reexports(REPO, PACKAGE_ROOTS, PACKAGES, CALLER_DIRS))
    assert found == [], (
        "import these names from the module that defines them, and drop them from the module named"
    )


def test_the_walk_finds_each_kind_of_reexport(tmp_path: Path) -> None:
    package = tmp_path / "src" / "sriov_dra"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from sriov_dra.origin import NAME\n")
    (package / "origin.py").write_text("NAME = 1\nOTHER = 2\nTHIRD = 3\nFOURTH = 4\n")
    (package / "middle.py").write_text(
        "from sriov_dra.origin import NAME\nfrom .origin import OTHER as OTHER\nfrom . import origin\n"
        "from sriov_dra.origin import THIRD, FOURTH\n__all__ = ['THIRD']\n"
    )
    (package / "caller.py").write_text(
        "from sriov_dra.middle import NAME\nfrom sriov_dra import middle\nfrom sriov_dra import NAME as N\n"
        "print(middle.FOURTH, middle.origin.NAME, N)\n"
    )
    found = reexports(tmp_path, (tmp_path / "src",), ("sriov_dra",), ("src",))
    assert {f.split(": ")[0] + ": " + f.split(": ")[1].split(" ")[0] for f in found} == {
        "sriov_dra.middle.NAME: imported",
        "sriov_dra.middle.OTHER: imported",
        "sriov_dra.middle.THIRD: in",
        "sriov_dra.middle.FOURTH: used",
    }
