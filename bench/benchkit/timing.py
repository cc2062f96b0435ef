"""The one timing loop of the benchmarks under ``bench/``: best mean seconds per call.

Benchmarks report ratios or best-of times measured in one run; none asserts on time.
"""

from __future__ import annotations

import time
from collections.abc import Callable


def best_per_call(fn: Callable[[], object], *, calls: int = 1, repeats: int) -> float:
    """Best (lowest) mean seconds per call of ``fn`` over ``repeats`` batches of ``calls``.

    Units: seconds (``time.perf_counter``). With ``calls=1`` it is the best single call.
    """
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best
