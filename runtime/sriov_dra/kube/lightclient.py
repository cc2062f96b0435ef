"""A GET-only API client that does not import the ``kubernetes`` package (the guard's reads).

Why: importing any module of the ``kubernetes`` package runs its ``__init__``, which imports the
client's every API and model module (about 56 MiB of the guard daemon's 80 MiB RSS, issue 17
item 3), while the guard needs two live GETs (Pod, NAD) whose answers it decodes as plain JSON
anyway. This client is urllib3 (which the kubernetes client uses too) with the credentials read
the way the kubernetes client reads them:

- :meth:`LightClient.from_kubeconfig`: one context of a kubeconfig file (``current-context`` or
  ``context``): ``server``, ``certificate-authority``/``-data``, ``insecure-skip-tls-verify``,
  ``tls-server-name``, ``client-certificate``/``-data`` with ``client-key``/``-data``, ``token``
  or ``tokenFile``. Relative paths are relative to the kubeconfig's directory (as kubectl reads
  them). Credential plugins (``exec``, ``auth-provider``), ``username``/``password``,
  impersonation and ``proxy-url`` are refused with an error naming the field: the guard runs
  in-cluster, and its lab/test kubeconfigs use client certificates;
- :meth:`LightClient.in_cluster`: ``KUBERNETES_SERVICE_HOST``/``_PORT``, the service account's
  CA and token; the token file is read again once a minute (projected tokens rotate; the
  kubernetes client refreshes on the same period).

Failures are :mod:`sriov_dra.kube.errors` classes, built from the same Status body as through
the kubernetes client (``errors.HttpStatusError`` → ``errors.translate``).
It must never write, cache an answer, retry, or follow a redirect.
"""

from __future__ import annotations

import base64
import os
import ssl
import tempfile
import threading
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import urllib3
import yaml

from sriov_dra.kube import errors

USER_AGENT: Final = "sriov-dra/0.1"
SERVICE_ACCOUNT: Final = Path("/var/run/secrets/kubernetes.io/serviceaccount")
TOKEN_REFRESH_S: Final = 60.0
"""Seconds a token read from a file is used before the file is read again."""
POOL_MAXSIZE: Final = 16
"""Keep-alive connections to the API server (the guard's ADDs run concurrently)."""
UNSUPPORTED_USER_FIELDS: Final = (
    "exec",
    "auth-provider",
    "username",
    "password",
    "as",
    "as-groups",
    "as-uid",
    "as-user-extra",
)


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _named(doc: Mapping[str, Any], section: str, name: str, path: Path) -> Mapping[str, Any]:
    for entry in doc.get(section) or []:
        if isinstance(entry, Mapping) and entry.get("name") == name:
            return entry
    raise ValueError(f"kubeconfig {path}: {section} has no entry named {name!r}; fix the context or the file")


class _Token:
    """A bearer token, fixed or read from a file (again every :data:`TOKEN_REFRESH_S`)."""

    def __init__(self, *, value: str = "", file: Path | None = None) -> None:
        self._value, self._file = value, file
        self._read_at = 0.0
        self._lock = threading.Lock()

    def current(self) -> str:
        if self._file is None:
            return self._value
        with self._lock:
            if not self._value or time.monotonic() - self._read_at >= TOKEN_REFRESH_S:
                self._value = self._file.read_text(encoding="utf-8").strip()
                self._read_at = time.monotonic()
            return self._value


