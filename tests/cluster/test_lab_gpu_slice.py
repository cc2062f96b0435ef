"""The lab's synthetic GPU driver keeps its node's ResourceSlice published, as a real DRA driver must.

A real kubelet v1.36 deletes every ResourceSlice of its node when it starts and leaves
republishing to each driver (``DRAPluginManager.wipeResourceSlices``); the lab's real-node tests
restart kubelets, so the GPU stand-in must re-create its slice or the gpu-nic-pairs Pods (VF + GPU per
PCIe root) stop being schedulable on that node. Real API server; the slice is deleted the way the
kubelet deletes it (a DeleteCollection by node and driver field selector).
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from tests import waiting

from sriov_dra.kube import resource_slices
from sriov_dra_lab import gpu_plugin, session


@pytest.fixture
def node_name() -> str:
    return f"gpu-keeper-{uuid.uuid4().hex[:6]}"


@pytest.fixture
def keeper(api: client.ApiClient, node_name: str) -> Iterator[threading.Event]:
    stop = threading.Event()
    thread = threading.Thread(
        target=gpu_plugin.keep_slice_published, args=(api, node_name, stop), kwargs={"interval_s": 0.2}
    )
    thread.start()
    try:
        yield stop
    finally:
        stop.set()
        thread.join(timeout=30)
        client.ResourceV1Api(api).delete_collection_resource_slice(
            field_selector=resource_slices.field_selector(driver=gpu_plugin.DRIVER, node=node_name)
        )


def _slices(api: client.ApiClient, node: str) -> list[dict[str, object]]:
    return resource_slices.list_slices(api, driver=gpu_plugin.DRIVER, node=node)


def test_the_gpu_stand_in_recreates_its_slice_after_the_kubelet_style_wipe(
    api: client.ApiClient, node_name: str, keeper: threading.Event
) -> None:
    first = waiting.eventually(
        "the synthetic GPU slice", lambda: _slices(api, node_name), timeout_s=30, interval_s=0.2
    )
    assert [s["metadata"]["name"] for s in first] == [session.gpu_slice(node_name)["metadata"]["name"]]  # type: ignore[index]
    client.ResourceV1Api(api).delete_collection_resource_slice(
        field_selector=resource_slices.field_selector(driver=gpu_plugin.DRIVER, node=node_name)
    )
    again = waiting.eventually(
        "the synthetic GPU slice re-created", lambda: _slices(api, node_name), timeout_s=30, interval_s=0.2
    )
    assert again[0]["metadata"]["uid"] != first[0]["metadata"]["uid"]  # type: ignore[index]
    assert again[0]["spec"] == first[0]["spec"]


def test_an_existing_gpu_slice_is_never_rewritten(
    api: client.ApiClient, node_name: str, keeper: threading.Event
) -> None:
    first = waiting.eventually(
        "the synthetic GPU slice", lambda: _slices(api, node_name), timeout_s=30, interval_s=0.2
    )
    stop = threading.Event()
    stop.wait(1.5)  # several keeper intervals
    assert [s["metadata"]["resourceVersion"] for s in _slices(api, node_name)] == [
        s["metadata"]["resourceVersion"]
        for s in first  # type: ignore[index]
    ]
