"""cni tier fixtures: one lab node's CNI stack on the session control plane, and a World per test.

The stack (``sriov_dra_lab.cni_node.CniNode``) is real: Multus v4.3.0 thin and thick, the
containernetworking plugins, whereabouts, the guard daemon with the shipped ClusterRole, network
namespaces and veth lab VFs. The tier skips with the printed reason only when a real part cannot
start (not root, binaries not built, a component exiting); ``SRIOV_DRA_REQUIRE_TIERS=cni`` turns
that into a failure.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from tests import tiers
from tests.cni import world as world_module

from sriov_dra.host import netlink
from sriov_dra_lab import binaries, guard, processes
from sriov_dra_lab.cni_node import CniNode, CniNodeSettings
from sriov_dra_lab.control_plane import ControlPlane

NODE = "cni-node-a"


@pytest.fixture(scope="session")
def cni_node(control_plane: ControlPlane) -> Iterator[CniNode]:
    """The session's CNI stack (see the module docstring)."""
    if os.geteuid() != 0:
        tiers.unavailable("cni", "network namespaces, veth and the Multus daemon need root")
    workdir = Path(tempfile.mkdtemp(prefix="sriov-dra-cni-"))
    node = CniNode(control_plane, workdir, CniNodeSettings(node_name=NODE))
    try:
        node.start()
    except binaries.BinaryMissing as exc:
        node.remove()
        tiers.unavailable("cni", str(exc))
    except (processes.ProcessFailed, netlink.NetlinkError, guard.InstallFailed, OSError) as exc:
        node.remove()
        tiers.unavailable("cni", f"the CNI stack did not start: {exc}")
    try:
        yield node
    finally:
        node.stop()
        node.remove()


@pytest.fixture
def world(cni_node: CniNode, api: client.ApiClient, namespace: str) -> Iterator[world_module.World]:
    """This test's namespace, lab VFs and sandboxes on the session's CNI stack."""
    w = world_module.World(cni_node, api, namespace)
    try:
        yield w
    finally:
        w.close()
