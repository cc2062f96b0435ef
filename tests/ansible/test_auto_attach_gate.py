"""``ansible-playbook sriovnet.dra.preflight`` turns auto-attach on only on a node whose every check passed.

Against the real test control plane, with the plugin role installed (``test_preflight_playbook``'s
``cluster`` fixture), a simulated Node (heartbeats) for the inventory's host, and the guard's and
Multus's Pods on it. A FAKE kubelet stand-in (a thread of this test) marks the node's Pods running
and Ready, with the image digests the test chose, as a kubelet would report them. With the guard's
Pod not Ready the play fails naming ``guard-daemon`` and its fix and leaves the Node without the
auto-attach label (manual mode); once every check passes the Node gets the label and its plugin
Pod is recreated (so that it reads it); a guard Pod whose runtime reports another image digest
fails ``running-images`` and the label is removed again.

The same thread is also a FAKE plugin stand-in for the one thing the preflight reads from the
plugin: the auto-attach mode it reports on its Pod. As the real plugin does at its start, it reads
the Node's label and the node's checkpoint (the preflight's ``plugin_checkpoint``, written by the
plugin's own store) when it first sees a plugin Pod, lets the plugin's own rule decide
(``auto_attach_gate.decide``: ``full``, ``release-only`` while auto-attached bindings are
recorded, else ``off``) and annotates that Pod with it. The preflight restarts the plugin exactly
when that mode is not the one the gate wants.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from tests.ansible import test_preflight_playbook as tpp
from tests.ansible.conftest import run
from tests.fakes import checkpoint_records as records
from tests.waiting import eventually

from sriov_dra.core.plugin import auto_attach_gate
from sriov_dra.host import checkpoint
from sriov_dra_lab.nodes import SimulatedNode
from sriov_dra_rules import checkpoint_doc, names

cluster = tpp.cluster
NAMESPACE = tpp.NAMESPACE
NODE = "sriovnet-gate-node"
LABEL = "sriovnetwork.k8snetworkplumbingwg.io/multus-auto-attach"
IMAGE = f"localhost/sriov-dra:0.1.0@sha256:{'0' * 63}4"  # the plugin image the fixture installed
MULTUS = f"localhost/multus-cni:v4.3.0@sha256:{'0' * 63}7"
OTHER_DIGEST = f"sha256:{'e' * 64}"
MODE = names.AUTO_ATTACH_MODE_ANNOTATION


class FakeKubelet:
    """FAKE kubelet stand-in: reports the node's Pods running (Ready unless named in ``not_ready``) and
    confirms the deletion of those being deleted.

    ``image_ids`` maps a Pod name to the imageID its containers report (default: the spec image).
    FAKE plugin stand-in: annotates a plugin Pod it sees first with the mode a plugin started then
    reports, decided by the plugin's rule from the Node's labels and the bindings ``plugin_checkpoint``
    records.
    """

    def __init__(self, api: Any, plugin_checkpoint: Path) -> None:
        self.core = k8s.CoreV1Api(api)
        self.not_ready: set[str] = set()
        self.image_ids: dict[str, str] = {}
        self.plugin_checkpoint = plugin_checkpoint
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="fake-kubelet", daemon=True)

    def __enter__(self) -> FakeKubelet:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(0.3):
            for pod in self.core.list_namespaced_pod(NAMESPACE, field_selector=f"spec.nodeName={NODE}").items:
                if pod.metadata.deletion_timestamp is None:
                    self._report(pod)
                    self._report_mode(pod)
                else:  # the containers stopped: confirm the deletion, as a kubelet does
                    self._gone(pod)

    def _gone(self, pod: Any) -> None:
        try:
            self.core.delete_namespaced_pod(pod.metadata.name, NAMESPACE, grace_period_seconds=0)
        except k8s.ApiException as exc:
            if exc.status != 404:
                raise

    def _report_mode(self, pod: Any) -> None:
        if (pod.metadata.labels or {}).get("app.kubernetes.io/name") != "sriov-dra-plugin":
            return
        if MODE in (pod.metadata.annotations or {}):
            return  # the plugin reports once, at its start
        labels = self.core.read_node(NODE).metadata.labels or {}
        held = checkpoint_doc.managed_bindings(self.plugin_checkpoint.read_bytes(), source="the test's")
        mode = str(auto_attach_gate.decide(LABEL, NODE, labels, [str(b["claim_uid"]) for b in held]).mode)
        try:
            self.core.patch_namespaced_pod(
                pod.metadata.name, NAMESPACE, {"metadata": {"annotations": {MODE: mode}}}
            )
        except k8s.ApiException as exc:
            if exc.status != 404:
                raise

    def _report(self, pod: Any) -> None:
        ready = pod.metadata.name not in self.not_ready
        statuses = [
            {
                "name": c.name,
                "image": c.image,
                "imageID": self.image_ids.get(pod.metadata.name, c.image),
                "ready": ready,
                "restartCount": 0,
                "state": {"running": {}} if ready else {"waiting": {"reason": "CrashLoopBackOff"}},
            }
            for c in pod.spec.containers
        ]
        status = {
            "phase": "Running",
            "conditions": [{"type": "Ready", "status": "True" if ready else "False"}],
            "containerStatuses": statuses,
        }
        try:
            self.core.patch_namespaced_pod_status(pod.metadata.name, NAMESPACE, {"status": status})
        except k8s.ApiException as exc:
            if exc.status != 404:
                raise


def _pod(api: Any, name: str, app: str, image: str) -> None:
    body = {
        "metadata": {"name": name, "labels": {"app.kubernetes.io/name": app}},
        "spec": {"nodeName": NODE, "containers": [{"name": app, "image": image}]},
    }
    k8s.CoreV1Api(api).create_namespaced_pod(NAMESPACE, body)


def _label(api: Any) -> str | None:
    return (k8s.CoreV1Api(api).read_node(NODE).metadata.labels or {}).get(LABEL)


def _plugin_modes(api: Any) -> dict[str, str | None]:
    """The node's plugin Pods (not being deleted) and the mode each reports."""
    pods = k8s.CoreV1Api(api).list_namespaced_pod(
        NAMESPACE,
        label_selector="app.kubernetes.io/name=sriov-dra-plugin",
        field_selector=f"spec.nodeName={NODE}",
    )
    return {
        p.metadata.name: (p.metadata.annotations or {}).get(MODE)
        for p in pods.items
        if p.metadata.deletion_timestamp is None
    }


