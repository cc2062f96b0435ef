"""API errors as our own classes, so that callers decide by class, never by status number.

Maps the client's ``ApiException`` (and transport failures) to :class:`ApiError` subclasses,
each raised ``from`` the original, with response bodies cut to 256 characters before they can
reach a log. None subclasses ``ApiException`` (a test asserts it), so the client library's types
never leak past ``sriov_dra.kube``. Source: Kubernetes API status codes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TypeVar

from kubernetes.client.rest import ApiException

BODY_LIMIT = 256
T = TypeVar("T")


class ApiError(Exception):
    """Base of every API failure. ``status`` is the HTTP status (0 for transport failures)."""

    retryable = False

    def __init__(self, message: str, *, status: int = 0, reason: str = "", body: str = "") -> None:
        super().__init__(message)
        self.status = status
        self.reason = reason
        self.body = body[:BODY_LIMIT]


class NotFound(ApiError):
    """404: the object (or its namespace) does not exist."""


class Conflict(ApiError):
    """409: a resourceVersion/UID precondition failed, or the object already exists."""

    retryable = True

    @property
    def already_exists(self) -> bool:
        """True for a create that met an existing object (reason ``AlreadyExists``)."""
        return self.reason == "AlreadyExists"


class Invalid(ApiError):
    """422: the object or patch is invalid (includes failed JSON Patch ``test`` operations)."""


class Gone(ApiError):
    """410: a watch resourceVersion expired; re-list."""

    retryable = True


class Forbidden(ApiError):
    """403: RBAC or admission refused the request; the message names verb and resource."""


class Unauthorized(ApiError):
    """401: credentials were rejected."""


class Throttled(ApiError):
    """429: too many requests; wait ``retry_after_s`` seconds (from ``Retry-After``)."""

    retryable = True

    def __init__(self, message: str, *, retry_after_s: float = 1.0, **kwargs: object) -> None:
        super().__init__(message, **kwargs)  # type: ignore[arg-type]
        self.retry_after_s = retry_after_s


class ServerError(ApiError):
    """5xx or a transport failure (timeout, connection reset): retry with backoff."""

    retryable = True


_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
}


def _status_fields(exc: ApiException) -> tuple[str, str]:
    """Return ``(reason, message)`` from a Kubernetes Status body, or from the exception."""
    body = exc.body or ""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    try:
        doc = json.loads(body) if body else {}
    except ValueError:
        doc = {}
    if not isinstance(doc, dict):
        doc = {}
    reason = str(doc.get("reason") or exc.reason or "")
    message = str(doc.get("message") or body or exc.reason or "")
    return reason, message[:BODY_LIMIT]


def translate(exc: BaseException, *, action: str) -> ApiError:
    """Map a client exception to an :class:`ApiError` whose message starts with ``action``.

    Shapes: ``action`` names the request, e.g. ``"get pod ai/trainer"``.
    """
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        reason, message = _status_fields(exc)
        text = f"{action}: HTTP {status} {reason}: {message}".rstrip(": ")
        body = exc.body.decode("utf-8", "replace") if isinstance(exc.body, bytes) else str(exc.body or "")
        if status == 429:
            retry = 1.0
            headers = exc.headers or {}
            try:
                retry = float(headers.get("Retry-After", "1"))
            except (TypeError, ValueError):
                retry = 1.0
            return Throttled(text, retry_after_s=retry, status=status, reason=reason, body=body)
        cls = _BY_STATUS.get(status, ServerError if status >= 500 or status == 0 else ApiError)
        return cls(text, status=status, reason=reason, body=body)
    return ServerError(f"{action}: {type(exc).__name__}: {str(exc)[:BODY_LIMIT]}")


@contextmanager
def translated(action: str) -> Iterator[None]:
    """Context manager that re-raises client and transport failures as :class:`ApiError`.

    Raises: the translated :class:`ApiError` ``from`` the original exception.
    """
    try:
        yield
    except ApiError:
        raise
    except (ApiException, OSError, TimeoutError) as exc:
        raise translate(exc, action=action) from exc
    except Exception as exc:  # urllib3 errors (MaxRetryError, ProtocolError) are not OSError
        if type(exc).__module__.startswith("urllib3"):
            raise translate(exc, action=action) from exc
        raise


def call(action: str, fn: Callable[[], T]) -> T:
    """Run ``fn()`` and translate its failures (see :func:`translated`)."""
    with translated(action):
        return fn()
