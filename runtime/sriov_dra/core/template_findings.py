"""What one render of a network template found wrong, and the root of every path it names.

The findings collector shared by the renderer's checks (``render``, ``template_layout``,
``template_fields``) and the rule that turns them into one error (docs/design.md#render): every
problem is collected first, then raised together, with reason ``InvalidNetworkTemplate`` if any
is malformed input, else ``UnsupportedNetworkTemplate``. Never stops at the first problem.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final, NoReturn

from sriov_dra_rules import errors

CONFIG_PATH: Final = "spec.config"
"""The root of every path a template finding names (``spec.config.plugins[1].type``)."""


@dataclass
class TemplateFindings:
    """Problems collected during one render; any ``invalid`` one makes the reason Invalid."""

    items: list[errors.FieldError] = field(default_factory=list)
    any_invalid: bool = False

    def invalid(self, path: str, message: str) -> None:
        """Record malformed input (the render then fails with ``InvalidNetworkTemplate``)."""
        self.items.append(errors.FieldError(path, message))
        self.any_invalid = True

    def unsupported(self, path: str, message: str) -> None:
        """Record a valid shape this mode cannot bind safely (``UnsupportedNetworkTemplate``)."""
        self.items.append(errors.FieldError(path, message))


def raise_findings(found: TemplateFindings, summary: str, *, cause: BaseException | None = None) -> NoReturn:
    """Raise every finding at once as errors.InvalidSpec named by ``summary``.

    Raises: errors.InvalidSpec, reason ``InvalidNetworkTemplate`` if any finding is invalid,
    else ``UnsupportedNetworkTemplate``; ``cause`` becomes its ``__cause__``.
    """
    reason = (
        errors.Reason.INVALID_NETWORK_TEMPLATE
        if found.any_invalid
        else errors.Reason.UNSUPPORTED_NETWORK_TEMPLATE
    )
    raise errors.InvalidSpec(summary, reason=reason, errors=found.items) from cause