def _plugin_pods(api: Any) -> set[str]:
    return set(_plugin_modes(api))


def _record_binding(path: Path, *, held: bool) -> None:
    """Record one auto-attached binding in the plugin checkpoint at ``path`` (``held``), or release it."""
    store = checkpoint.CheckpointStore(path)
    try:
        store.load()
        if held:
            store.set_claim(records.record())
        else:  # as the plugin's release does: Deleting, ReleaseComplete, then the record goes
            store.mark_managed_deleting(records.CLAIM_1)
            store.mark_managed_release_complete(records.CLAIM_1)
            store.delete_claim(records.CLAIM_1)
    finally:
        store.close()


def _reported(api: Any) -> dict[str, str | None] | None:
    """The plugin Pods once each reports a mode (the FAKE stand-in's first sight), else None."""
    modes = _plugin_modes(api)
    return modes if modes and all(modes.values()) else None


@pytest.fixture
def gate(cluster: Any, api: Any, tmp_path: Path) -> Iterator[tuple[dict[str, str], list[str], FakeKubelet]]:
    env, argv = cluster
    # the node the cluster fixture laid out (tests/ansible/node_fixture.py), whose checkpoint the preflight reads
    plugin_checkpoint = Path(
        json.loads((tmp_path / "vars.json").read_text())["preflight_node_options"]["plugin_checkpoint"]
    )
    node = SimulatedNode(api, NODE, labels={"kubernetes.io/hostname": NODE}, interval_s=5.0).start()
    extra = tmp_path / "gate.json"
    extra.write_text(
        json.dumps(
            {
                "preflight_auto_attach_gate": True,
                "sriov_dra_node_name": NODE,
                "sriov_dra_image": IMAGE,
                "multus_image": MULTUS,
                "guard_namespace": NAMESPACE,
                "multus_namespace": NAMESPACE,
                "preflight_gate_wait_timeout": 60,
            }
        )
    )
    try:
        _pod(api, "guard", "sriov-dra-guard", IMAGE)
        _pod(api, "multus", "multus", MULTUS)
        with FakeKubelet(api, plugin_checkpoint) as kubelet:
            yield env, [*argv, "-e", f"@{extra}"], kubelet
    finally:
        node.stop(delete=True)
        core = k8s.CoreV1Api(api)
        for pod in core.list_namespaced_pod(NAMESPACE, field_selector=f"spec.nodeName={NODE}").items:
            core.delete_namespaced_pod(pod.metadata.name, NAMESPACE, grace_period_seconds=0)


