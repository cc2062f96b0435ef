"""The API server's side of a JSON Patch (RFC 6902), for tests: pointer parsing and applying.

A test oracle, not part of the product: :func:`apply_patch` applies a patch the way the API server
does (``test`` failure is a conflict, a missing path is refused), so the fakes' patch endpoints and
the tests of the product's patch builders (``sriov_dra.core.plugin.json_patch``) check a patch by
applying it. :func:`unescape_token` and :func:`parse_pointer` undo the product's pointer building.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from sriov_dra.core.plugin.json_patch import PatchOp, pointer
from sriov_dra_rules import errors


def unescape_token(token: str) -> str:
    """Undo :func:`escape_token`.

    Raises: ContractViolation when ``~`` is followed by anything but ``0`` or ``1``.
    Source: RFC 6901 §4 (``~1`` → ``/`` first, then ``~0`` → ``~``).
    """
    rest = token
    while "~" in rest:
        i = rest.index("~")
        if rest[i + 1 : i + 2] not in ("0", "1"):
            raise errors.ContractViolation(
                f"JSON Pointer token {token!r} has '~' not followed by '0' or '1'; escape '~' as '~0'"
            )
        rest = rest[i + 2 :]
    return token.replace("~1", "/").replace("~0", "~")


def parse_pointer(ptr: str) -> tuple[str, ...]:
    """Split a JSON Pointer into unescaped tokens.

    Raises: ContractViolation for a non-empty pointer that does not start with ``/`` or holds a
    bad ``~`` escape.
    """
    if ptr == "":
        return ()
    if not ptr.startswith("/"):
        raise errors.ContractViolation(f"JSON Pointer {ptr!r} must be empty or start with '/'")
    return tuple(unescape_token(t) for t in ptr[1:].split("/"))


def apply_patch(document: Any, ops: Sequence[PatchOp]) -> Any:
    """Apply ``ops`` to a deep copy of ``document`` and return the copy (RFC 6902 semantics).

    Supports ``add``, ``remove``, ``replace`` and ``test`` on objects and arrays (``-`` appends);
    ``test`` compares with JSON equality (``1`` and ``True`` differ). The input is never mutated,
    so a failed patch leaves nothing half-applied.

    Raises: Conflict when a ``test`` fails (the object changed: re-read and recompute);
    ContractViolation when a path does not exist or an operation is malformed.
    """
    doc = copy.deepcopy(document)
    for index, op in enumerate(ops):
        doc = _apply_one(doc, op, index)
    return doc


def _json_equal(a: Any, b: Any) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_json_equal(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _array_index(container: list[Any], token: str, *, allow_end: bool, where: str) -> int:
    if allow_end and token == "-":
        return len(container)
    if not token.isdigit() or (token != "0" and token.startswith("0")):
        raise errors.ContractViolation(f"{where}: array index {token!r} is not a non-negative integer")
    idx = int(token)
    limit = len(container) if allow_end else len(container) - 1
    if idx > limit:
        raise errors.ContractViolation(f"{where}: array index {idx} is out of range")
    return idx


def _apply_one(doc: Any, op: PatchOp, index: int) -> Any:
    name, path = op.get("op"), op.get("path")
    where = f"patch[{index}] ({name} {path!r})"
    if not isinstance(path, str):
        raise errors.ContractViolation(f"{where}: 'path' must be a string")
    tokens = parse_pointer(path)
    if name in ("add", "replace", "test") and "value" not in op:
        raise errors.ContractViolation(f"{where}: operation needs a 'value'")
    if not tokens:
        if name == "test":
            if not _json_equal(doc, op["value"]):
                raise errors.Conflict(f"{where}: test failed on the whole document; re-read and recompute")
            return doc
        if name in ("add", "replace"):
            return copy.deepcopy(op["value"])
        raise errors.ContractViolation(f"{where}: cannot remove the whole document")
    parent: Any = doc
    for depth, token in enumerate(tokens[:-1]):
        if isinstance(parent, dict) and token in parent:
            parent = parent[token]
        elif isinstance(parent, list):
            parent = parent[_array_index(parent, token, allow_end=False, where=where)]
        else:
            missing = pointer(*tokens[: depth + 1])
            raise errors.ContractViolation(f"{where}: parent {missing!r} does not exist")
    last = tokens[-1]
    if isinstance(parent, dict):
        _apply_to_object(parent, last, op, where)
    elif isinstance(parent, list):
        _apply_to_array(parent, last, op, where)
    else:
        raise errors.ContractViolation(f"{where}: parent is neither an object nor an array")
    return doc


def _apply_to_object(parent: dict[str, Any], key: str, op: PatchOp, where: str) -> None:
    name = op["op"]
    if name == "add":
        parent[key] = copy.deepcopy(op["value"])
        return
    if key not in parent:
        raise errors.ContractViolation(f"{where}: member {key!r} does not exist")
    if name == "remove":
        del parent[key]
    elif name == "replace":
        parent[key] = copy.deepcopy(op["value"])
    elif name == "test":
        if not _json_equal(parent[key], op["value"]):
            raise errors.Conflict(
                f"{where}: test failed: found {parent[key]!r}, expected {op['value']!r}; "
                "the object changed, re-read it and recompute the patch"
            )
    else:
        raise errors.ContractViolation(f"{where}: unsupported operation {name!r}")


def _apply_to_array(parent: list[Any], token: str, op: PatchOp, where: str) -> None:
    name = op["op"]
    if name == "add":
        parent.insert(_array_index(parent, token, allow_end=True, where=where), copy.deepcopy(op["value"]))
        return
    idx = _array_index(parent, token, allow_end=False, where=where)
    if name == "remove":
        del parent[idx]
    elif name == "replace":
        parent[idx] = copy.deepcopy(op["value"])
    elif name == "test":
        if not _json_equal(parent[idx], op["value"]):
            raise errors.Conflict(
                f"{where}: test failed: found {parent[idx]!r}, expected {op['value']!r}; "
                "the object changed, re-read it and recompute the patch"
            )
    else:
        raise errors.ContractViolation(f"{where}: unsupported operation {name!r}")
