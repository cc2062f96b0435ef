"""What one SriovResourcePolicy/DeviceAttributes evaluation finds wrong, and where.

:class:`Diagnostic` (one problem, on the object and field that caused it) and the
:class:`Findings` collector the evaluation's parsers share (structural errors raised at the end,
diagnostics returned). Two reading rules hold for every parser: objects are indexed by a
nonempty, unique ``metadata.name``, and only an absent field takes its default, so a wrong-typed
``{}`` or ``0`` is still reported (docs/design.md#policy-precedence). Never decides which device
a config claims, never raises before every problem is collected.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sriov_dra_rules import errors


@dataclass(frozen=True)
class Diagnostic:
    """One problem found while evaluating, attached to the object and field that caused it.

    ``blocking`` is true when the problem makes devices unavailable (claimed and blocked).
    """

    reason: errors.Reason
    source: str
    path: str
    message: str
    blocking: bool

    def __str__(self) -> str:
        return f"{self.reason}: {self.source} {self.path}: {self.message}"


class Findings:
    """Collects structural errors (raised at the end) and diagnostics (returned).

    ``managed`` selects the auto-attach rules of docs/design.md#eligibility: what the driver cannot honour
    exactly blocks its devices instead of being a warning.
    """

    def __init__(self, managed: bool) -> None:
        self.managed = managed
        self.structural: list[errors.FieldError] = []
        self.diagnostics: set[Diagnostic] = set()

    def note(self, reason: errors.Reason, source: str, path: str, message: str, blocking: bool) -> None:
        """Record one diagnostic (a set: the same problem found twice is reported once)."""
        self.diagnostics.add(Diagnostic(reason, source, path, message, blocking))

    def unsupported(self, source: str, path: str, message: str, reasons: set[errors.Reason]) -> None:
        """Managed: a blocking UnsupportedResourceFilter; compatibility: a warning only."""
        self.note(errors.Reason.UNSUPPORTED_RESOURCE_FILTER, source, path, message, self.managed)
        if self.managed:
            reasons.add(errors.Reason.UNSUPPORTED_RESOURCE_FILTER)


def index_by_name(
    raw: Sequence[Mapping[str, object]], kind: str, ctx: Findings
) -> dict[str, Mapping[str, object]]:
    """Index objects by ``metadata.name``; a missing or duplicate name is structural.

    Shapes: ``kind`` is the object kind used in error paths (``SriovResourcePolicy``); the result
    maps each valid name to its object, the first of a duplicated name kept.
    """
    out: dict[str, Mapping[str, object]] = {}
    for index, obj in enumerate(raw):
        meta = obj.get("metadata") if isinstance(obj, Mapping) else None
        name = meta.get("name") if isinstance(meta, Mapping) else None
        if not isinstance(name, str) or not name:
            ctx.structural.append(
                errors.FieldError(f"{kind}[{index}].metadata.name", "must be a nonempty string")
            )
        elif name in out:
            ctx.structural.append(errors.FieldError(f"{kind}/{name}", "duplicate object name"))
        else:
            out[name] = obj
    return out


def or_default(value: object, default: object) -> object:
    """``value`` unless it is absent (``None``), so a wrong-typed ``{}`` or ``0`` is still reported."""
    return default if value is None else value
