"""``metav1.Time`` values the API server accepts: RFC 3339 in UTC, to the second."""

from __future__ import annotations

import datetime as dt
import time


def rfc3339(seconds: float | None = None) -> str:
    """The Unix time ``seconds`` (now when ``None``) as ``2026-12-06T07:00:00Z``; fractions are dropped."""
    when = time.time() if seconds is None else seconds
    return dt.datetime.fromtimestamp(int(when), dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
