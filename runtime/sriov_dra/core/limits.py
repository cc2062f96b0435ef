"""Kubernetes object-metadata limits, computed exactly as the API server computes them.

Owns the ``metadata.annotations`` size rule (the UTF-8 byte lengths of every key and value sum to
at most 256 KiB), so a write is refused here with an actionable message instead of half-applied
or rejected late (qualified names and label values are validated in
:mod:`sriov_dra_rules.names`). Pure; standard library and the shared rules only.
Source: apimachinery ``ValidateAnnotationsSize``.
"""

from __future__ import annotations

from collections.abc import Mapping

from sriov_dra_rules import errors

TOTAL_ANNOTATION_SIZE_LIMIT_B = 256 * 1024
"""Largest allowed sum of ``len(key) + len(value)`` over all annotations, in bytes (inclusive)."""


def byte_len(text: str) -> int:
    """Length of ``text`` in UTF-8 bytes, as Go's ``len(string)`` counts it.

    Units: bytes. Lone surrogates (impossible in API data, possible in arbitrary Python strings)
    count as three bytes each instead of raising.
    """
    return len(text.encode("utf-8", "surrogatepass"))


def annotations_size(annotations: Mapping[str, str]) -> int:
    """Total annotation size the API server compares against the 256 KiB limit.

    Units: bytes; the sum over all entries of ``len(key) + len(value)`` in UTF-8.
    Source: ``ValidateAnnotationsSize``.
    """
    return sum(byte_len(k) + byte_len(v) for k, v in annotations.items())


def check_annotations_size(annotations: Mapping[str, str], *, obj: str) -> None:
    """Refuse a complete annotation map the API server would reject as too large.

    ``obj`` names the object for the message (``Pod ns/name``). The map must be the complete
    intended ``metadata.annotations`` (every existing annotation plus the ones being written).

    Units: bytes; the limit is inclusive (exactly 262144 bytes is accepted).
    Raises: InvalidSpec with reason ``AnnotationTooLarge`` naming the total, the limit and the
    three largest annotations.
    Nothing partial is published when a large VF count exceeds the limit
    (docs/design.md#selections).
    Source: ``ValidateAnnotationsSize``.
    """
    total = annotations_size(annotations)
    if total <= TOTAL_ANNOTATION_SIZE_LIMIT_B:
        return
    largest = sorted(annotations.items(), key=lambda kv: byte_len(kv[0]) + byte_len(kv[1]), reverse=True)[:3]
    detail = ", ".join(f"{k!r} ({byte_len(k) + byte_len(v)} bytes)" for k, v in largest)
    raise errors.InvalidSpec(
        f"{obj}: metadata.annotations would total {total} bytes, over the Kubernetes limit of "
        f"{TOTAL_ANNOTATION_SIZE_LIMIT_B} bytes (sum of key and value lengths); largest: {detail}. "
        "Nothing was written; reduce the number of managed devices for this Pod or remove "
        "large annotations",
        reason=errors.Reason.ANNOTATION_TOO_LARGE,
    )
