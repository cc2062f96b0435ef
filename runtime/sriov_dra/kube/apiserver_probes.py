"""Health endpoints of the API server (``/readyz``, ``/livez``, ``/version``)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client
from kubernetes.client.rest import ApiException


def probe(api: client.ApiClient, path: str = "/readyz", *, timeout_s: float = 5.0) -> tuple[bool, str]:
    """GET ``path`` on the API server and return ``(ok, body_or_error)``.

    Units: ``timeout_s`` seconds per request. Never raises for HTTP or connection errors; they
    are returned as ``(False, text)`` so that callers can poll.
    """
    try:
        resp = api.call_api(
            path,
            "GET",
            auth_settings=["BearerToken"],
            _preload_content=False,
            _request_timeout=timeout_s,
        )
        data = resp[0].data if isinstance(resp, tuple) else resp.data
        return True, data.decode("utf-8", "replace")
    except ApiException as exc:
        return False, f"HTTP {exc.status}: {(exc.body or '')[:256]!s}"
    except Exception as exc:  # connection refused, TLS errors while starting
        return False, f"{type(exc).__name__}: {str(exc)[:256]}"


def server_version(api: client.ApiClient) -> dict[str, Any]:
    """Return the decoded ``/version`` document (``gitVersion``, ``major``, ``minor``, ...)."""
    ok, body = probe(api, "/version")
    if not ok:
        raise RuntimeError(f"cannot read /version: {body}")
    result: dict[str, Any] = json.loads(body)
    return result
