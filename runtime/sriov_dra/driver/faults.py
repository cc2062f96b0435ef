"""FAULT INJECTION for crash tests: kill the plugin process at a named step boundary.

**Test-only.** The cluster tests prove that killing the plugin between any two steps of prepare
or unprepare leaves a state the next call completes. Production wiring passes :data:`NO_FAULTS`
(the default); the entrypoint installs :class:`KillAt` only when the environment variable
:data:`ENV_VAR` names a point, and logs that loudly at startup.

The handler calls its fault hook with one of :data:`PREPARE_POINTS` or :data:`UNPREPARE_POINTS`
right after the step the name describes. :class:`KillAt` then sends SIGKILL to its own process:
no cleanup, no flush, exactly like the node killing the container.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable
from typing import Final

LOG = logging.getLogger(__name__)

ENV_VAR: Final = "SRIOV_DRA_TEST_KILL_AT"
"""Names the point at which the plugin kills itself (tests only)."""

PREPARE_POINTS: Final = (
    "prepare:checkpointed",
    "prepare:bound",
    "prepare:claim-cdi",
    "prepare:pod-cdi",
    "prepare:status",
)
"""Boundaries of a first prepare, in order: record persisted, drivers bound, claim CDI spec
written, Pod CDI spec written, claim status written (just before the result is returned)."""

UNPREPARE_POINTS: Final = (
    "unprepare:restored",
    "unprepare:claim-cdi",
    "unprepare:pod-cdi",
    "unprepare:status",
    "unprepare:forgotten",
)
"""Boundaries of an unprepare, in order: drivers restored, claim CDI spec removed, Pod CDI spec
synced, claim status cleared, record deleted (just before the result is returned)."""

POINTS: Final = PREPARE_POINTS + UNPREPARE_POINTS

FaultHook = Callable[[str], None]
"""Called with a point name after the step it names."""


def no_faults(point: str) -> None:
    """The production hook: does nothing."""


NO_FAULTS: Final[FaultHook] = no_faults
"""The hook production wiring uses."""


class KillAt:
    """FAULT INJECTION hook that SIGKILLs this process when ``point`` is reached (tests only).

    Raises: ``ValueError`` for a point name that is not in :data:`POINTS`.
    """

    def __init__(self, point: str) -> None:
        if point not in POINTS:
            raise ValueError(f"{ENV_VAR}={point!r} names no fault point; use one of {', '.join(POINTS)}")
        self.point = point

    def __call__(self, point: str) -> None:
        if point == self.point:
            LOG.critical("FAULT INJECTION: killing the plugin", extra={"op": "fault", "reason": point})
            for handler in logging.getLogger().handlers:
                handler.flush()
            os.kill(os.getpid(), signal.SIGKILL)


def from_environment(env: dict[str, str] | None = None) -> FaultHook:
    """The hook the environment asks for: :class:`KillAt` when :data:`ENV_VAR` is set, else none.

    Raises: ``ValueError`` for an unknown point name.
    """
    point = (env if env is not None else dict(os.environ)).get(ENV_VAR, "")
    return KillAt(point) if point else NO_FAULTS
