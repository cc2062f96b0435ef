"""API errors as our own classes, so that callers decide by class, never by status number.

Owns the mapping of the client's ``ApiException`` (and transport failures) to :class:`ApiError`
subclasses, and of :class:`HttpStatusError`, the same answer from ``kube.lightclient``. Each is
raised ``from`` the original exception; response bodies are truncated to 256 characters before
they can reach a log. None of these classes subclasses ``ApiException`` (a test asserts it), so
the client library's types never leak past ``sriov_dra.kube``.

This module does not import the ``kubernetes`` package (importing any of it loads the whole
client, issue 17 item 3): an ``ApiException`` is recognized through the module that defines it,
which is loaded whenever such an exception can exist.

Source: STYLE.md §2 (kopf ``_cogs/clients/errors.py``), Kubernetes API status codes.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any, TypeVar

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


class HttpStatusError(Exception):
    """A non-2xx answer as ``kube.lightclient`` reports it (the fields of the client's ``ApiException``)."""

    def __init__(self, status: int, reason: str, body: bytes | str, headers: Mapping[str, str]) -> None:
        super().__init__(f"HTTP {status} {reason}")
        self.status = status
        self.reason = reason
        self.body = body
        self.headers = dict(headers)


def _is_status_error(exc: BaseException) -> bool:
    """``exc`` is an HTTP status answer: ours, or the kubernetes client's ``ApiException``."""
    if isinstance(exc, HttpStatusError):
        return True
    module = sys.modules.get("kubernetes.client.exceptions")
    client_class = getattr(module, "ApiException", None)
    return isinstance(client_class, type) and isinstance(exc, client_class)


def decode_object(body: bytes, action: str) -> dict[str, Any]:
    """Decode a response body that must be one JSON object.

    Raises: ``ServerError`` naming ``action`` when it is not JSON or not an object.
    """
    try:
        doc = json.loads(body)
    except ValueError as exc:
        raise ServerError(f"{action}: the server answered with a body that is not JSON") from exc
    if not isinstance(doc, dict):
        raise ServerError(f"{action}: the server answered with JSON that is not an object")
    return doc


_BY_STATUS: dict[int, type[ApiError]] = {
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
}


def _status_fields(exc: Any) -> tuple[str, str]:
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
    if _is_status_error(exc):
        fields: Any = exc  # an ApiException or an HttpStatusError: status, reason, body, headers
        status = int(fields.status or 0)
        reason, message = _status_fields(fields)
        text = f"{action}: HTTP {status} {reason}: {message}".rstrip(": ")
        raw = fields.body
        body = raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw or "")
        if status == 429:
            retry = 1.0
            headers = fields.headers or {}
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
    except (OSError, TimeoutError) as exc:
        raise translate(exc, action=action) from exc
    except Exception as exc:  # urllib3 errors (MaxRetryError, ProtocolError) are not OSError
        if _is_status_error(exc) or type(exc).__module__.startswith("urllib3"):
            raise translate(exc, action=action) from exc
        raise


def call(action: str, fn: Callable[[], T]) -> T:
    """Run ``fn()`` and translate its failures (see :func:`translated`)."""
    with translated(action):
        return fn()
