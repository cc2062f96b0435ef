"""kube.api_time: metav1.Time as the API server writes it."""

from __future__ import annotations

from sriov_dra.kube import api_time


def test_rfc3339_is_utc_to_the_second() -> None:
    assert api_time.rfc3339(0.9) == "1970-01-01T00:00:00Z"
    assert api_time.rfc3339(1_796_540_400) == "2026-12-06T07:00:00Z"


def test_rfc3339_without_a_time_is_now() -> None:
    assert api_time.rfc3339().endswith("Z") and len(api_time.rfc3339()) == len("2026-12-06T07:00:00Z")
