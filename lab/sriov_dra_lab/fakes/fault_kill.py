"""FAULT INJECTION for crash tests: kill the plugin process at a named step boundary.

**Lab and tests only; the product does not ship it.** The product exposes the seam
(``sriov_dra.driver.faults``: the point names and the hook type); this module holds the hook
that acts. :func:`from_environment` reads :data:`ENV_VAR`; the lab's plugin launcher
(:mod:`sriov_dra_lab.launch_plugin`) installs the result and logs that loudly at startup.
:class:`KillAt` sends SIGKILL to its own process when its point is reached: no cleanup, no
flush, exactly like the node killing the container.
"""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Mapping
from typing import Final

from sriov_dra.driver import faults

LOG = logging.getLogger("sriov_dra.driver.faults")

ENV_VAR: Final = "SRIOV_DRA_TEST_KILL_AT"
"""Names the point at which the plugin kills itself (tests only)."""


class KillAt:
    """FAULT INJECTION hook that SIGKILLs this process when ``point`` is reached (tests only).

    Raises: ``ValueError`` for a point name that is not in ``faults.POINTS``, naming the valid ones.
    """

    def __init__(self, point: str) -> None:
        if point not in faults.POINTS:
            raise ValueError(
                f"{ENV_VAR}={point!r} names no fault point; use one of {', '.join(faults.POINTS)}"
            )
        self.point = point

    def __call__(self, point: str) -> None:
        if point == self.point:
            LOG.critical("FAULT INJECTION: killing the plugin", extra={"op": "fault", "reason": point})
            for handler in logging.getLogger().handlers:
                handler.flush()
            os.kill(os.getpid(), signal.SIGKILL)


def from_environment(env: Mapping[str, str] | None = None) -> faults.FaultHook:
    """The hook the environment asks for: :class:`KillAt` when :data:`ENV_VAR` is set, else none.

    Raises: ``ValueError`` for an unknown point name.
    """
    point = (env if env is not None else os.environ).get(ENV_VAR, "")
    return KillAt(point) if point else faults.NO_FAULTS
