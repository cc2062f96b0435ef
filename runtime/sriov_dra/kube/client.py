"""Construction of API clients from kubeconfig files.

Owns the one place where a ``kubernetes.client.ApiClient`` is built, so that timeouts, user agent
and QPS-relevant settings are decided once. Never reads ``~/.kube/config`` implicitly: every
caller names its kubeconfig (or runs in-cluster, explicitly).
"""

from __future__ import annotations

from pathlib import Path

from kubernetes import client, config

USER_AGENT = "sriov-dra/0.1"


def from_kubeconfig(path: Path, *, context: str | None = None) -> client.ApiClient:
    """Build an ApiClient from the kubeconfig at ``path``.

    Raises: ``kubernetes.config.ConfigException`` (from the client library) when the file is
    missing or malformed; callers at entrypoints turn that into an actionable message.
    """
    api = config.new_client_from_config(config_file=str(path), context=context)
    api.user_agent = USER_AGENT
    return api


def in_cluster() -> client.ApiClient:
    """Build an ApiClient from the Pod's service-account token and CA.

    Raises: ``kubernetes.config.ConfigException`` when not running in a Pod.
    """
    cfg = client.Configuration()
    config.load_incluster_config(client_configuration=cfg)
    api = client.ApiClient(cfg)
    api.user_agent = USER_AGENT
    return api
