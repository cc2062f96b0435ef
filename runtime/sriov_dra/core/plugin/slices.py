"""ResourceSlice planning: the devices a node advertises, split into a pool, and the writes to get there.

Only devices policy evaluation made eligible are published, as upstream's opt-in advertisement,
each with discovery plus merged policy attributes (discovery wins on a reserved key); they are
laid out in node-scoped slices of one pool named after the node, deterministic and at most
:data:`MAX_DEVICES_PER_SLICE` each, one empty slice when nothing is advertised; a device may carry
device taints (``core.plugin.device_taints``) whose ``timeAdded`` is the server's, kept while the
taint stays; :func:`plan_writes` returns no write when the server already matches, and a change
of taints alone rewrites only the slices it touches, at the same pool generation. Comparing the device set, not only attribute
keys, republishes a withdrawn device (docs/design.md#eligibility). Pure; slices are plain dicts.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from sriov_dra.core import attributes, device_facts, policies
from sriov_dra.core.plugin import device_taints
from sriov_dra_rules import errors, names

API_VERSION: Final = "resource.k8s.io/v1"
KIND: Final = "ResourceSlice"
MAX_DEVICES_PER_SLICE: Final = 64
"""``ResourceSliceMaxDevicesWithAdvancedFeatures``: the cap of a slice any of whose devices carries a
taint. Always used, tainted or not, so that a taint never changes the layout: with 128 untainted
devices per slice, the first taint on a node of more than 64 VFs would re-cut the whole pool (a
generation bump and a write of every slice), and the last removal would cut it back."""
MAX_NAME_LENGTH: Final = names.DNS1123_SUBDOMAIN_MAX

Slice = Mapping[str, Any]
"""A ResourceSlice as the API's JSON (``apiVersion``, ``kind``, ``metadata``, ``spec``)."""


@dataclass(frozen=True)
class PublishedDevice:
    """One device entry of a slice.

    Shapes: ``name`` is the DRA device name (a DNS label); ``attributes`` maps qualified names
    to scalar values, sorted by key.
    """

    name: str
    attributes: Mapping[str, attributes.AttributeValue] = field(hash=False)

    def to_json(self) -> dict[str, Any]:
        """The API form ``{"name": ..., "attributes": {key: {"string": ...}}}`` (keys sorted)."""
        return {
            "name": self.name,
            "attributes": {k: self.attributes[k].to_json() for k in sorted(self.attributes)},
        }


@dataclass(frozen=True)
class SliceRef:
    """An existing slice to delete, with the preconditions that make the delete exact."""

    name: str
    uid: str
    resource_version: str


@dataclass(frozen=True)
class SliceWrites:
    """The writes that turn the current pool into the desired one, in the order to apply them.

    Shapes: ``deletes`` first, then ``updates`` (full bodies carrying ``metadata.resourceVersion``
    as the precondition), then ``creates``; ``generation`` is the pool generation every slice has
    afterwards (unchanged when there is nothing to write).
    """

    generation: int
    deletes: tuple[SliceRef, ...] = ()
    updates: tuple[Slice, ...] = ()
    creates: tuple[Slice, ...] = ()

    @property
    def count(self) -> int:
        """Number of API writes."""
        return len(self.deletes) + len(self.updates) + len(self.creates)

    @property
    def empty(self) -> bool:
        """True when the server already holds the desired pool."""
        return self.count == 0


def published_devices(
    facts: Sequence[device_facts.DeviceFacts], evaluation: policies.PolicyEvaluation
) -> tuple[PublishedDevice, ...]:
    """The devices to advertise: eligible ones only, each with discovery plus policy attributes.

    A policy value never replaces a discovery-owned key (policy evaluation already drops them;
    discovery wins here as a second guard). Devices the evaluation names but discovery does not
    know are ignored.
    Shapes: sorted by device name.
    All discovered devices stay in the inventory; only the advertised membership changes.
    Source: upstream dra-driver-sriov ``UpdatePolicyDevices``; docs/design.md#eligibility.
    """
    by_name = {f.name: f for f in facts}
    policy_values = evaluation.device_attributes()
    out: list[PublishedDevice] = []
    for name in sorted(evaluation.eligible & by_name.keys()):
        merged = dict(policy_values.get(name, {}))
        merged.update(device_facts.discovered_attributes(by_name[name]))
        out.append(PublishedDevice(name, dict(sorted(merged.items()))))
    return tuple(out)


def slice_name(driver: str, node: str, index: int) -> str:
    """Deterministic name of slice ``index`` of ``node``'s pool: ``<node>-<driver>-<index>``.

    When that exceeds 253 characters the ``<node>-<driver>`` part is shortened and a 16-hex
    digest of it is inserted, so names stay unique per (driver, node, index).
    Shapes: a DNS-1123 subdomain of at most 253 characters for any valid node and driver name.
    """
    base = f"{node}-{driver}"
    name = f"{base}-{index}"
    if len(name) <= MAX_NAME_LENGTH:
        return name
    digest = hashlib.sha256(base.encode("utf-8")).hexdigest()[:16]
    keep = MAX_NAME_LENGTH - len(digest) - len(str(index)) - 2
    return f"{base[:keep].rstrip('-.')}-{digest}-{index}"


