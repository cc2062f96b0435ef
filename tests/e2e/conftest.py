"""The e2e tier: one lab (control plane, two real nodes, every service) for the whole session.

The lab is :class:`sriov_dra_lab.stack.LabStack`, the same object ``sriov-dra lab demo`` runs, on real
nodes (kubelet v1.36 + containerd + runc each): it installs through the collection's roles
(``playbooks/lab.yml``; a role that fails is a test error, its output in
``<lab>/ansible/ansible-*.log``), which deploy the plugin, the guard, thin Multus and the operator
from the built images. It skips (fails when ``SRIOV_DRA_REQUIRE_TIERS`` names ``e2e``) only when a
real part cannot start on this machine: not root, no namespace tools, pinned binaries or images not
built, a control plane component that does not come up. A service of this project that fails to
start is a test error.

Every test works in its own namespace; the administrator's cluster objects the tests share are
the gpu-nic-pairs mappings (DeviceAttributes, SriovResourcePolicy, DeviceClasses), applied once.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from tests import tiers
from tests.e2e import helpers

from sriov_dra_lab import stack_base


@pytest.fixture(scope="session")
def lab(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A running lab with two nodes (see the module docstring)."""
    from sriov_dra_lab import binaries, images, processes, real_node, stack, topology

    if os.geteuid() != 0:
        tiers.unavailable("e2e", "the lab needs root (network and mount namespaces, veth interfaces)")
    missing = [t for t in ("nsenter", "unshare", "mount", "ip", "setpriv") if shutil.which(t) is None]
    if missing:
        tiers.unavailable("e2e", f"missing tools {missing} (util-linux, iproute2)")
    missing = real_node.missing_parts()
    if missing:
        tiers.unavailable("e2e", "real nodes cannot run here: " + "; ".join(missing))
    lab = stack.LabStack(
        stack_base.LabOptions(workdir=tmp_path_factory.mktemp("lab"), nodes=2, real_nodes=True)
    )
    try:
        lab.start()
    except (binaries.BinaryMissing, images.ImageError, real_node.RealNodeError) as exc:
        tiers.unavailable("e2e", str(exc))
    except topology.TopologyError as exc:
        tiers.unavailable("e2e", f"this machine cannot create the lab's namespaces: {exc}")
    except processes.ProcessFailed as exc:
        if "kube-" in str(exc) or "etcd" in str(exc):
            tiers.unavailable("e2e", f"control plane did not start: {exc}")
        raise
    try:
        yield lab
    finally:
        lab.stop()


@pytest.fixture
def api(lab: Any) -> client.ApiClient:
    """The lab's admin API client."""
    return lab.api


@pytest.fixture
def namespace(lab: Any, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace per test, deleted afterwards (Pods first, so their teardown runs)."""
    with helpers.fresh_namespace(lab.api, request.node.name) as name:
        yield name


@pytest.fixture(scope="session")
def rails(lab: Any) -> list[dict[str, Any]]:
    """The gpu-nic-pairs rail mapping installed once: rail A VFs → ``rail-a-net``, rail B → ``rail-b-net``.

    The NAD names resolve in each Pod's namespace, so every test brings its own templates.
    """
    from sriov_dra_lab import workloads

    docs = helpers.rail_mapping_docs()
    workloads.apply_docs(lab.api, docs)
    return docs


@pytest.fixture
def without_direct_policies(lab: Any, rails: list[dict[str, Any]]) -> Iterator[None]:
    """Remove the session's gpu-nic-pairs policy objects for one test; put them back afterwards.

    Everything of the mapping is applied again (an example's ``kubectl delete -f`` removes its DeviceClasses).
    """
    from sriov_dra_lab import workloads

    policies = [d for d in rails if d["kind"] in ("SriovResourcePolicy", "DeviceAttributes")]
    workloads.delete_docs(lab.api, policies)
    try:
        yield
    finally:
        workloads.apply_docs(lab.api, rails)
