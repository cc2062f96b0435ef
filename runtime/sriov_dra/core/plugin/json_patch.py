"""JSON Patch (RFC 6902) documents with optimistic-concurrency ``test`` operations.

Builds the patch bodies our parts send to the API server: RFC 6901 pointer escaping, ``test``
preconditions on ``/metadata/uid`` and ``/metadata/resourceVersion``, and minimal operations that
turn one annotation map into another, creating ``/metadata/annotations`` under the same
preconditions when it is absent (docs/design.md#selections, docs/design.md#release). Sends nothing; standard library and ``errors`` only.
"""

from __future__ import annotations

from collections.abc import Mapping
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


def pointer(*tokens: str) -> str:
    """Build a JSON Pointer from unescaped tokens: ``pointer("metadata", "annotations", k)``.

    Shapes: ``""`` for no tokens, else ``/`` + escaped tokens joined by ``/``.
    """
    return "".join("/" + escape_token(t) for t in tokens)


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
