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
import urllib.error
import urllib.request
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


def _instance(pn: PluginNode, pod_uid: str, *, kill_at: str = "") -> tuple[processes.Process, Path]:
    """Launch an instance with ``pod_uid`` (its own metrics port, killed at ``kill_at``); return it
    and its registration socket."""
    proc = pn.launch(f"--pod-uid={pod_uid}", kill_at=kill_at)
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
        assert _probe_as(pn, "/healthz", old_uid) == 200, "the idle old Pod is not restarted by its liveness"
        assert _probe_as(pn, "/readyz", old_uid) == 503, "nor counted ready"
        assert not old_registration.exists(), "the old instance deregistered"
        eventually("the owner to remove a killed instance's socket", lambda: not killed.exists())
        eventually(  # the old instance polls for the new one's confirmation
            "the old instance to see the new one serve the node",
            lambda: '"msg": "handed over"' in old.log_path.read_text(),
        )
        eventually(  # its process replaced itself in place; the fresh start finds the node taken
            "the old instance's fresh start to idle",
            lambda: "idle until its Pod is deleted" in old.log_path.read_text(),
        )
        assert old.popen is not None and old.popen.poll() is None
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


def _probe_as(pn: PluginNode, path: str, pod_uid: str) -> int:
    """The status the node's metrics address answers ``path`` for the Pod ``pod_uid`` (its probes send
    ``X-Pod-Uid``, docs/plugin.md#rolling-update)."""
    request = urllib.request.Request(f"http://127.0.0.1:{pn.port}{path}", headers={"X-Pod-Uid": pod_uid})
    try:
        with urllib.request.urlopen(request, timeout=2) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _prepares_and_unprepares(pn: PluginNode, namespace: str, name: str) -> None:
    pod = schedule_pod(pn.api, namespace, pn.name, config=vf_config(netAttachDefName="rail-a"), name=name)
    prepared = prepare(pn, pod)
    assert prepared.ok, prepared.failure
    assert pn.kubelet.unprepare_pod(pod.pod_uid).ok


def _stop(*procs: processes.Process | None) -> None:
    for proc in procs:
        if proc is not None:
            proc.stop()


def _killed(proc: processes.Process) -> None:
    assert proc.popen is not None
    assert proc.popen.wait(timeout=60) == -signal.SIGKILL, proc.log_path.read_text()


def test_an_old_instance_killed_in_its_hand_over_and_restarted_never_takes_the_node_back(
    plugin_node: PluginNode, namespace: str
) -> None:
    """The old instance drains and dies before it released the node (before it recorded itself
    retired); the new one takes the node; the old Pod's container restarts. It must idle: the
    node goes only to a newer instance, and the new one keeps serving."""
    pn = plugin_node
    old_uid, new_uid = str(uuid.uuid4()), str(uuid.uuid4())
    old, old_registration = _instance(pn, old_uid, kill_at="handover:drained")
    new = again = None
    try:
        pn.kubelet.register(old_registration)
        eventually("the old instance to be ready", lambda: pn.probe("/readyz")[0] == 200)
        new, new_registration = _instance(pn, new_uid)
        pn.kubelet.register(new_registration)
        _killed(old)
        eventually("the new instance to serve the node", lambda: pn.probe("/readyz")[0] == 200)
        again = pn.launch(f"--pod-uid={old_uid}")  # the old Pod's container restarted
        eventually(
            "the restarted old instance to idle",
            lambda: "idle until its Pod is deleted" in again.log_path.read_text(),
        )
        time.sleep(1.0)  # a hand-over back would start within the owner's 0.1 s polls
        assert "handing over" not in new.log_path.read_text(), "the node went back to the older instance"
        assert new.popen is not None and new.popen.poll() is None
        _prepares_and_unprepares(pn, namespace, "after")
    finally:
        _stop(old, new, again)


def test_a_hand_over_whose_successor_dies_before_serving_is_undone_and_the_old_instance_takes_the_node_back(
    plugin_node: PluginNode, namespace: str
) -> None:
    """The new instance takes the writer lock and dies before it serves the node (no confirmation).
    The old instance must not stay retired with nobody owning the node: its process replaces
    itself in place, and the fresh start takes the node back and serves."""
    pn = plugin_node
    old_uid, new_uid = str(uuid.uuid4()), str(uuid.uuid4())
    old, old_registration = _instance(pn, old_uid)
    old_port, new = pn.port, None
    try:
        pn.kubelet.register(old_registration)
        eventually("the old instance to be ready", lambda: pn.probe("/readyz")[0] == 200)
        new, new_registration = _instance(pn, new_uid, kill_at="handover:taken")
        pn.kubelet.register(new_registration)
        _killed(new)
        eventually(
            "the old instance to take the node back in a fresh start of its process",
            lambda: old.log_path.read_text().count('"msg": "plugin started"') == 2,
        )
        assert "taking it back" in old.log_path.read_text()
        assert old.popen is not None and old.popen.poll() is None, "replaced in place, not exited"
        pn.kubelet.register(old_registration)  # the fresh start registered again
        pn.port = old_port
        eventually("the old instance to serve the node again", lambda: pn.probe("/readyz")[0] == 200)
        _prepares_and_unprepares(pn, namespace, "back")
    finally:
        _stop(old, new)
