"""kube.errors: API failures become our own classes, bodies are truncated, nothing leaks."""

from __future__ import annotations

import json

import pytest
from kubernetes.client.rest import ApiException

from sriov_dra.kube import errors


def api_exception(
    status: int, reason: str = "", message: str = "", headers: dict[str, str] | None = None
) -> ApiException:
    exc = ApiException(status=status, reason=reason)
    exc.body = (
        json.dumps({"kind": "Status", "reason": reason, "message": message}) if reason or message else ""
    )
    exc.headers = headers or {}
    return exc


@pytest.mark.parametrize(
    ("status", "cls"),
    [
        (401, errors.Unauthorized),
        (403, errors.Forbidden),
        (404, errors.NotFound),
        (409, errors.Conflict),
        (410, errors.Gone),
        (422, errors.Invalid),
        (500, errors.ServerError),
        (503, errors.ServerError),
        (400, errors.ApiError),
    ],
    ids=[
        "401-unauthorized",
        "403-forbidden",
        "404-notfound",
        "409-conflict",
        "410-gone",
        "422-invalid",
        "500-server",
        "503-server",
        "400-plain",
    ],
)
def test_status_maps_to_class(status, cls):
    err = errors.translate(api_exception(status, "Why", "what happened"), action="get pod a/b")
    assert type(err) is cls
    assert err.status == status
    assert str(err).startswith("get pod a/b: HTTP")
    assert "what happened" in str(err)


def test_already_exists_is_a_conflict_with_flag():
    err = errors.translate(api_exception(409, "AlreadyExists", "exists"), action="create nad")
    assert isinstance(err, errors.Conflict) and err.already_exists


def test_throttled_reads_retry_after():
    err = errors.translate(api_exception(429, "TooManyRequests", "slow", {"Retry-After": "3"}), action="list")
    assert isinstance(err, errors.Throttled) and err.retry_after_s == 3.0 and err.retryable


def test_body_is_truncated_before_it_can_reach_a_log():
    err = errors.translate(api_exception(500, "InternalError", "x" * 5000), action="get")
    assert len(err.body) <= errors.BODY_LIMIT
    assert len(str(err)) < 400


def test_transport_failure_is_a_retryable_server_error():
    with pytest.raises(errors.ServerError) as caught, errors.translated("get pod a/b"):
        raise ConnectionResetError("reset by peer")
    assert caught.value.retryable and isinstance(caught.value.__cause__, ConnectionResetError)


def test_errors_do_not_subclass_the_client_exception():
    for cls in (
        errors.ApiError,
        errors.NotFound,
        errors.Conflict,
        errors.Invalid,
        errors.Gone,
        errors.Forbidden,
        errors.Throttled,
        errors.ServerError,
        errors.Unauthorized,
    ):
        assert not issubclass(cls, ApiException)