class LightClient:
    """JSON GETs against one API server over a keep-alive pool; thread-safe.

    Build it with :meth:`from_kubeconfig` or :meth:`in_cluster`; ``close`` ends the pool.
    """

    def __init__(self, server: str, context: ssl.SSLContext, *, token: _Token | None = None) -> None:
        self.server = server.rstrip("/")
        self._token = token
        self._pool = urllib3.PoolManager(maxsize=POOL_MAXSIZE, ssl_context=context, retries=False)

    @classmethod
    def from_kubeconfig(cls, path: Path, *, context: str | None = None) -> LightClient:
        """The client for ``context`` (default ``current-context``) of the kubeconfig at ``path``.

        Raises: ``OSError`` when a file it names cannot be read; ``ValueError`` naming the file and
        field for a missing context/cluster/user, a missing server, or an unsupported field.
        """
        doc = _mapping(yaml.safe_load(path.read_text(encoding="utf-8")))
        name = context or str(doc.get("current-context") or "")
        if not name:
            raise ValueError(f"kubeconfig {path}: no current-context; set one or pass the context")
        ctx = _mapping(_named(doc, "contexts", name, path).get("context"))
        cluster = _mapping(_named(doc, "clusters", str(ctx.get("cluster")), path).get("cluster"))
        user = (
            _mapping(_named(doc, "users", str(ctx.get("user")), path).get("user")) if ctx.get("user") else {}
        )
        base = path.parent
        for field in (*UNSUPPORTED_USER_FIELDS, "proxy-url"):
            if field in user or field in cluster:
                raise ValueError(
                    f"kubeconfig {path}: context {name!r} uses {field!r}, which the guard's API client does not "
                    "support; give the guard a client certificate or a bearer token (or run it in-cluster)"
                )
        server = str(cluster.get("server") or "")
        if not server:
            raise ValueError(f"kubeconfig {path}: cluster of context {name!r} has no server")
        tls = ssl.create_default_context()
        if cluster.get("insecure-skip-tls-verify") is True:
            tls.check_hostname = False
            tls.verify_mode = ssl.CERT_NONE
        elif cluster.get("certificate-authority-data"):
            tls.load_verify_locations(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
        elif cluster.get("certificate-authority"):
            tls.load_verify_locations(cafile=str(base / str(cluster["certificate-authority"])))
        _load_client_cert(tls, user, base)
        token = None
        if user.get("token"):
            token = _Token(value=str(user["token"]))
        elif user.get("tokenFile"):
            token = _Token(file=base / str(user["tokenFile"]))
        client = cls(server, tls, token=token)
        if cluster.get("tls-server-name"):
            client._pool.connection_pool_kw["server_hostname"] = str(cluster["tls-server-name"])
        return client

    @classmethod
    def in_cluster(
        cls, *, account: Path = SERVICE_ACCOUNT, env: Mapping[str, str] | None = None
    ) -> LightClient:
        """The client of the Pod's service account (``account`` holds ``ca.crt`` and ``token``).

        Raises: ``ValueError`` when not running in a Pod (no service host/port); ``OSError``
        when the CA or token cannot be read.
        """
        environ = os.environ if env is None else env
        host, port = environ.get("KUBERNETES_SERVICE_HOST"), environ.get("KUBERNETES_SERVICE_PORT")
        if not host or not port:
            raise ValueError("not running in a Pod (KUBERNETES_SERVICE_HOST/PORT unset): pass --kubeconfig")
        tls = ssl.create_default_context(cafile=str(account / "ca.crt"))
        token = _Token(file=account / "token")
        token.current()  # fail now, not at the first ADD
        server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
        return cls(server, tls, token=token)

    def get_object(self, path: str, *, action: str, timeout_s: float) -> dict[str, Any]:
        """GET ``path`` (``/api/...``); return the answer, which must be one JSON object.

        Units: ``timeout_s`` seconds for the whole request (connect and read).
        Raises: the :mod:`sriov_dra.kube.errors` class of the status (NotFound, Forbidden, ...);
        ``errors.ServerError`` for 5xx, transport failures, a timeout, or a body that is not a
        JSON object; every message starts with ``action``.
        """
        headers = {"Accept": "application/json", "User-Agent": USER_AGENT}
        if self._token is not None:
            headers["Authorization"] = f"Bearer {self._token.current()}"
        with errors.translated(action):
            response = self._pool.request(
                "GET",
                f"{self.server}{path}",
                headers=headers,
                timeout=urllib3.Timeout(total=timeout_s),
                redirect=False,
            )
            if not 200 <= response.status <= 299:
                raise errors.HttpStatusError(
                    response.status, response.reason or "", response.data, dict(response.headers)
                )
            body = response.data
        return errors.decode_object(body, action)

    def close(self) -> None:
        """Close the pooled connections."""
        self._pool.clear()


def _load_client_cert(tls: ssl.SSLContext, user: Mapping[str, Any], base: Path) -> None:
    """Load the user's client certificate and key (files, or ``-data`` through a private temp file)."""
    cert, key = user.get("client-certificate-data"), user.get("client-key-data")
    if cert and key:
        with tempfile.TemporaryDirectory(prefix="sriov-dra-tls-") as tmp:
            cert_path, key_path = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
            cert_path.write_bytes(base64.b64decode(cert))
            key_path.write_bytes(base64.b64decode(key))
            os.chmod(key_path, 0o600)
            tls.load_cert_chain(str(cert_path), str(key_path))  # read now; the files go at once
        return
    if user.get("client-certificate") and user.get("client-key"):
        tls.load_cert_chain(str(base / str(user["client-certificate"])), str(base / str(user["client-key"])))
