"""The one YAML loader of the runtime: PyYAML's safe loader, refusing a mapping key given twice.

For YAML a person wrote (the operator's ``--supported-nic-ids`` file, the manifests and examples
the lab reads): ``yaml.safe_load`` silently keeps the last of two equal keys, so
:class:`StrictSafeLoader` refuses each key equal to an earlier one of the same mapping once
constructed (``1`` and ``1.0``, ``true`` and ``yes`` too), naming its path and both lines; merge
keys keep their meaning. In ``host`` because PyYAML is not standard library. Text to values only;
files are read only in :func:`read` and :func:`read_all`. Source: YAML 1.2 §3.2.1.1.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import yaml

from sriov_dra_rules import errors, strict_json

_MERGE_TAG: Final = "tag:yaml.org,2002:merge"


class StrictSafeLoader(yaml.SafeLoader):
    """``yaml.SafeLoader`` that raises :class:`errors.InvalidSpec` for a repeated mapping key.

    ``path`` names the document root in error paths (``$`` unless a caller sets it).
    """

    path: str = "$"

    def construct_document(self, node: yaml.Node) -> Any:
        """Check every mapping under ``node`` for repeated keys, then construct it as SafeLoader does."""
        errors.raise_if_any(_repeated_keys(self, node, self.path), "YAML has a repeated mapping key")
        return super().construct_document(node)


def _repeated_keys(loader: yaml.SafeLoader, root: yaml.Node, path: str) -> list[errors.FieldError]:
    found: list[tuple[int, int, errors.FieldError]] = []
    visited: set[int] = set()  # aliases share nodes, and may form cycles
    stack: list[tuple[yaml.Node, str]] = [(root, path)]
    while stack:
        node, node_path = stack.pop()
        if id(node) in visited:
            continue
        visited.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            stack.extend((child, strict_json.index_path(node_path, i)) for i, child in enumerate(node.value))
        elif isinstance(node, yaml.MappingNode):
            first_at: dict[object, str] = {}
            for key_node, value_node in node.value:
                key, label = _key_of(loader, key_node)
                child_path = strict_json.key_path(node_path, label)
                stack.append((value_node, child_path))
                mark = key_node.start_mark
                at = f"line {mark.line + 1} column {mark.column + 1}"
                if key is None:
                    continue
                if key in first_at:
                    message = (
                        f"repeated key {label!r} (first at {first_at[key]}, again at {at}); "
                        "YAML readers disagree on which value wins; keep exactly one"
                    )
                    found.append((mark.line, mark.column, errors.FieldError(child_path, message)))
                else:
                    first_at[key] = at
    return [problem for _, _, problem in sorted(found, key=lambda item: item[:2])]


def _key_of(loader: yaml.SafeLoader, key_node: yaml.Node) -> tuple[object | None, str]:
    """``(comparable key or None, its text for a path)``; None for a key that cannot repeat here."""
    if not isinstance(key_node, yaml.ScalarNode):
        return None, "?"  # a collection key: SafeLoader refuses it as unhashable when it constructs
    if key_node.tag == _MERGE_TAG:
        return ("<<",), "<<"  # two merge keys in one mapping are a repeated key too
    key = loader.construct_object(key_node)
    try:
        hash(key)
    except TypeError:
        return None, str(key_node.value)
    return key, str(key_node.value)  # equal as dict keys are: 1, 1.0 and true collide, "1" does not


def load(text: str, *, source: str, path: str = "$") -> Any:
    """Load one YAML document strictly (``yaml.safe_load`` semantics otherwise; empty text is None).

    Shapes: the plain values ``yaml.safe_load`` gives (typed ``Any`` as it is: callers check).

    ``source`` names the text (a file path) in the error summary.
    Raises: errors.InvalidSpec naming ``source``: one FieldError per repeated key (path and
    both lines), or malformed YAML with its line and column.
    """
    return _load(text, source, path, all_documents=False)


def load_all(text: str, *, source: str, path: str = "$") -> list[Any]:
    """Load every document of a YAML stream strictly; document ``i`` has the path ``path[i]``.

    Raises: errors.InvalidSpec as :func:`load`.
    """
    loaded = _load(text, source, path, all_documents=True)
    assert isinstance(loaded, list)
    return loaded


def read(file: Path) -> Any:
    """:func:`load` the UTF-8 text of ``file``. Raises: OSError; errors.InvalidSpec as :func:`load`."""
    return load(file.read_text(encoding="utf-8"), source=str(file))


def read_all(file: Path) -> list[Any]:
    """:func:`load_all` the UTF-8 text of ``file``. Raises: OSError; errors.InvalidSpec as :func:`load`."""
    return load_all(file.read_text(encoding="utf-8"), source=str(file))


def _load(text: str, source: str, path: str, *, all_documents: bool) -> object:
    try:  # the reader refuses a non-printable character (NUL, ...) as soon as it is built
        loader = StrictSafeLoader(text)
    except yaml.YAMLError as exc:
        problem = f"malformed YAML: {exc}; remove the control character"
        raise errors.InvalidSpec(
            f"{source} is not strict YAML", errors=[errors.FieldError(path, problem)]
        ) from None
    try:
        if not all_documents:
            loader.path = path
            return loader.get_single_data()
        documents: list[object] = []
        while loader.check_data():  # type: ignore[no-untyped-call]  # untyped in types-PyYAML
            loader.path = strict_json.index_path(path, len(documents))
            documents.append(loader.get_data())
        return documents
    except errors.InvalidSpec as exc:
        raise errors.InvalidSpec(f"{source} is not strict YAML", errors=exc.errors) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        where = f" at line {mark.line + 1} column {mark.column + 1}" if mark is not None else ""
        problem = f"malformed YAML{where}: {exc.problem or exc.context}; fix the YAML syntax"
        raise errors.InvalidSpec(
            f"{source} is not strict YAML", errors=[errors.FieldError(loader.path, problem)]
        ) from None
    except yaml.YAMLError as exc:
        raise errors.InvalidSpec(
            f"{source} is not strict YAML", errors=[errors.FieldError(loader.path, f"malformed YAML: {exc}")]
        ) from None
    except ValueError as exc:  # a scalar PyYAML cannot convert, e.g. an integer of 4,301 digits
        problem = f"a value cannot be read ({exc}); use a shorter number or quote it as a string"
        raise errors.InvalidSpec(
            f"{source} is not strict YAML", errors=[errors.FieldError(loader.path, problem)]
        ) from None
    except RecursionError:
        problem = "collections are nested too deeply to load; flatten the YAML"
        raise errors.InvalidSpec(
            f"{source} is not strict YAML", errors=[errors.FieldError(loader.path, problem)]
        ) from None
    finally:
        loader.dispose()
