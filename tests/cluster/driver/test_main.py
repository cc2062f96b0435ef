"""Cluster tier: a rolling update of the plugin process hands the node over without a failed call.

Two plugin processes (the lab's launcher, the product's ``main``) run side by side on one
fake-sysfs node with per-instance sockets (``--pod-uid``), as the DaemonSet's ``maxSurge: 1`` runs
them. The test kubelet registers each and, like the kubelet, sends new calls to the newest one.
Proves docs/plugin.md#rolling-update: the new instance's calls wait until the old one handed the
checkpoint over; the claim the old one prepared is released by the new one; the ResourceSlices
are adopted, never created again; the old one deregisters, keeps serving nothing and exits 0 on
SIGTERM; restarted, it never asks for the node back; a killed instance's socket is removed.
"""

from __future__ import annotations

import os
import signal
import socket
import time
import uuid
from pathlib import Path

from kubernetes import client
from tests.cluster.driver import test_prepare as tp
from tests.cluster.driver.test_prepare import DRIVER, PluginNode, eventually, prepare, schedule_pod, vf_config

from sriov_dra.driver import device_health_monitor
from sriov_dra.kubeletapi import endpoints, plugin_server
from sriov_dra_lab import processes

installed = tp.installed
plugin_node = tp.plugin_node


def _slices(pn: PluginNode) -> dict[str, str]:
    items = (
        client.ResourceV1Api(pn.api)
        .list_resource_slice(field_selector=f"spec.driver={DRIVER},spec.nodeName={pn.name}")
        .items
    )
    return {s.metadata.name: s.metadata.uid for s in items}


def _instance(pn: PluginNode, pod_uid: str) -> tuple[processes.Process, Path]:
    """Launch an instance with ``pod_uid`` (its own metrics port); return it and its registration socket."""
    proc = pn.launch(f"--pod-uid={pod_uid}")
    sockets = endpoints.plugin_sockets(
        DRIVER,
        plugins_dir=pn.root / "plugins",
        registry_dir=pn.registry,
        instance=endpoints.instance_name(pod_uid),
    )
    processes.wait_until(
        f"instance {pod_uid} to create {sockets.registration}",
        sockets.registration.exists,
        timeout_s=60,
        process=proc,
    )
    return proc, sockets.registration


def test_a_new_instance_takes_the_node_over_without_a_failed_call_or_a_recreated_slice(
    plugin_node: PluginNode, namespace: str
) -> None:
    pn = plugin_node
    old_uid, new_uid = str(uuid.uuid4()), str(uuid.uuid4())
    old, old_registration = _instance(pn, old_uid)
    new = None
    try:
        pn.kubelet.register(old_registration)
        eventually("the old instance to be ready", lambda: pn.probe("/readyz")[0] == 200)
        slices = eventually("the old instance's ResourceSlices", lambda: _slices(pn) or None)
        first = schedule_pod(
            pn.api, namespace, pn.name, config=vf_config(netAttachDefName="rail-a"), name="first"
        )
        assert prepare(pn, first).ok

        killed = pn.registry / f"{DRIVER}-{endpoints.instance_name(str(uuid.uuid4()))}-reg.sock"
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.bind(str(killed))  # what an instance killed earlier leaves: nobody listens
        then = time.time() - plugin_server.DEAD_SOCKET_MIN_AGE_S - 1  # bound before the grace
        os.utime(killed, (then, then), follow_symlinks=False)
        new, new_registration = _instance(pn, new_uid)
        pn.kubelet.register(new_registration)  # the kubelet's newest instance: every new call goes there
        second = schedule_pod(
            pn.api, namespace, pn.name, config=vf_config(netAttachDefName="rail-a"), name="second"
        )
        prepared = prepare(pn, second)  # waits at the new instance's gate during the hand-over
        assert prepared.ok, prepared.failure
        released = pn.kubelet.unprepare_pod(first.pod_uid)  # prepared by the old instance
        assert released.ok, released.failure

        assert pn.probe("/readyz")[0] == 200, "the new instance owns the node"
        assert not old_registration.exists(), "the old instance deregistered"
        eventually("the owner to remove a killed instance's socket", lambda: not killed.exists())
        old_log = old.log_path.read_text()
        assert "handed over" in old_log and old.popen is not None and old.popen.poll() is None
        assert _slices(pn) == slices, "the slices were adopted, not created again"
        assert set(pn.records()) == {second.claim.uid}
        time.sleep(2 * device_health_monitor.DEFAULT_POLL_S)  # polls the old instance would have made
        assert "device health poll failed" not in old.log_path.read_text(), "it polled the closed checkpoint"

        assert old.popen is not None
        old.popen.send_signal(signal.SIGTERM)
        assert old.popen.wait(timeout=30) == 0
        again = pn.launch(f"--pod-uid={old_uid}")  # the old Pod's container restarted before deletion
        eventually(
            "the restarted old instance to idle",
            lambda: "idle until its Pod is deleted" in again.log_path.read_text(),
        )
        assert pn.kubelet.unprepare_pod(second.pod_uid).ok, "the new instance kept the node"
        assert _slices(pn) == slices
        again.stop()
        new.stop()
        assert new.popen is not None and new.popen.returncode == 0
    finally:
        old.stop()
        if new is not None:
            new.stop()
