"""The plugin's fault seam: named step boundaries of prepare and unprepare, and the hook type.

The claim handler calls its fault hook with one of :data:`PREPARE_POINTS` or
:data:`UNPREPARE_POINTS`, the plugin process with one of :data:`HANDOVER_POINTS`, right after the
step the name describes; production passes
:data:`NO_FAULTS`. The crash tests, which prove that killing the plugin between any two steps
leaves a state the next call completes, pass the lab launcher's SIGKILL hook as
``PluginSeams(fault=...)`` (docs/design.md#fault-injection). The product ships no active hook.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

PREPARE_POINTS: Final = (
    "prepare:checkpointed",
    "prepare:bound",
    "prepare:claim-cdi",
    "prepare:pod-cdi",
    "prepare:status",
)
"""Boundaries of a first prepare, in order: record persisted, drivers bound, claim CDI spec
written, Pod CDI spec written, claim status written (before the device metadata files and the
result)."""

UNPREPARE_POINTS: Final = (
    "unprepare:restored",
    "unprepare:claim-cdi",
    "unprepare:pod-cdi",
    "unprepare:status",
    "unprepare:forgotten",
)
"""Boundaries of an unprepare, in order: drivers restored, claim CDI spec removed, Pod CDI spec
synced, claim status cleared, record deleted (just before the result is returned)."""

HANDOVER_POINTS: Final = (
    "handover:drained",
    "handover:taken",
)
"""Boundaries of a rolling update's hand-over (docs/plugin.md#rolling-update): the old instance
drained its calls and stopped its workers (before it releases the writer lock), the new instance
took the writer lock and loaded the checkpoint (before it serves the node)."""

POINTS: Final = PREPARE_POINTS + UNPREPARE_POINTS + HANDOVER_POINTS

FaultHook = Callable[[str], None]
"""Called with a point name after the step it names."""


def no_faults(point: str) -> None:
    """The production hook: does nothing."""


NO_FAULTS: Final[FaultHook] = no_faults
"""The hook production wiring uses."""
