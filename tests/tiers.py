"""Tier availability: each tier skips with a printed reason when its real part cannot start.

``SRIOV_DRA_REQUIRE_TIERS`` (comma-separated tier names, set by ``.ci/run``) turns such a skip into
a failure, so CI can never pass with a tier silently not run.
"""

from __future__ import annotations

import os

import pytest


def required_tiers() -> set[str]:
    """Tiers that must run (from ``SRIOV_DRA_REQUIRE_TIERS``)."""
    raw = os.environ.get("SRIOV_DRA_REQUIRE_TIERS", "")
    return {t.strip() for t in raw.split(",") if t.strip()}


def unavailable(tier: str, reason: str) -> None:
    """Skip (or fail, when ``tier`` is required) the current test with ``reason`` printed."""
    message = f"{tier} tier unavailable: {reason}"
    print(message)
    if tier in required_tiers():
        pytest.fail(message + f" (SRIOV_DRA_REQUIRE_TIERS includes {tier!r})", pytrace=False)
    pytest.skip(message)
