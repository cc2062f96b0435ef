"""Construction of API clients from kubeconfig files.

Owns the one place where a ``kubernetes.client.ApiClient`` is built, so that timeouts, user agent
and QPS-relevant settings are decided once. Never reads ``~/.kube/config`` implicitly: every
caller names its kubeconfig (or runs in-cluster, explicitly).
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from kubernetes import client, config

USER_AGENT = "sriov-dra/0.1"

POOL_MAXSIZE: Final = 16
"""Keep-alive connections per API server (urllib3 ``maxsize``), at least this many.

A prepare fans out up to ``servicekit.fanout.DEFAULT_MAX_IN_FLIGHT`` (8) requests at once
while other kubelet calls, the repair worker and the publisher use the same client; the
library's default (5 × CPU count) is 5 on a 1-CPU node, so concurrent requests would open a new
TLS connection each time and throw it away afterwards.
"""


def _configuration() -> client.Configuration:
    cfg = client.Configuration()
    cfg.connection_pool_maxsize = max(cfg.connection_pool_maxsize or 0, POOL_MAXSIZE)
    return cfg


def from_kubeconfig(path: Path, *, context: str | None = None) -> client.ApiClient:
    """Build an ApiClient from the kubeconfig at ``path`` (pool of at least :data:`POOL_MAXSIZE`).

    Raises: ``kubernetes.config.ConfigException`` (from the client library) when the file is
    missing or malformed; callers at entrypoints turn that into an actionable message.
    """
    api = config.new_client_from_config(
        config_file=str(path), context=context, client_configuration=_configuration()
    )
    api.user_agent = USER_AGENT
    return api


def in_cluster() -> client.ApiClient:
    """Build an ApiClient from the Pod's service-account token and CA (pool as above).

    Raises: ``kubernetes.config.ConfigException`` when not running in a Pod.
    """
    cfg = _configuration()
    config.load_incluster_config(client_configuration=cfg)
    api = client.ApiClient(cfg)
    api.user_agent = USER_AGENT
    return api