Taints = Mapping[str, device_taints.DeviceTaint]
"""The taint of each tainted device, by device name."""


def _device_json(device: PublishedDevice, taints: Taints) -> dict[str, Any]:
    body = device.to_json()
    taint = taints.get(device.name)
    if taint is not None:
        body["taints"] = [taint.to_json()]
    return body


def desired_slices(
    devices: Sequence[PublishedDevice],
    *,
    driver: str,
    node: str,
    node_uid: str,
    generation: int,
    taints: Taints | None = None,
) -> tuple[Slice, ...]:
    """Lay ``devices`` out as the slices of pool ``node`` at ``generation``.

    A device named in ``taints`` carries that taint (``timeAdded`` left to the server); names of
    unpublished devices are ignored.
    Shapes: devices sorted by name (VFs of one PF are neighbours, so a PF's taints stay in few
    slices) and cut every :data:`MAX_DEVICES_PER_SLICE`; no devices gives
    one slice with an empty device list; each slice is owned by the Node (``node_uid``) so it is
    garbage-collected with it, and names ``spec.nodeName``.
    Raises: InvalidSpec when two devices share a name or a name is not a DNS label.
    """
    ordered = sorted(devices, key=lambda d: d.name)
    problems = [
        errors.FieldError(f"devices[{d.name!r}]", problem)
        for d in ordered
        if (problem := names.dns1123_label_problem(d.name)) is not None
    ]
    seen = [d.name for d in ordered]
    problems.extend(
        errors.FieldError(f"devices[{n!r}]", "two devices share this name")
        for n in sorted({n for n in seen if seen.count(n) > 1})
    )
    errors.raise_if_any(problems, f"cannot publish the devices of node {node}")
    chunks = [ordered[i : i + MAX_DEVICES_PER_SLICE] for i in range(0, len(ordered), MAX_DEVICES_PER_SLICE)]
    chunks = chunks or [[]]
    owner = {"apiVersion": "v1", "kind": "Node", "name": node, "uid": node_uid, "controller": True}
    return tuple(
        {
            "apiVersion": API_VERSION,
            "kind": KIND,
            "metadata": {"name": slice_name(driver, node, i), "ownerReferences": [owner]},
            "spec": {
                "driver": driver,
                "nodeName": node,
                "pool": {"name": node, "generation": generation, "resourceSliceCount": len(chunks)},
                "devices": [_device_json(d, taints or {}) for d in chunk],
            },
        }
        for i, chunk in enumerate(chunks)
    )


def plan_writes(
    current: Sequence[Slice],
    devices: Sequence[PublishedDevice],
    *,
    driver: str,
    node: str,
    node_uid: str,
    last_generation: int = 0,
    taints: Taints | None = None,
) -> SliceWrites:
    """The minimal writes that make the server's slices of ``node`` publish exactly ``devices``.

    ``current`` is every slice of this driver on this node (a list by ``spec.driver`` and
    ``spec.nodeName``). When they already form the desired pool (same names, contents, owner,
    one generation and the right ``resourceSliceCount``) nothing is written. Otherwise the pool
    generation becomes one more than the highest seen (``last_generation`` included, so a pool
    whose slices were all deleted never goes back in time), slices not in the layout, or whose
    immutable fields differ, are deleted, kept slices are updated (all of them, because every
    slice of a pool carries the same generation) and missing ones created.
    ``taints`` as :func:`desired_slices`; a taint already on the server (same device, key and
    effect) keeps the server's ``timeAdded``. When the pool differs only in taints, only the
    slices whose taints changed are updated and the generation stays (a taint change confined
    to a slice needs no generation bump).
    Shapes: plain JSON dicts in and out.
    Raises: InvalidSpec as :func:`desired_slices`.
    Source: the DRA ResourceSlice pool rules (generation, resourceSliceCount); the device taint
    rules of Kubernetes 1.36 (enhancements #5055).
    """
    seen_generations = [_generation(s) for s in current]
    generation = max([*seen_generations, last_generation, 0])
    added = _times_added(current)

    def layout(gen: int) -> tuple[Slice, ...]:
        laid = desired_slices(
            devices, driver=driver, node=node, node_uid=node_uid, generation=gen, taints=taints
        )
        return tuple(_with_times_added(s, added) for s in laid)

    probe = layout(generation)
    by_name = {_name(s): s for s in current}
    if (
        generation > 0
        and len(by_name) == len(current) == len(probe)
        and all(_generation(s) == generation for s in current)
        and all(_name(d) in by_name and _same(by_name[_name(d)], d, taints=False) for d in probe)
    ):
        changed = tuple(_update_body(by_name[_name(d)], d) for d in probe if not _same(by_name[_name(d)], d))
        return SliceWrites(generation, updates=changed)
    generation += 1
    desired = layout(generation)
    wanted = {_name(d): d for d in desired}
    deletes: list[SliceRef] = []
    kept: dict[str, Slice] = {}
    for s in sorted(current, key=_name):
        name = _name(s)
        if name in wanted and name not in kept and _same_identity(s, wanted[name]):
            kept[name] = s
        else:
            meta = s.get("metadata") or {}
            deletes.append(SliceRef(name, str(meta.get("uid", "")), str(meta.get("resourceVersion", ""))))
    updates = tuple(_update_body(kept[_name(d)], d) for d in desired if _name(d) in kept)
    creates = tuple(d for d in desired if _name(d) not in kept)
    return SliceWrites(generation, tuple(deletes), updates, creates)


