"""JSON Patch (RFC 6902) documents with optimistic-concurrency ``test`` operations.

Builds the patch bodies our parts send to the API server: RFC 6901 pointer escaping, ``test``
preconditions on ``/metadata/uid`` and ``/metadata/resourceVersion``, and minimal operations that
turn one annotation map into another, creating ``/metadata/annotations`` under the same
preconditions when it is absent (docs/design.md#selections, docs/design.md#release). Also a small
pure applier that tests use to check a patch. Sends nothing; standard library and ``errors`` only.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Literal, NotRequired, TypedDict

from sriov_dra_rules import errors

OpName = Literal["add", "remove", "replace", "test"]


class PatchOp(TypedDict):
    """One RFC 6902 operation as sent on the wire (``value`` absent for ``remove``)."""

    op: OpName
    path: str
    value: NotRequired[Any]


def escape_token(token: str) -> str:
    """Escape one reference token for a JSON Pointer.

    Shapes: ``~`` becomes ``~0`` first, then ``/`` becomes ``~1``; the order matters so that
    ``~1`` in a key is not read back as ``/``.
    Source: RFC 6901 §3 and §4.
    """
    return token.replace("~", "~0").replace("/", "~1")


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


def pointer(*tokens: str) -> str:
    """Build a JSON Pointer from unescaped tokens: ``pointer("metadata", "annotations", k)``.

    Shapes: ``""`` for no tokens, else ``/`` + escaped tokens joined by ``/``.
    """
    return "".join("/" + escape_token(t) for t in tokens)


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


def test_op(path: str, value: Any) -> PatchOp:
    """A ``test`` operation: the patch fails unless ``path`` holds exactly ``value``."""
    return {"op": "test", "path": path, "value": value}


def add_op(path: str, value: Any) -> PatchOp:
    """An ``add`` operation (creates or overwrites an object member)."""
    return {"op": "add", "path": path, "value": value}


def replace_op(path: str, value: Any) -> PatchOp:
    """A ``replace`` operation (the member must already exist)."""
    return {"op": "replace", "path": path, "value": value}


def remove_op(path: str) -> PatchOp:
    """A ``remove`` operation (the member must exist)."""
    return {"op": "remove", "path": path}


def metadata_preconditions(uid: str, resource_version: str) -> list[PatchOp]:
    """``test`` operations pinning the exact object: ``/metadata/uid`` then ``/metadata/resourceVersion``.

    Raises: ContractViolation if either value is empty (a precondition on nothing protects nothing).
    Source: docs/design.md#selections, docs/design.md#release.
    """
    if not uid or not resource_version:
        raise errors.ContractViolation(
            f"JSON Patch preconditions need a non-empty uid and resourceVersion "
            f"(got uid={uid!r}, resourceVersion={resource_version!r}); re-read the object first"
        )
    return [
        test_op(pointer("metadata", "uid"), uid),
        test_op(pointer("metadata", "resourceVersion"), resource_version),
    ]


def annotation_ops(before: Mapping[str, str] | None, after: Mapping[str, str]) -> list[PatchOp]:
    """Operations that turn ``metadata.annotations`` from ``before`` into ``after``.

    ``before`` is ``None`` when the object has no ``metadata.annotations`` map; then one ``add``
    creates the whole map (an ``add`` below a missing parent would fail). Otherwise keys are
    visited in sorted order: new keys are added, changed keys replaced, vanished keys removed;
    unchanged keys produce nothing. An unchanged map yields ``[]``.

    Shapes: paths ``/metadata/annotations/<escaped key>`` (``/`` in keys becomes ``~1``).
    """
    if before is None:
        return [add_op(pointer("metadata", "annotations"), dict(after))] if after else []
    ops: list[PatchOp] = []
    for key in sorted(set(before) | set(after)):
        path = pointer("metadata", "annotations", key)
        if key not in after:
            ops.append(remove_op(path))
        elif key not in before:
            ops.append(add_op(path, after[key]))
        elif before[key] != after[key]:
            ops.append(replace_op(path, after[key]))
    return ops


def annotations_patch(
    *, uid: str, resource_version: str, before: Mapping[str, str] | None, after: Mapping[str, str]
) -> list[PatchOp]:
    """The full patch for an annotation change: UID and resourceVersion tests, then the changes.

    Returns ``[]`` when nothing changes (no request should be sent).
    Raises: ContractViolation for an empty uid or resourceVersion when a change is needed.
    Source: docs/design.md#selections.
    """
    changes = annotation_ops(before, after)
    if not changes:
        return []
    return [*metadata_preconditions(uid, resource_version), *changes]


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
