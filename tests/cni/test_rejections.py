"""Every pre-ADD rejection reason, on a real API server, proven to run no delegate (docs/design.md#guard-checks).

Each case builds a Pod with managed bindings as the plugin would (recorded in its checkpoint, so
the shim sends its ADD to the daemon), breaks one rule on the API server, and runs the runtime's
ADD through the guard. The recording CNI bin dir shows that no plugin at all ran for that
container (not Multus, not the primary, not sriov, not IPAM), and the CNI error names the rule.
Among them are a managed Pod's annotation that Multus itself refuses (multus-cni #635, #1195,
#213), the collision with the automatic ``net1`` (multus-cni #1089) and an sriov config without
``deviceID`` (sriov-network-device-plugin #258). An ordinary Pod's annotation is Multus's to judge
(``test_ordinary_pods.py``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from tests.cni.world import RAIL_A, RAIL_B, World, eventually
from tests.fakes import managed_pods as mp

from sriov_dra.core import binding_annotation
from sriov_dra.guard import decisions
from sriov_dra_lab import cni
from sriov_dra_rules import names

R = decisions.Reason
OTHER_UID = "22222222-3333-4444-5555-666666666666"


@dataclass
class Case:
    """What to send: the attachment and the reason the guard must give."""

    attachment: cni.Attachment
    reason: R
    mentions: str = ""


def _binding(body: dict[str, Any], **changes: Any) -> None:
    ann = body["metadata"]["annotations"]
    obj = json.loads(ann[names.BINDING_ANNOTATION])
    obj.update(changes)
    ann[names.BINDING_ANNOTATION] = json.dumps(obj, separators=(",", ":"))


def _config(body: dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> None:
    doc = json.loads(body["spec"]["config"])
    edit(doc)
    config = json.dumps(doc, separators=(",", ":"))
    body["spec"]["config"] = config
    _binding(body, configSHA256=binding_annotation.config_sha256(config))


def _first(edit: Callable[[dict[str, Any]], None]) -> Callable[[int, dict[str, Any]], None]:
    return lambda index, body: edit(body) if index == 0 else None


def _managed(
    w: World, reason: R, *, edit: Callable[[dict[str, Any]], None] | None = None, mentions: str = ""
) -> Case:
    pod = w.managed_pod("p", edit_shadow=_first(edit) if edit else None)
    return Case(w.attachment("p", uid=pod.uid), reason, mentions)


def _with_user_entries(w: World, networks: str, reason: R, mentions: str = "") -> Case:
    """A managed Pod whose user wrote ``networks``: before its entries when a JSON list, else in their place."""
    pod = w.managed_pod("p")
    try:
        added = json.loads(networks)
    except ValueError:
        added = None
    if isinstance(added, list):
        current = json.loads(w.read_pod("p")["metadata"]["annotations"][names.NETWORKS_ANNOTATION])
        networks = json.dumps([*added, *current])
    w.annotate_pod("p", {names.NETWORKS_ANNOTATION: networks})
    return Case(w.attachment("p", uid=pod.uid), reason, mentions)


def _annotated(w: World, reason: R, change: Callable[[dict[str, Any]], dict[str, str | None]]) -> Case:
    pod = w.managed_pod("p")
    w.annotate_pod("p", change(w.read_pod("p")["metadata"]["annotations"]))
    return Case(w.attachment("p", uid=pod.uid), reason)


def invalid_cni_args(w: World) -> Case:
    pod = w.managed_pod("p")
    att = w.attachment("p", uid=pod.uid)
    return Case(
        cni.Attachment(att.container_id, att.netns, att.cni_args + ";", att.ifname, att.cni_path),
        R.INVALID_CNI_REQUEST,
    )


def pod_not_found(w: World) -> Case:
    w.record_bindings(OTHER_UID, 1)  # the checkpoint names a Pod the API server no longer has
    return Case(w.attachment("ghost", uid=OTHER_UID), R.POD_NOT_FOUND)


def pod_uid_mismatch(w: World) -> Case:
    w.managed_pod("p")
    w.record_bindings(OTHER_UID, 1)  # the replaced Pod's bindings, not yet released
    return Case(w.attachment("p", uid=OTHER_UID), R.POD_UID_MISMATCH)


def pod_on_other_node(w: World) -> Case:
    pod = w.pod("p", node_name="some-other-node")
    w.record_bindings(pod["metadata"]["uid"], 1)
    return Case(w.attachment("p", uid=pod["metadata"]["uid"]), R.POD_NODE_MISMATCH)


def registry_malformed(w: World) -> Case:
    return _annotated(
        w, R.INVALID_REGISTRY, lambda a: {names.MANAGED_NETWORKS_ANNOTATION: '{"version":1,"podUID":'}
    )


def registry_version_2(w: World) -> Case:
    return _annotated(
        w,
        R.UNSUPPORTED_REGISTRY_VERSION,
        lambda a: {
            names.MANAGED_NETWORKS_ANNOTATION: a[names.MANAGED_NETWORKS_ANNOTATION].replace(
                '"version":1', '"version":2'
            )
        },
    )


def registry_other_pod(w: World) -> Case:
    def change(a: dict[str, Any]) -> dict[str, str | None]:
        obj = json.loads(a[names.MANAGED_NETWORKS_ANNOTATION])
        obj["podUID"] = OTHER_UID
        return {names.MANAGED_NETWORKS_ANNOTATION: json.dumps(obj, separators=(",", ":"))}

    return _annotated(w, R.REGISTRY_POD_UID_MISMATCH, change)


def shadow_gone(w: World) -> Case:
    pod = w.managed_pod("p")
    name = pod.shadows[1]["metadata"]["name"]
    w.patch_nad(w.namespace, name, {"metadata": {"finalizers": None}})
    w.delete_nad(w.namespace, name)
    eventually("the shadow to be gone", lambda: w.get_nad(w.namespace, name) is None)
    return Case(w.attachment("p", uid=pod.uid), R.SHADOW_NOT_FOUND, name)


def shadow_terminating(w: World) -> Case:
    pod = w.managed_pod("p")
    w.delete_nad(w.namespace, pod.shadows[0]["metadata"]["name"])
    return Case(w.attachment("p", uid=pod.uid), R.SHADOW_TERMINATING)


def shadow_in_other_namespace(w: World) -> Case:
    """A shadow-named NAD of another namespace, selected explicitly (not recorded in a registry)."""
    pod = w.pod("p")
    w.record_bindings(pod["metadata"]["uid"], 1)
    other = w.extra_namespace()
    plan = mp.plan_shadow(
        pod_namespace=w.namespace,
        pod_name="p",
        pod_uid=pod["metadata"]["uid"],
        source=w.source(RAIL_A),
        pci=RAIL_A.pci,
        interface="dra0",
        device="vf-0",
        node_name=w.node.settings.node_name,
    )
    body = json.loads(json.dumps(plan.nad))
    body["metadata"]["ownerReferences"] = []
    w.create_nad(body, namespace=other)
    selection = json.dumps({"name": plan.name, "namespace": other, "interface": "dra0"})
    w.annotate_pod("p", {names.NETWORKS_ANNOTATION: f"[{selection}]"})
    return Case(w.attachment("p", uid=pod["metadata"]["uid"]), R.SHADOW_NAMESPACE_MISMATCH)


def selection_not_selected(w: World) -> Case:
    return _annotated(w, R.REGISTRY_ENTRY_NOT_SELECTED, lambda a: {names.NETWORKS_ANNOTATION: "[]"})


def selection_duplicated(w: World) -> Case:
    def change(a: dict[str, Any]) -> dict[str, str | None]:
        entries = json.loads(a[names.NETWORKS_ANNOTATION])
        return {names.NETWORKS_ANNOTATION: json.dumps([*entries, entries[0]])}

    return _annotated(w, R.DUPLICATE_MANAGED_SELECTION, change)


def selection_override(w: World) -> Case:
    def change(a: dict[str, Any]) -> dict[str, str | None]:
        entries = json.loads(a[names.NETWORKS_ANNOTATION])
        entries[0]["deviceID"] = "0000:03:00.7"
        return {names.NETWORKS_ANNOTATION: json.dumps(entries)}

    return _annotated(w, R.MANAGED_SELECTION_OVERRIDE, change)


def registry_uid_differs(w: World) -> Case:
    def change(a: dict[str, Any]) -> dict[str, str | None]:
        obj = json.loads(a[names.MANAGED_NETWORKS_ANNOTATION])
        obj["entries"][1]["uid"] = OTHER_UID
        return {names.MANAGED_NETWORKS_ANNOTATION: json.dumps(obj, separators=(",", ":"))}

    return _annotated(w, R.REGISTRY_SHADOW_MISMATCH, change)


CASES: list[tuple[str, Callable[[World], Case]]] = [
    ("malformed-cni-args", invalid_cni_args),
    ("pod-not-found", pod_not_found),
    ("pod-uid-mismatch", pod_uid_mismatch),
    ("pod-on-another-node", pod_on_other_node),
    (
        "malformed-json-annotation",
        lambda w: _with_user_entries(
            w, '[ { "name": "net-a", "ips": [ "10.1.1.104/24" ] ]', R.INVALID_NETWORKS_ANNOTATION, "column"
        ),
    ),
    (
        "ips-not-a-list",
        lambda w: _with_user_entries(
            w, '[{"name":"net-a","ips":"10.0.0.5/24"}]', R.INVALID_NETWORKS_ANNOTATION, "ips"
        ),
    ),
    (
        "ifname-too-long",
        lambda w: _with_user_entries(
            w, "net-a@averyveryverylongif", R.INVALID_NETWORKS_ANNOTATION, "at most 15 bytes"
        ),
    ),
    (
        "collision-with-automatic-net1",
        lambda w: _with_user_entries(
            w, '[{"name":"net-a"},{"name":"net-b","interface":"net1"}]', R.DUPLICATE_INTERFACE_NAME, "net1"
        ),
    ),
    ("registry-malformed", registry_malformed),
    ("registry-unknown-version", registry_version_2),
    ("registry-of-another-pod", registry_other_pod),
    ("shadow-not-found", shadow_gone),
    (
        "binding-unknown-version",
        lambda w: _managed(w, R.UNSUPPORTED_BINDING_VERSION, edit=lambda b: _binding(b, version=2)),
    ),
    (
        "binding-malformed",
        lambda w: _managed(
            w, R.INVALID_BINDING, edit=lambda b: _binding(b, interface="not a valid interface name")
        ),
    ),
    (
        "binding-for-another-pod",
        lambda w: _managed(w, R.BINDING_POD_UID_MISMATCH, edit=lambda b: _binding(b, podUID=OTHER_UID)),
    ),
    (
        "binding-for-another-node",
        lambda w: _managed(w, R.BINDING_NODE_MISMATCH, edit=lambda b: _binding(b, nodeName="node-z")),
    ),
    ("shadow-in-another-namespace", shadow_in_other_namespace),
    (
        "no-owner-reference-to-the-pod",
        lambda w: _managed(
            w, R.MISSING_POD_OWNER_REFERENCE, edit=lambda b: b["metadata"].update(ownerReferences=[])
        ),
    ),
    (
        "protection-finalizer-missing",
        lambda w: _managed(
            w, R.MISSING_PROTECTION_FINALIZER, edit=lambda b: b["metadata"].update(finalizers=[])
        ),
    ),
    ("shadow-terminating", shadow_terminating),
    (
        "empty-resource-name-key",
        lambda w: _managed(
            w,
            R.RESOURCE_NAME_ANNOTATION_PRESENT,
            edit=lambda b: b["metadata"]["annotations"].update({names.RESOURCE_NAME_ANNOTATION: ""}),
        ),
    ),
    (
        "not-an-sriov-config",
        lambda w: _managed(
            w, R.INVALID_SHADOW_CONFIG, edit=lambda b: _config(b, lambda d: d.update(type="macvlan"))
        ),
    ),
    (
        "sriov-without-device-id",
        lambda w: _managed(
            w,
            R.DEVICE_ID_MISMATCH,
            edit=lambda b: _config(b, lambda d: d.pop("deviceID")),
            mentions="no deviceID",
        ),
    ),
    (
        "config-reformatted",
        lambda w: _managed(
            w,
            R.CONFIG_HASH_MISMATCH,
            edit=lambda b: b["spec"].update(config=json.dumps(json.loads(b["spec"]["config"]), indent=1)),
        ),
    ),
    ("registry-entry-not-selected", selection_not_selected),
    ("managed-selection-duplicated", selection_duplicated),
    ("managed-selection-device-id-override", selection_override),
    ("registry-shadow-uid-differs", registry_uid_differs),
]


@pytest.mark.parametrize("build", [c for _, c in CASES], ids=[i for i, _ in CASES])
def test_rejection_runs_no_delegate(world: World, build: Callable[[World], Case]) -> None:
    case = build(world)
    result = world.add("thin", case.attachment)
    assert not result.ok
    error = result.error or {}
    assert error.get("msg", "").startswith(f"multus-guard: {case.reason}:"), error
    assert "no delegate ran" in error.get("details", "")
    assert case.mentions in error.get("msg", "") + error.get("details", "")
    assert (
        world.node.recorded(case.attachment.container_id) == []
    )  # not Multus, not the primary, not sriov, not IPAM
    assert world.host_local_files(RAIL_A) == [] and world.ippool_allocations(RAIL_B) == {}


def test_thick_rejection_runs_no_delegate_either(world: World) -> None:
    case = shadow_terminating(world)
    result = world.add("thick", case.attachment)
    assert (result.error or {}).get("msg", "").startswith(f"multus-guard: {R.SHADOW_TERMINATING}:")
    assert world.node.recorded(case.attachment.container_id) == []


@pytest.mark.parametrize(
    ("document", "field"),
    [
        ('{"plugins": [{"type": []}]}', "plugins[0].type: must be a non-empty string"),
        ('{"defaultNetworks": ["x"], "defaultNetworks": []}', "defaultNetworks: duplicate key"),
        ('{"clusterNetwork": []}', "clusterNetwork: must be a string"),
    ],
    ids=["list-plugin-type", "repeated-default-networks", "cluster-network-not-a-string"],
)
def test_thick_add_over_a_malformed_multus_daemon_config_is_refused_naming_the_file_and_the_field(
    world: World, tmp_path: Path, document: str, field: str
) -> None:
    """A field of the wrong type in ``daemon-config.json`` is a refusal naming it, never a TypeError."""
    daemon = tmp_path / "daemon-config.json"
    daemon.write_text(document)
    conf_dir = tmp_path / "net.d"
    world.node.install_guard("thick", conf_dir=conf_dir, multus_keys={"daemonConfigFile": str(daemon)})
    pod = world.managed_pod("p")
    att = world.attachment("p", uid=pod.uid)
    result = world.add("thick", att, conf_dir=conf_dir)
    assert not result.ok
    msg = (result.error or {}).get("msg", "")
    assert msg.startswith(f"multus-guard: {R.INVALID_CNI_REQUEST}:"), result.error
    assert str(daemon) in msg and field in msg, msg
    assert world.node.recorded(att.container_id) == []