def _name(s: Slice) -> str:
    return str((s.get("metadata") or {}).get("name", ""))


def _pool(s: Slice) -> Mapping[str, Any]:
    pool = (s.get("spec") or {}).get("pool")
    return pool if isinstance(pool, Mapping) else {}


def _generation(s: Slice) -> int:
    value = _pool(s).get("generation", 0)
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _identity(s: Slice) -> tuple[object, ...]:
    """The fields the API does not let an update change."""
    spec = s.get("spec") or {}
    selection = tuple(k for k in ("nodeSelector", "allNodes", "perDeviceNodeSelection") if spec.get(k))
    return (spec.get("driver"), spec.get("nodeName"), _pool(s).get("name"), selection)


def _same_identity(have: Slice, want: Slice) -> bool:
    return _identity(have) == _identity(want)


def _owners(s: Slice) -> list[tuple[object, ...]]:
    refs = (s.get("metadata") or {}).get("ownerReferences") or []
    return sorted(
        (r.get("apiVersion"), r.get("kind"), r.get("name"), r.get("uid"), bool(r.get("controller")))
        for r in refs
        if isinstance(r, Mapping)
    )


def _canonical(value: object) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


def _times_added(current: Sequence[Slice]) -> dict[tuple[str, str, str], object]:
    """The server's ``timeAdded`` of every device taint in ``current``, by (device, key, effect)."""
    out: dict[tuple[str, str, str], object] = {}
    for s in current:
        for d in (s.get("spec") or {}).get("devices") or []:
            if not isinstance(d, Mapping):
                continue
            for t in d.get("taints") or []:
                if isinstance(t, Mapping) and t.get("timeAdded") is not None:
                    out[(str(d.get("name")), str(t.get("key")), str(t.get("effect")))] = t["timeAdded"]
    return out


def _with_times_added(want: Slice, added: Mapping[tuple[str, str, str], object]) -> Slice:
    """``want`` with each taint's ``timeAdded`` copied from the server where it already has it."""
    spec = want["spec"]
    devices = []
    for d in spec["devices"]:
        if "taints" in d:
            d = {**d, "taints": [_stamped(d["name"], t, added) for t in d["taints"]]}
        devices.append(d)
    return {**want, "spec": {**spec, "devices": devices}}


def _stamped(
    device: str, taint: Mapping[str, Any], added: Mapping[tuple[str, str, str], object]
) -> Mapping[str, Any]:
    when = added.get((device, str(taint["key"]), str(taint["effect"])))
    return taint if when is None else {**taint, "timeAdded": when}


def dropped_taints(sent: Slice, stored: Slice) -> bool:
    """True when ``sent`` carried device taints and the server's ``stored`` copy has none.

    The API server drops the field silently when its ``DRADeviceTaints`` feature gate is off.
    """
    return _has_taints(sent) and not _has_taints(stored)


def _has_taints(s: Slice) -> bool:
    return any(isinstance(d, Mapping) and d.get("taints") for d in (s.get("spec") or {}).get("devices") or [])


def _content(s: Slice, *, taints: bool = True) -> tuple[object, ...]:
    """Everything this driver writes, in a form where absent and empty lists/maps are equal.

    ``taints=False`` leaves the devices' taints out.
    """
    spec = dict(s.get("spec") or {})
    pool = dict(_pool(s))
    devices = [
        {
            k: v
            for k, v in d.items()
            if not (k in ("attributes", "taints") and not v) and (taints or k != "taints")
        }
        for d in (spec.pop("devices", None) or [])
        if isinstance(d, Mapping)
    ]
    spec.pop("pool", None)
    return (
        _identity(s),
        _canonical({k: v for k, v in spec.items() if v not in (None, [], {}, False)}),
        pool.get("resourceSliceCount"),
        _canonical(devices),
        _owners(s),
    )


def _same(have: Slice, want: Slice, *, taints: bool = True) -> bool:
    return _content(have, taints=taints) == _content(want, taints=taints)


def _update_body(have: Slice, want: Slice) -> dict[str, Any]:
    """``want`` with the precondition and the metadata other writers own kept from ``have``."""
    have_meta = have.get("metadata") or {}
    meta = dict(want["metadata"])
    meta["resourceVersion"] = have_meta.get("resourceVersion", "")
    meta["uid"] = have_meta.get("uid", "")
    for key in ("labels", "annotations", "finalizers"):
        if have_meta.get(key):
            meta[key] = have_meta[key]
    return {**want, "metadata": meta}
