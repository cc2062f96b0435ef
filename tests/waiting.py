"""Polling for tests: wait until a condition holds, or fail naming what was awaited."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")


def eventually(what: str, fn: Callable[[], T | None], *, timeout_s: float, interval_s: float) -> T:
    """Poll ``fn`` every ``interval_s`` until it returns a truthy value and return that value.

    Units: seconds. Fails the test naming ``what`` after ``timeout_s``.
    """
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        pause.wait(interval_s)
    pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what}")
