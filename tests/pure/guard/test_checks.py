"""Tests for sriov_dra.guard.checks: Pod identity, annotations, registry, selections, interface names."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from tests.fakes import managed_pods as mp

from sriov_dra.core import interface_naming
from sriov_dra.guard import checks, decisions, shadow_checks
from sriov_dra_rules import names

R = decisions.Reason
NS, POD = "ai-workloads", "trainer"
FIXTURES = Path(__file__).parents[2] / "fixtures" / "contract"
UIDS = ("d0d0d0d0-0000-4000-8000-00000000000a", "d0d0d0d0-0000-4000-8000-00000000000b")


PLANS = mp.plan_rails(
    NS,
    POD,
    (
        ("rail-a-net", "rail-a", "192.0.2.0/24", "0000:03:00.1", mp.CLAIM_UID),
        ("rail-b-net", "rail-b", "198.51.100.0/24", "0000:80:00.1", mp.CLAIM_UID),
    ),
)
ENTRIES = [mp.registry_entry(p, uid) for p, uid in zip(PLANS, UIDS, strict=True)]
NADS = {(p.namespace, p.name): mp.with_uid(p.nad, uid) for p, uid in zip(PLANS, UIDS, strict=True)}


def _pod(annotations: dict[str, str] | None = None, **kw: Any) -> shadow_checks.PodView:
    return checks.pod_view(mp.pod(NS, POD, annotations=annotations, **kw))


def _managed_pod(*, manual: tuple[str, ...] = (), networks: str | None = None) -> shadow_checks.PodView:
    ann = mp.managed_annotations(mp.POD_UID, ENTRIES, manual=manual)
    if networks is not None:
        ann[names.NETWORKS_ANNOTATION] = networks
    return _pod(ann)


def _reject(fn: Any, *args: Any, **kwargs: Any) -> decisions.Rejected:
    with pytest.raises(decisions.Rejected) as info:
        fn(*args, **kwargs)
    return info.value


# --------------------------------------------------------------------- Pod identity


def test_pod_view_reads_identity_node_and_static_flag() -> None:
    view = checks.pod_view(mp.pod(NS, POD, annotations={checks.STATIC_SOURCE_ANNOTATION: "file"}))
    assert (view.namespace, view.name, view.uid, view.node_name, view.static) == (
        NS,
        POD,
        mp.POD_UID,
        "node-a",
        True,
    )


def test_pod_view_refuses_an_object_without_uid() -> None:
    pod = mp.pod(NS, POD)
    del pod["metadata"]["uid"]
    assert _reject(checks.pod_view, pod).reason is R.API_READ_FAILED


@pytest.mark.parametrize(
    ("runtime_uid", "static", "node", "reason"),
    [
        ("22222222-3333-4444-5555-666666666666", False, None, R.POD_UID_MISMATCH),
        ("22222222-3333-4444-5555-666666666666", True, None, None),
        (None, False, None, None),
        (mp.POD_UID, False, "node-b", R.POD_NODE_MISMATCH),
        (mp.POD_UID, False, "node-a", None),
    ],
    ids=["uid-differs", "static-pod-uid-differs-allowed", "runtime-sent-no-uid", "other-node", "same-node"],
)
def test_pod_identity(runtime_uid: str | None, static: bool, node: str | None, reason: R | None) -> None:
    ann = {checks.STATIC_SOURCE_ANNOTATION: "file"} if static else None
    view = _pod(ann)
    if reason is None:
        checks.check_pod_identity(view, runtime_uid=runtime_uid, node_name=node)
    else:
        assert (
            _reject(checks.check_pod_identity, view, runtime_uid=runtime_uid, node_name=node).reason is reason
        )


# -------------------------------------------------- annotations (malformed as in upstream reports)


@pytest.mark.parametrize(
    "value",
    [
        '[ { "name": "net-a", "ips": [ "10.1.1.104/24" ] ]',
        '[{"name":"net-a","ips":"10.0.0.5/24"}]',
        '[{"name":"net-a","ips":["fd00:10::201"],}]',
        '[{"name":"net-a","mac":"zz"}]',
        "net-a@averyveryverylongif",
        "net-a@eth/1",
        "ns/net-a@eth/1",
        "Net-A",
    ],
    ids=[
        "malformed-json",
        "ips-not-a-list",
        "trailing-comma-json",
        "bad-mac",
        "ifname-19-bytes",
        "ifname-with-slash",
        "two-slashes",
        "upper-case-comma-name",
    ],
)
def test_what_multus_refuses_fails_the_add(value: str) -> None:
    view = _pod({names.NETWORKS_ANNOTATION: value})
    rejected = _reject(checks.read_networks, view, cni_ifname="eth0")
    assert rejected.reason is R.INVALID_NETWORKS_ANNOTATION
    assert names.NETWORKS_ANNOTATION in str(rejected)


@pytest.mark.parametrize(
    ("value", "requests"),
    [
        ('[{"name":"net-a","interfaceRequest":"vlan101"}]', [(NS, "net-a", "vlan101")]),
        ('[{"name":"net-a","Interface":"eth1","foo":{"bar":1}}]', [(NS, "net-a", "eth1")]),
        ("net-a,", [(NS, "net-a", None), (NS, "", None)]),
        ("net-a@..", [(NS, "net-a", "..")]),
    ],
    ids=["interfaceRequest", "case-variant-and-unknown-keys", "trailing-comma", "ifname-dotdot"],
)
def test_what_multus_reads_is_read_the_same(value: str, requests: list[tuple[str, str, str | None]]) -> None:
    nets = checks.read_networks(_pod({names.NETWORKS_ANNOTATION: value}), cni_ifname="eth0")
    assert [s.request for s in nets.selections] == requests


def test_a_malformed_networks_annotation_error_names_the_column() -> None:
    view = _pod({names.NETWORKS_ANNOTATION: '[ { "name": "net-a", "ips": [ "10.1.1.104/24" ] ]'})
    assert "column" in str(_reject(checks.read_networks, view, cni_ifname="eth0"))


@pytest.mark.parametrize(
    ("value", "interfaces"),
    [
        (" net-a , net-b ", [None, None]),
        ("net-a@uplink_p0", ["uplink_p0"]),
        ("ns-a/net-a@flannel.1", ["flannel.1"]),
        ('[{"name":"net-a","interface":"vlan101"}]', ["vlan101"]),
    ],
    ids=[
        "spaces-trimmed",
        "underscore-ifname",
        "dotted-ifname-with-namespace",
        "interface-key",
    ],
)
def test_valid_networks_annotation_is_read(value: str, interfaces: list[str | None]) -> None:
    nets = checks.read_networks(_pod({names.NETWORKS_ANNOTATION: value}), cni_ifname="eth0")
    assert [s.interface for s in nets.selections] == interfaces


def test_comma_and_json_forms_give_the_same_request() -> None:
    a = checks.read_networks(_pod({names.NETWORKS_ANNOTATION: "net-a@vlan101"}), cni_ifname="eth0")
    b = checks.read_networks(
        _pod({names.NETWORKS_ANNOTATION: '[{"name":"net-a","interface":"vlan101"}]'}), cni_ifname="eth0"
    )
    assert [s.request for s in a.selections] == [s.request for s in b.selections]


def test_default_network_override_sets_the_primary_interface() -> None:
    view = _pod({names.DEFAULT_NETWORK_ANNOTATION: '[{"name":"alt","interface":"eth9"}]'})
    assert checks.read_networks(view, cni_ifname="eth0").primary_ifname == "eth9"


def test_two_default_networks_are_refused() -> None:
    view = _pod({names.DEFAULT_NETWORK_ANNOTATION: "a,b"})
    assert _reject(checks.read_networks, view, cni_ifname="eth0").reason is R.INVALID_NETWORKS_ANNOTATION


# --------------------------------------------------------------------- registry


def _registry_fixtures() -> list[dict[str, Any]]:
    index = json.loads((FIXTURES / "index.json").read_text())
    return [e for e in index if e["contract"] == "registry"]


@pytest.mark.parametrize("entry", _registry_fixtures(), ids=[e["file"] for e in _registry_fixtures()])
def test_guard_reads_registry_contract_fixtures_like_the_plugin(entry: dict[str, Any]) -> None:
    text = (FIXTURES / entry["file"]).read_text()
    value = text[:-1] if text.endswith("\n") else text
    view = _pod({names.MANAGED_NETWORKS_ANNOTATION: value})
    if entry["valid"]:
        nets = checks.read_networks(view, cni_ifname="eth0")
        assert nets.registry is not None
    else:
        want = (
            R.UNSUPPORTED_REGISTRY_VERSION if entry["reason"] == "UnsupportedVersion" else R.INVALID_REGISTRY
        )
        rejected = _reject(checks.read_networks, view, cni_ifname="eth0")
        assert rejected.reason is want
        if "mentions" in entry:
            assert entry["mentions"] in str(rejected)


def test_registry_of_another_pod_uid_is_refused() -> None:
    ann = mp.managed_annotations("22222222-3333-4444-5555-666666666666", ENTRIES)
    assert _reject(checks.read_networks, _pod(ann), cni_ifname="eth0").reason is R.REGISTRY_POD_UID_MISMATCH


# --------------------------------------------------------------------- interface names


def test_manual_collision_with_automatic_net1_is_refused() -> None:
    view = _pod({names.NETWORKS_ANNOTATION: '[{"name":"net-a"},{"name":"net-b","interface":"net1"}]'})
    nets = checks.read_networks(view, cni_ifname="eth0")
    rejected = _reject(checks.check_interface_names, nets, view, interface_naming.MultusLayout())
    assert rejected.reason is R.DUPLICATE_INTERFACE_NAME
    assert "net1" in str(rejected) and "net-a" in str(rejected) and "net-b" in str(rejected)


def test_default_networks_shift_generated_names_into_a_collision() -> None:
    view = _pod({names.NETWORKS_ANNOTATION: '[{"name":"net-a"},{"name":"net-b","interface":"net2"}]'})
    nets = checks.read_networks(view, cni_ifname="eth0")
    checks.check_interface_names(nets, view, interface_naming.MultusLayout())  # net1 + net2: fine
    layout = interface_naming.MultusLayout(default_networks=("kube-system/extra",))
    assert _reject(checks.check_interface_names, nets, view, layout).reason is R.DUPLICATE_INTERFACE_NAME


def test_managed_name_colliding_with_default_network_override_interface() -> None:
    ann = mp.managed_annotations(mp.POD_UID, ENTRIES)
    ann[names.DEFAULT_NETWORK_ANNOTATION] = '[{"name":"alt","interface":"dra0"}]'
    view = _pod(ann)
    nets = checks.read_networks(view, cni_ifname="eth0")
    assert (
        _reject(checks.check_interface_names, nets, view, interface_naming.MultusLayout()).reason
        is R.DUPLICATE_INTERFACE_NAME
    )


# --------------------------------------------------------------------- managed targets and selections


def test_managed_targets_are_registry_entries_then_shadow_named_selections() -> None:
    extra = '{"name":"dra-sriov-ffffffffffffffffffffffffffffffff","interface":"x0"}'
    view = _managed_pod(manual=('{"name":"net-a"}', extra))
    nets = checks.read_networks(view, cni_ifname="eth0")
    assert checks.managed_targets(nets) == (
        (NS, PLANS[0].name),
        (NS, PLANS[1].name),
        (NS, "dra-sriov-ffffffffffffffffffffffffffffffff"),
    )


def test_valid_managed_pod_returns_expected_interfaces() -> None:
    view = _managed_pod(manual=('{"name":"net-a"}',))
    nets = checks.read_networks(view, cni_ifname="eth0")
    expected = checks.check_managed(view, nets, NADS)
    assert [(e.ifname, e.pci_address) for e in expected] == [
        ("dra0", "0000:03:00.1"),
        ("dra1", "0000:80:00.1"),
    ]


def test_pod_without_managed_entries_needs_no_nad_reads() -> None:
    view = _pod({names.NETWORKS_ANNOTATION: "net-a,net-b"})
    nets = checks.read_networks(view, cni_ifname="eth0")
    assert checks.managed_targets(nets) == () and checks.check_managed(view, nets, {}) == ()


def _selections_with(first: str) -> str:
    return "[" + ",".join([first, mp.selection(ENTRIES[1])]) + "]"


@pytest.mark.parametrize(
    ("networks", "reason"),
    [
        (f"[{mp.selection(ENTRIES[1])}]", R.REGISTRY_ENTRY_NOT_SELECTED),
        (
            "["
            + ",".join([mp.selection(ENTRIES[0]), mp.selection(ENTRIES[0]), mp.selection(ENTRIES[1])])
            + "]",
            R.DUPLICATE_MANAGED_SELECTION,
        ),
        (
            _selections_with(
                f'{{"name":"{PLANS[0].name}","namespace":"{NS}","interface":"dra0","deviceID":"0000:03:00.2"}}'
            ),
            R.MANAGED_SELECTION_OVERRIDE,
        ),
        (
            _selections_with(f'{{"name":"{PLANS[0].name}","namespace":"{NS}","interface":"dra5"}}'),
            R.MANAGED_SELECTION_OVERRIDE,
        ),
        (
            _selections_with(
                f'{{"name":"{PLANS[0].name}","namespace":"{NS}","interface":"dra0","ips":["192.0.2.9/24"]}}'
            ),
            R.MANAGED_SELECTION_OVERRIDE,
        ),
        (_selections_with(f'{{"name":"{PLANS[0].name}","interface":"dra0"}}'), R.MANAGED_SELECTION_OVERRIDE),
        (f"{NS}/{PLANS[0].name}@dra0,{NS}/{PLANS[1].name}@dra1", R.MANAGED_SELECTION_OVERRIDE),
    ],
    ids=[
        "registry-entry-not-selected",
        "managed-selection-duplicated",
        "device-id-override",
        "interface-override",
        "ips-option-added",
        "namespace-omitted",
        "comma-notation",
    ],
)
def test_selection_rules(networks: str, reason: R) -> None:
    view = _managed_pod(networks=networks)
    nets = checks.read_networks(view, cni_ifname="eth0")
    assert _reject(checks.check_managed, view, nets, NADS).reason is reason


def test_missing_shadow_is_refused() -> None:
    view = _managed_pod()
    nets = checks.read_networks(view, cni_ifname="eth0")
    nads = dict(NADS)
    nads[(NS, PLANS[1].name)] = None
    rejected = _reject(checks.check_managed, view, nets, nads)
    assert rejected.reason is R.SHADOW_NOT_FOUND and PLANS[1].name in str(rejected)


def test_ordinary_nad_with_shadow_like_name_is_not_checked() -> None:
    name = "dra-sriov-ffffffffffffffffffffffffffffffff"
    view = _pod({names.NETWORKS_ANNOTATION: f'[{{"name":"{name}","interface":"x0","ips":["10.0.0.2/24"]}}]'})
    nets = checks.read_networks(view, cni_ifname="eth0")
    ordinary = mp.source_nad(NS, name, {"cniVersion": "1.0.0", "type": "macvlan"})
    assert checks.check_managed(view, nets, {(NS, name): ordinary}) == ()


def test_all_violations_are_reported_with_the_first_deciding() -> None:
    nads = dict(NADS)
    broken = json.loads(json.dumps(nads[(NS, PLANS[0].name)]))
    broken["metadata"]["finalizers"] = []
    nads[(NS, PLANS[0].name)] = broken
    view = _managed_pod(networks=f"[{mp.selection(ENTRIES[0])}]")
    nets = checks.read_networks(view, cni_ifname="eth0")
    rejected = _reject(checks.check_managed, view, nets, nads)
    assert [v.reason for v in rejected.violations] == [
        R.MISSING_PROTECTION_FINALIZER,
        R.REGISTRY_ENTRY_NOT_SELECTED,
    ]
    assert rejected.reason is R.MISSING_PROTECTION_FINALIZER


# --------------------------------------------------------------------- what post-ADD verification must find


@pytest.mark.parametrize(
    ("value", "layout", "namespace", "want"),
    [
        (
            '[{"name":"net-a","namespace":"ns-a","interface":"eth1"}]',
            interface_naming.MultusLayout(),
            NS,
            [("eth1", "ns-a/net-a")],
        ),
        (
            "net-a,other/net-b@foo,net-c",
            interface_naming.MultusLayout(),
            NS,
            [("net1", f"{NS}/net-a"), ("foo", "other/net-b"), ("net3", f"{NS}/net-c")],
        ),
        (
            "net-a",
            interface_naming.MultusLayout(default_networks=("kube-system/extra",)),
            NS,
            [("net2", f"{NS}/net-a")],
        ),
        (
            "net-a",
            interface_naming.MultusLayout(default_networks=("kube-system/extra",)),
            "kube-system",
            [("net1", "kube-system/net-a")],
        ),
    ],
    ids=[
        "explicit-interface",
        "net-n-counts-every-delegate-before-it",
        "default-networks-shift-the-index",
        "system-namespace-skips-default-networks",
    ],
)
def test_every_selection_is_expected_under_the_name_multus_gives_it(
    value: str, layout: interface_naming.MultusLayout, namespace: str, want: list[tuple[str, str]]
) -> None:
    view = checks.pod_view(mp.pod(namespace, POD, annotations={names.NETWORKS_ANNOTATION: value}))
    nets = checks.read_networks(view, cni_ifname="eth0")
    expected = checks.requested_interfaces(nets, view, layout, ())
    assert [(e.ifname, e.network, e.pci_address) for e in expected] == [(i, n, None) for i, n in want]


def test_managed_selections_keep_their_bound_vf_among_the_requested_interfaces() -> None:
    view = _managed_pod(manual=('{"name":"net-a","namespace":"ns-a","interface":"eth1"}', '{"name":"net-b"}'))
    nets = checks.read_networks(view, cni_ifname="eth0")
    managed = checks.check_managed(view, nets, NADS)
    expected = checks.requested_interfaces(nets, view, interface_naming.MultusLayout(), managed)
    assert [(e.ifname, e.network, e.pci_address) for e in expected] == [
        ("eth1", "ns-a/net-a", None),
        ("net2", f"{NS}/net-b", None),
        ("dra0", f"{NS}/{PLANS[0].name}", "0000:03:00.1"),
        ("dra1", f"{NS}/{PLANS[1].name}", "0000:80:00.1"),
    ]


def test_a_pod_without_selections_expects_nothing() -> None:
    view = _pod({})
    nets = checks.read_networks(view, cni_ifname="eth0")
    assert checks.requested_interfaces(nets, view, interface_naming.MultusLayout(), ()) == ()
