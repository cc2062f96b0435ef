"""Cross-part contract: what the plugin writes on a Pod, the guard accepts before Multus ADD.

The plugin's merger (``core.plugin.selections``) writes the managed selections and the
``managed-networks`` registry; its shadow builder (``core.plugin.shadow_object``, ``core.render``,
``core.binding_annotation``) writes the shadow NADs. The guard (``guard.checks``, ``guard.shadow_checks``) reads
them live. Everything here is produced by the plugin's own functions (nothing hand-written on
the plugin side) and then judged by the guard, for arbitrary manual selections around the managed
ones (JSON or comma notation, with or without namespaces and interface names):

* a merge the plugin publishes passes every guard check, and the guard expects exactly the
  registry's interfaces (names, shadow targets and VFs): binding, registry, selections and
  ``configSHA256`` over the exact ``spec.config`` bytes agree, also after a JSON round trip
  through the API;
* the guard's Multus interface naming agrees with the merger's: the merger refuses a managed
  name collision exactly when the guard would refuse the same annotation, and a collision it
  leaves alone involves manual entries only;
* after one claim is released, the guard still accepts the Pod for the remaining claim.

The contract: docs/design.md#ownership, docs/design.md#interface-names, docs/design.md#selections
and docs/design.md#guard-checks.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import managed_pods as mp

from sriov_dra.core import interface_naming, networks
from sriov_dra.core.plugin import selection_ownership, selection_update, selections
from sriov_dra.guard import checks, decisions, shadow_checks
from sriov_dra_rules import errors, names

NS, POD = "ai-workloads", "trainer"
CLAIMS = ("c1a1c1a1-0000-4000-8000-000000000001", "c2a2c2a2-0000-4000-8000-000000000002")
RAILS = (
    ("rail-a-net", "rail-a", "192.0.2.0/24", "0000:03:00.1", CLAIMS[0]),
    ("rail-b-net", "rail-b", "198.51.100.0/24", "0000:80:00.1", CLAIMS[0]),
    ("rail-c-net", "rail-c", "203.0.113.0/24", "0000:81:00.1", CLAIMS[1]),
)
NAD_UIDS = tuple(f"d0d0d0d0-0000-4000-8000-00000000000{i}" for i in range(len(RAILS)))
PLANS = mp.plan_rails(NS, POD, RAILS)
ENTRIES = [mp.registry_entry(p, uid) for p, uid in zip(PLANS, NAD_UIDS, strict=True)]
BINDINGS = [
    selection_ownership.ManagedBinding(entry, NS, src)
    for entry, (src, *_) in zip(ENTRIES, RAILS, strict=True)
]
# The live shadows as the API serves them: server-set UID, and a JSON round trip of the object.
NADS = {
    (p.namespace, p.name): json.loads(json.dumps(mp.with_uid(p.nad, uid)))
    for p, uid in zip(PLANS, NAD_UIDS, strict=True)
}

manual_entries = st.lists(
    st.tuples(
        st.sampled_from(("net-a", "net-b", "macvlan-1")),
        st.sampled_from((None, NS, "other-ns")),
        st.sampled_from((None, "net1", "net2", "net3", "dra0", "dra2", "eth1")),
    ),
    max_size=4,
)


def _manual_annotation(entries: list[tuple[str, str | None, str | None]], comma: bool) -> str | None:
    if not entries:
        return None
    if comma:
        return ",".join(
            f"{ns + '/' if ns else ''}{name}{'@' + ifn if ifn else ''}" for name, ns, ifn in entries
        )
    objs = []
    for name, ns, ifn in entries:
        obj = {"name": name}
        if ns:
            obj["namespace"] = ns
        if ifn:
            obj["interface"] = ifn
        objs.append(json.dumps(obj))
    return "[" + ", ".join(objs) + "]"


def _pod(annotations: Mapping[str, str]) -> dict[str, Any]:
    return mp.pod(NS, POD, annotations=annotations)


def _guard_expected(annotations: Mapping[str, str]) -> tuple[shadow_checks.ExpectedInterface, ...]:
    """Run the guard's pre-ADD checks on a live Pod with ``annotations``; return what it expects."""
    view = checks.pod_view(json.loads(json.dumps(_pod(annotations))))
    nets = checks.read_networks(view, cni_ifname=names.DEFAULT_PRIMARY_IFNAME)
    nads = {t: NADS.get(t) for t in checks.managed_targets(nets)}
    return checks.check_managed(view, nets, nads)


