"""The device taints the publisher puts on unhealthy VFs, stepped by every health poll.

Holds the ``core.plugin.device_taints`` state across polls on the monotonic clock:
:meth:`HealthTaints.observe` is the health monitor's per-poll hook and calls ``on_change`` (the
publisher's ``request_sync``) only when the set of taints changed, so a steady or flapping
link causes no slice write beyond the taint's addition and its removal. Thread-safe.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping

from sriov_dra.core import device_health
from sriov_dra.core.plugin import device_taints


class HealthTaints:
    """The current taint of each unhealthy VF (``current``), updated by ``observe``.

    ``effect`` is NoSchedule unless the operator opted in to NoExecute; ``clear_after_s`` seconds
    of continuous health remove a taint; ``clock`` is monotonic seconds.
    """

    def __init__(
        self,
        *,
        driver: str,
        effect: device_taints.Effect = device_taints.Effect.NO_SCHEDULE,
        clear_after_s: float = device_taints.DEFAULT_CLEAR_AFTER_S,
        on_change: Callable[[], None] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._driver = driver
        self._effect = effect
        self._clear_after_s = clear_after_s
        self._on_change = on_change
        self._clock = clock
        self._lock = threading.Lock()
        self._states: dict[str, device_taints.TaintState] = {}

    def observe(self, verdicts: Mapping[str, device_health.Verdict]) -> None:
        """Step the taints with one poll's verdicts; ``on_change`` when a taint came or went."""
        with self._lock:
            before = self._states
            self._states = device_taints.step(
                before, verdicts, self._clock(), clear_after_s=self._clear_after_s
            )
            changed = {d: s.value for d, s in before.items()} != {d: s.value for d, s in self._states.items()}
        if changed and self._on_change is not None:
            self._on_change()

    def current(self) -> dict[str, device_taints.DeviceTaint]:
        """The taint of every tainted VF, by device name."""
        with self._lock:
            return device_taints.taints(self._states, driver=self._driver, effect=self._effect)