def test_auto_attach_is_turned_on_only_while_every_check_of_the_node_passes(gate, api) -> None:
    env, argv, kubelet = gate
    kubelet.not_ready.add("guard")
    eventually(
        "the node's plugin Pod reporting its mode", lambda: _reported(api), timeout_s=60, interval_s=0.5
    )
    failed = run(argv, env, check=False)
    out = " ".join((failed.stdout + failed.stderr).split())
    assert failed.returncode != 0
    assert (
        f"preflight failed on localhost (auto-attach stays off there: manual mode): [guard-daemon] the guard "
        f"daemon on {NODE} is not up: {NAMESPACE}/guard: phase Running, not Ready: container sriov-dra-guard "
        "CrashLoopBackOff; fix: the guard daemon must be up before auto-attach" in out
    ), out[-4000:]
    assert f"auto-attach on {NODE}: off, manual mode" in out
    assert _label(api) is None

    kubelet.not_ready.clear()
    before = _plugin_pods(api)
    passed = run(argv, env)
    out = " ".join(passed.stdout.split())
    assert f'"PASS guard-daemon: the guard daemon runs on {NODE} (guard)"' in out, out[-4000:]
    assert (
        f'"PASS running-images: every Pod on {NODE} runs the installed image: guard {IMAGE}, multus {MULTUS}, '
        f'plugin {IMAGE}"' in out
    )
    assert f"auto-attach on {NODE}: on ({LABEL}=true: every check passed)" in out
    assert _label(api) == "true"
    assert _plugin_pods(api) and not _plugin_pods(api) & before, "the node's plugin Pod was recreated"
    assert set(_plugin_modes(api).values()) == {"full"}

    kubelet.image_ids["guard"] = f"localhost/sriov-dra@{OTHER_DIGEST}"
    eventually(
        "the guard Pod to report the other digest",
        lambda: OTHER_DIGEST in str(k8s.CoreV1Api(api).read_namespaced_pod_status("guard", NAMESPACE).status),
        timeout_s=30,
        interval_s=0.3,
    )
    drifted = run(argv, env, check=False)
    out = " ".join((drifted.stdout + drifted.stderr).split())
    assert drifted.returncode != 0
    assert (
        f"[running-images] {NAMESPACE}/guard: container sriov-dra-guard's runtime reports "
        f"localhost/sriov-dra@{OTHER_DIGEST}, not the installed {IMAGE}" in out
    ), out[-4000:]
    assert _label(api) is None


def test_the_plugin_is_restarted_only_when_the_mode_it_reports_is_not_the_one_the_gate_wants(
    gate, api
) -> None:
    env, argv, kubelet = gate
    started = eventually(
        "the node's plugin Pod reporting its mode", lambda: _reported(api), timeout_s=60, interval_s=0.5
    )
    assert set(started.values()) == {"off"}
    # the label is already there (set before the plugin's restart happened, or by hand), but the running
    # plugin started without it and still runs manual mode: a label-change rule would restart nothing
    k8s.CoreV1Api(api).patch_node(NODE, {"metadata": {"labels": {LABEL: "true"}}})
    out = " ".join(run(argv, env).stdout.split())
    name = next(iter(started))
    assert f"{NAMESPACE}/{name} reports auto-attach mode off, the gate wants full" in out, out[-4000:]
    full = _plugin_modes(api)
    assert full and not set(full) & set(started) and set(full.values()) == {"full"}, full

    run(argv, env)  # the plugin runs the wanted mode: nothing is restarted
    assert _plugin_modes(api) == full

    _record_binding(kubelet.plugin_checkpoint, held=True)
    kubelet.not_ready.add("guard")
    failed = run(argv, env, check=False)
    assert failed.returncode != 0 and _label(api) is None
    release_only = _plugin_modes(api)
    assert not set(release_only) & set(full) and set(release_only.values()) == {"release-only"}, release_only

    # still failing, the binding still held: release-only is what the gate wants, no restart
    again = run(argv, env, check=False)
    assert again.returncode != 0
    assert "release-only while its checkpoint holds 1 auto-attached binding(s)" in " ".join(
        again.stdout.split()
    )
    assert _plugin_modes(api) == release_only

    # the node was drained: every binding released, the gate still failing. A release-only plugin would refuse
    # every new claim, so the preflight restarts it into manual mode
    _record_binding(kubelet.plugin_checkpoint, held=False)
    drained = run(argv, env, check=False)
    out = " ".join(drained.stdout.split())
    assert drained.returncode != 0
    name = next(iter(release_only))
    assert (
        f"{NAMESPACE}/{name} reports auto-attach mode release-only, the gate wants off (its checks failed, and the "
        "node's checkpoint holds no auto-attached binding: manual mode)" in out
    ), out[-4000:]
    manual = _plugin_modes(api)
    assert not set(manual) & set(release_only) and set(manual.values()) == {"off"}, manual

    kubelet.not_ready.clear()
    run(argv, env)
    back = _plugin_modes(api)
    assert _label(api) == "true" and not set(back) & set(manual) and set(back.values()) == {"full"}, back