def _guard_collision(annotations: Mapping[str, str]) -> decisions.Rejected | None:
    view = checks.pod_view(_pod(annotations))
    nets = checks.read_networks(view, cni_ifname=names.DEFAULT_PRIMARY_IFNAME)
    try:
        checks.check_interface_names(nets, view, interface_naming.MultusLayout())
    except decisions.Rejected as exc:
        return exc
    return None


def _expected_of(entries: list[Any]) -> list[tuple[str, str, str]]:
    pci = {p.name: p.binding.pci_address for p in PLANS}
    return [(e.interface, f"{e.namespace}/{e.name}", pci[e.name]) for e in entries]


@given(manual_entries, st.booleans(), st.integers(min_value=1, max_value=len(BINDINGS)))
def test_guard_accepts_what_the_merger_publishes_and_refuses_what_it_refuses(
    manual: list[tuple[str, str | None, str | None]], comma: bool, count: int
) -> None:
    before: dict[str, str] = {}
    text = _manual_annotation(manual, comma)
    if text is not None:
        before[names.NETWORKS_ANNOTATION] = text
    wanted = BINDINGS[:count]
    try:
        update = selections.merge_managed_selections(selection_update.pod_snapshot(_pod(before)), wanted)
    except errors.Conflict as exc:
        assert exc.reason is errors.Reason.DUPLICATE_INTERFACE_NAME, exc
        # The same annotation as the guard would see it had the merger written it anyway.
        written = mp.managed_annotations(
            mp.POD_UID, [b.entry for b in wanted], manual=[s.raw_text for s in _parse(text)]
        )
        rejected = _guard_collision(written)
        assert rejected is not None and rejected.reason is decisions.Reason.DUPLICATE_INTERFACE_NAME
        return
    after = dict(update.annotations)
    final = _parse(after[names.NETWORKS_ANNOTATION])
    collisions = interface_naming.find_interface_collisions([s.raw for s in final], pod_namespace=NS)
    assert (_guard_collision(after) is not None) == bool(collisions)
    if collisions:  # left to the guard on purpose: manual entries only
        assert all(i < len(manual) for c in collisions for i in c.selection_indexes), collisions
        return
    expected = _guard_expected(after)
    assert [(e.ifname, e.network, e.pci_address) for e in expected] == _expected_of([b.entry for b in wanted])
    # Unrelated entries come first, in order: JSON ones byte for byte, comma ones as minimal objects.
    kept, written = final[: len(manual)], _parse(text)
    if comma:
        assert [s.raw for s in kept] == [s.raw for s in written]
    else:
        assert [s.raw_text for s in kept] == [s.raw_text for s in written]


@given(manual_entries.map(lambda es: [e for e in es if e[2] not in ("dra0", "dra1", "dra2")]), st.booleans())
def test_guard_accepts_the_pod_after_one_claim_is_released(
    manual: list[tuple[str, str | None, str | None]], comma: bool
) -> None:
    before: dict[str, str] = {}
    text = _manual_annotation(manual, comma)
    if text is not None:
        before[names.NETWORKS_ANNOTATION] = text
    merged = selections.merge_managed_selections(selection_update.pod_snapshot(_pod(before)), BINDINGS)
    released = selections.remove_managed_selections(
        selection_update.pod_snapshot(_pod(merged.annotations)), CLAIMS[0]
    )
    remaining = [b.entry for b in BINDINGS if b.entry.claim_uid != CLAIMS[0]]
    assert released.removed and not released.kept
    expected = _guard_expected(released.annotations)
    assert [(e.ifname, e.network, e.pci_address) for e in expected] == _expected_of(remaining)


def _parse(text: str | None) -> tuple[networks.Selection, ...]:
    return networks.parse_networks(text, pod_namespace=NS)


@pytest.mark.parametrize(
    "edit",
    [
        lambda c: c.replace(",", ", ", 1),
        lambda c: json.dumps(json.loads(c), indent=2),
        lambda c: c + "\n",
    ],
    ids=["space-after-a-comma", "re-indented", "trailing-newline"],
)
def test_config_sha256_is_over_the_exact_spec_config_bytes_so_any_reformatting_is_refused(edit: Any) -> None:
    annotations = mp.managed_annotations(mp.POD_UID, ENTRIES[:1])
    target = (ENTRIES[0].namespace, ENTRIES[0].name)
    original = NADS[target]
    edited = json.loads(json.dumps(original))
    edited["spec"]["config"] = edit(original["spec"]["config"])
    NADS[target] = edited
    try:
        with pytest.raises(decisions.Rejected) as info:
            _guard_expected(annotations)
    finally:
        NADS[target] = original
    assert info.value.reason is decisions.Reason.CONFIG_HASH_MISMATCH
