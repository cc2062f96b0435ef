"""Real nodes (``sriov_dra_lab.real_node``) against the session control plane: kubelet v1.36, containerd 2.2.

These tests use the root ``control_plane`` fixture (not the e2e tier's simulated lab), so the
``api`` and ``namespace`` fixtures of ``tests/e2e/conftest.py`` are replaced here by ones on that
control plane. They skip with a printed reason (fail when ``SRIOV_DRA_REQUIRE_TIERS`` names
``e2e``) when a real part is missing on this machine: root, the pinned kubelet/containerd/crictl
and pause binaries (``make setup``), runc, busybox-static, cgroup hierarchies.

One node (``real_node``) serves the whole folder; a test that needs another node starts it with
``start_node`` and it is stopped (and checked for leftovers) at the end of that test.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tests import tiers
from tests.e2e import helpers


@pytest.fixture(scope="session")
def node_bridge(control_plane: Any) -> Iterator[Any]:
    """The lab's host bridge for real nodes (created once, removed at the end)."""
    from sriov_dra_lab import real_node

    missing = real_node.missing_parts()
    if missing:
        tiers.unavailable("e2e", "real nodes cannot run here: " + "; ".join(missing))
    bridge = real_node.NodeBridge(lab_id=real_node.new_lab_id()).create()
    try:
        yield bridge
    finally:
        bridge.remove()


@pytest.fixture(scope="session")
def node_factory(
    control_plane: Any, node_bridge: Any, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Callable[[int], Any]]:
    """Start real node ``index`` (1-based) on the session control plane; every node is stopped at the end."""
    from sriov_dra_lab import real_node

    started: list[real_node.RealNode] = []
    base = tmp_path_factory.mktemp("realnodes")

    def start(index: int) -> real_node.RealNode:
        node = real_node.RealNode(
            control_plane=control_plane,
            bridge=node_bridge,
            name=f"real-{node_bridge.lab_id}-{index}",
            index=index,
            root=base / f"node{index}",
        )
        started.append(node)
        return node.start()

    try:
        yield start
    finally:
        for node in reversed(started):
            node.stop()


@pytest.fixture(scope="session")
def real_node(node_factory: Callable[[int], Any]) -> Any:
    """Real node 1, started once for the folder."""
    return node_factory(1)


@pytest.fixture
def api(control_plane: Any) -> Iterator[client.ApiClient]:
    """An admin ApiClient of the session control plane."""
    api_client = control_plane.api()
    try:
        yield api_client
    finally:
        api_client.close()


@pytest.fixture
def namespace(api: client.ApiClient, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace per test on the session control plane (Pods deleted and awaited first)."""
    with helpers.fresh_namespace(api, request.node.name) as name:
        yield name


@pytest.fixture
def kubectl(control_plane: Any) -> Callable[..., Any]:
    """Run the pinned kubectl with the admin kubeconfig; returns the finished process."""
    import subprocess

    from sriov_dra_lab import binaries

    def run(*args: str, timeout_s: float = 60.0) -> subprocess.CompletedProcess[str]:
        argv = [str(binaries.find("kubectl")), f"--kubeconfig={Path(control_plane.kubeconfig)}", *args]
        return subprocess.run(argv, capture_output=True, text=True, check=False, timeout=timeout_s)

    return run


@pytest.fixture(scope="module")
def real_lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A started lab on two real nodes, one per test module (stopped at the end, checked for leftovers on the machine)."""
    from sriov_dra_lab import real_node, stack, stack_base

    missing = real_node.missing_parts()
    if missing:
        tiers.unavailable("e2e", "real nodes cannot run here: " + "; ".join(missing))
    lab = stack.LabStack(
        stack_base.LabOptions(workdir=tmp_path_factory.mktemp("reallab"), real_nodes=True, operator=False)
    )
    started = time.monotonic()
    lab.start()
    print(
        f"real lab started in {time.monotonic() - started:.0f} s; nodes Ready after launch: "
        + ", ".join(f"{n.name} {n.real.ready_after_s:.1f} s" for n in lab.nodes if n.real is not None)
    )
    reals = [n.real for n in lab.nodes]
    try:
        yield lab
    finally:
        lab.stop()
    assert [line for r in reals if r is not None for line in r.leftovers()] == []
