"""Fixtures for the kubelet plugin protocol tests: short socket dirs, a plugin server, a kubelet."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from tests.fakes.claim_handler import FakeClaimHandler

from sriov_dra.kubeletapi import endpoints, plugin_server
from sriov_dra_lab import kubelet

DRIVER = "vf.test.example.com"


@pytest.fixture
def sockets(short_dir: Path) -> endpoints.PluginSockets:
    return endpoints.plugin_sockets(
        DRIVER, plugins_dir=short_dir / "plugins", registry_dir=short_dir / "registry"
    )


@pytest.fixture
def handler() -> Iterator[FakeClaimHandler]:
    fake = FakeClaimHandler()
    yield fake
    fake.release.set()  # never leave a held call behind


ServerFactory = Callable[..., plugin_server.KubeletPluginServer]


@pytest.fixture
def make_server(sockets: endpoints.PluginSockets, handler: FakeClaimHandler) -> Iterator[ServerFactory]:
    """Build (not start) plugin servers on ``sockets`` with ``handler``; all are stopped at teardown."""
    made: list[plugin_server.KubeletPluginServer] = []

    def factory(**kwargs: object) -> plugin_server.KubeletPluginServer:
        options: dict[str, object] = {"driver_name": DRIVER, "handler": handler, "sockets": sockets}
        options.update(kwargs)
        server = plugin_server.KubeletPluginServer(**options)  # type: ignore[arg-type]
        made.append(server)
        return server

    yield factory
    for server in made:
        server.stop(grace_s=0)


@pytest.fixture
def server(make_server: ServerFactory) -> plugin_server.KubeletPluginServer:
    """A started plugin server (DRA v1 + v1beta1, no health) with the fake handler."""
    srv = make_server()
    srv.start()
    return srv


@pytest.fixture
def manager() -> Iterator[kubelet.KubeletDraManager]:
    """A simulated kubelet DRA manager; its connections are closed at teardown."""
    mgr = kubelet.KubeletDraManager()
    yield mgr
    mgr.close()
