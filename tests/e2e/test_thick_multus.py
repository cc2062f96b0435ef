"""The lab with thick Multus (``multus-daemon`` + ``multus-shim``), the gpu-nic-pairs example on it.

A second, one-node lab on a real node for this module, thick Multus running as the multus role's
DaemonSet (``multus-daemon`` from the thick image, chrooted into the node's root, its socket on the
node's ``/run/multus``, the role's daemon config): the guard in front of thick Multus attaches both rails,
Multus (the daemon's service-account identity) makes no ResourceClaim/ResourceSlice request, and
deleting the Pod leaves nothing.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from tests.e2e.helpers import PAIRS, wait_clean

from sriov_dra.cli import inspect, inspect_rows, inspect_table
from sriov_dra.kube import objects
from sriov_dra_lab import demo, images, multus_pods, plugin_pods, stack, stack_base, workloads


@pytest.fixture(scope="module")
def thick_lab(lab: Any, tmp_path_factory: pytest.TempPathFactory) -> Iterator[stack.LabStack]:
    """A one-node lab running thick Multus (started after the main lab proved the machine can)."""
    thick = stack.LabStack(
        stack_base.LabOptions(
            workdir=tmp_path_factory.mktemp("thick"),
            nodes=1,
            multus_mode="thick",
            operator=False,
            real_nodes=True,
        )
    )
    thick.start()
    try:
        yield thick
    finally:
        thick.stop()


def test_gpu_nic_pairs_through_thick_multus(thick_lab: stack.LabStack) -> None:
    docs = workloads.load(PAIRS)
    workloads.apply_docs(thick_lab.api, docs)
    pod = workloads.wait_running(thick_lab.api, "ai-workloads", "gpu-sriov-pairs-demo", timeout_s=180)
    node = thick_lab.nodes[0]
    assert node.real is not None
    assert node.real.run_in_node(["test", "-S", multus_pods.SOCKET]).returncode == 0
    daemon = plugin_pods.node_pod(
        thick_lab.api, multus_pods.NAMESPACE, node.name, selector=multus_pods.POD_LABEL
    )
    assert daemon is not None and daemon.metadata.name.startswith("multus-thick-")
    assert [c.image for c in daemon.spec.containers] == [thick_lab.built_image(images.MULTUS_THICK).reference]
    netns = thick_lab.pod_netns(pod)
    assert netns is not None
    client = objects.Objects(thick_lab.api, field_manager="e2e")
    rows = inspect_rows.inspect_pod(
        client, "ai-workloads", "gpu-sriov-pairs-demo", netns=netns, read_netns=inspect.read_netns
    )
    assert [r.interface for r in rows] == ["dra0", "dra1"] and all(r.ok for r in rows), (
        inspect_table.render_table(rows)
    )
    assert sorted(r.subnet for r in rows) == ["192.0.2.0/24", "198.51.100.0/24"]
    assert demo.multus_requests(thick_lab.cp.audit_log) > 0
    assert demo.multus_dra_reads(thick_lab.cp.audit_log) == 0

    workloads.delete_docs(thick_lab.api, [d for d in docs if d["kind"] == "Pod"])
    found = wait_clean(thick_lab)
    assert found.empty, found.describe()
