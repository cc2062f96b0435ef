"""``sriov_dra.kube.client``: the one place API clients are built (pool size for the fan-out)."""

from __future__ import annotations

from pathlib import Path

import pytest

from sriov_dra.kube import client as kube_client
from sriov_dra.servicekit import fanout

KUBECONFIG = """\
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443", insecure-skip-tls-verify: true}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
"""


def test_the_connection_pool_holds_every_request_a_prepare_fans_out(tmp_path: Path) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    api = kube_client.from_kubeconfig(path)
    assert api.configuration.connection_pool_maxsize >= kube_client.POOL_MAXSIZE
    assert api.rest_client.pool_manager.connection_pool_kw["maxsize"] >= kube_client.POOL_MAXSIZE
    assert kube_client.POOL_MAXSIZE >= 2 * fanout.DEFAULT_MAX_IN_FLIGHT  # room for the other callers
    assert api.user_agent == kube_client.USER_AGENT


def test_a_larger_library_default_is_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(KUBECONFIG)
    monkeypatch.setattr("multiprocessing.cpu_count", lambda: 64)  # the library's default: 5 per CPU
    assert kube_client.from_kubeconfig(path).configuration.connection_pool_maxsize == 320
