"""What preparing one ResourceClaim on this node means: checks, devices, configs, claim status.

The checks that decide, before anything is touched, whether a claim the kubelet names can be
prepared here (docs/design.md#consumer): the UID the kubelet sent, an allocation, exactly one
consuming Pod, results of this driver from this node's pool naming discovered VFs, no admin or
shared allocations, strict VfConfig layering. The :class:`ClaimPlan` reports each VF under its
top-level request name (``vf/large`` → ``vf``), as the kubelet matches containers. Also the pure
half of the diagnostic ``status.devices`` upsert. Pure; other drivers' entries are not decoded.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from sriov_dra.core import identities, vf_config
from sriov_dra.core.plugin import device_conditions
from sriov_dra_rules import errors, names

STATUS_DEVICE_KEYS: Final = ("driver", "pool", "device", "shareID")
"""Map keys of ``status.devices`` (one entry per key tuple; ``shareID`` may be absent)."""


@dataclass(frozen=True)
class PlannedDevice:
    """One allocated VF of this driver, with its effective VfConfig.

    Shapes: ``request_names`` are top-level request names, sorted and unique (one device may
    serve several requests when their configs agree); ``pool`` is the node's pool; ``device`` a
    DRA device name (BDF with ``:``/``.`` → ``-``).
    """

    request_names: tuple[str, ...]
    pool: str
    device: str
    config: vf_config.VfConfig


@dataclass(frozen=True)
class ClaimPlan:
    """A claim that passed every check, ready to prepare.

    Shapes: ``devices`` in allocation-result order (first occurrence); ``pod_uid``/``pod_name``
    from the single ``status.reservedFor`` entry; the consumer namespace is the claim's.
    """

    claim_uid: identities.ClaimUid
    namespace: str
    name: str
    pod_uid: identities.PodUid
    pod_name: str
    devices: tuple[PlannedDevice, ...]


def base_request(request: str) -> str:
    """The top-level request name of a request reference: ``"vf/large"`` → ``"vf"``.

    Source: Kubernetes ``resourceclaim.BaseRequestRef``.
    """
    return request.split("/", 1)[0]


def _invalid(claim: str, message: str, *problems: errors.FieldError) -> errors.InvalidSpec:
    return errors.InvalidSpec(f"{claim}: {message}", reason=errors.Reason.INVALID_CLAIM, errors=problems)


def _mapping(value: object) -> Mapping[str, object]:
    return value if isinstance(value, Mapping) else {}


def _consumer(claim: str, status: Mapping[str, object]) -> tuple[str, str]:
    """Return ``(pod_uid, pod_name)`` of the single Pod reservation, or raise InvalidClaim."""
    reserved = status.get("reservedFor")
    entries = reserved if isinstance(reserved, list) else []
    if not entries:
        raise _invalid(
            claim,
            "no consumer is recorded in status.reservedFor; the scheduler reserves the claim for its Pod "
            "before the kubelet prepares it, so wait for the Pod to be scheduled",
        )
    if len(entries) > 1:
        raise _invalid(
            claim,
            f"status.reservedFor lists {len(entries)} consumers; an SR-IOV VF claim can be prepared for "
            "exactly one Pod: do not share the claim between Pods (use a ResourceClaimTemplate)",
        )
    entry = _mapping(entries[0])
    group, resource = entry.get("apiGroup") or "", entry.get("resource")
    uid, name = entry.get("uid"), entry.get("name")
    problems: list[errors.FieldError] = []
    if group != "" or resource != "pods":
        problems.append(
            errors.FieldError(
                "status.reservedFor[0]",
                f"consumer {group or 'core'}/{resource} is not a Pod; only Pod consumers are supported",
            )
        )
    uid_problem = names.uuid_problem(uid)
    if uid_problem is not None:
        problems.append(errors.FieldError("status.reservedFor[0].uid", uid_problem))
    if not isinstance(name, str) or not name:
        problems.append(errors.FieldError("status.reservedFor[0].name", "must name the consuming Pod"))
    if problems:
        raise _invalid(claim, "its consumer cannot be prepared for", *problems)
    return str(uid), str(name)


def _check_results(claim: str, results: object, driver_name: str) -> None:
    """Refuse admin-access and shared (shareID) results of this driver."""
    problems: list[errors.FieldError] = []
    for index, result in enumerate(results if isinstance(results, list) else []):
        result = _mapping(result)
        if result.get("driver") != driver_name:
            continue
        where = f"status.allocation.devices.results[{index}]"
        if result.get("adminAccess") is True:
            problems.append(
                errors.FieldError(
                    f"{where}.adminAccess",
                    "admin access to a VF is not supported: preparing it would change the driver of a VF "
                    "another claim uses; remove adminAccess from the request",
                )
            )
        if result.get("shareID"):
            problems.append(
                errors.FieldError(
                    f"{where}.shareID", "VFs are exclusive devices; a shared allocation cannot be prepared"
                )
            )
    if problems:
        raise _invalid(claim, "its allocation uses unsupported modes", *problems)


def plan_claim(
    claim: Mapping[str, object],
    *,
    expected_uid: str,
    driver_name: str,
    pool_name: str,
    known_devices: Collection[str],
) -> ClaimPlan:
    """Check a live ResourceClaim for preparation on this node and return its plan.

    ``known_devices`` is the node's full discovered inventory (device names), not the advertised
    policy set: an allocation made before a policy change still names a real VF.

    Raises: InvalidSpec(InvalidClaim) when the UID differs from ``expected_uid`` (the claim was
    replaced), there is no allocation, the consumer is not exactly one Pod, a result of this
    driver is admin-access or shared, comes from another node's pool or names an unknown VF, or
    there is no result of this driver; InvalidSpec(InvalidVfConfig) for a bad VfConfig of this
    driver; InvalidSpec(DuplicateInterfaceName) for an ambiguous ``ifName``;
    InvalidSpec(ConflictingDeviceRequirements) when one VF serves requests with different
    configs. Every message names the claim and the field.
    Source: docs/design.md#consumer, docs/design.md#template-resolution; one interface per
    physical device (docs/design.md#identity).
    """
    meta, status, spec = (_mapping(claim.get(k)) for k in ("metadata", "status", "spec"))
    namespace, name, uid = meta.get("namespace"), meta.get("name"), meta.get("uid")
    label = f"ResourceClaim {namespace}/{name}"
    if uid != expected_uid:
        raise _invalid(
            label,
            f"its UID is {uid}, but the kubelet asked for {expected_uid}: the claim was deleted and "
            "recreated; the kubelet retries with the current claim",
        )
    if not isinstance(namespace, str) or not isinstance(name, str):
        raise _invalid(label, "metadata.namespace and metadata.name must be strings")
    allocation = status.get("allocation")
    if not isinstance(allocation, Mapping):
        raise _invalid(
            label, "it is not allocated yet (status.allocation is empty); the scheduler allocates it"
        )
    pod_uid, pod_name = _consumer(label, status)
    devices_obj = _mapping(allocation.get("devices"))
    _check_results(label, devices_obj.get("results"), driver_name)
    results = vf_config.resolve_results(allocation, driver_name=driver_name)
    if not results:
        raise _invalid(
            label,
            f"its allocation has no device of driver {driver_name}; the kubelet sends a claim only to "
            "the drivers that have results in it",
        )
    where_problems: list[errors.FieldError] = []
    for index, result in enumerate(results):
        where = f"status.allocation.devices.results[{result.device}]"
        if result.pool != pool_name:
            where_problems.append(
                errors.FieldError(
                    f"{where}.pool",
                    f"{result.pool!r} is another node's pool; this plugin serves node {pool_name!r} "
                    "(the claim is allocated to a different node)",
                )
            )
        elif result.device not in known_devices:
            where_problems.append(
                errors.FieldError(
                    f"{where}.device",
                    f"{result.device!r} is not a VF discovered on node {pool_name!r} (result {index}); "
                    "check that the VF still exists (sriov_numvfs) and restart the plugin after changes",
                )
            )
    if where_problems:
        raise _invalid(label, "its allocation does not name VFs of this node", *where_problems)
    vf_config.check_interface_names(results, _mapping(spec.get("devices")).get("requests"))
    return ClaimPlan(
        claim_uid=identities.ClaimUid(uid),
        namespace=namespace,
        name=name,
        pod_uid=identities.PodUid(pod_uid),
        pod_name=pod_name,
        devices=_merge_devices(label, results),
    )


def _merge_devices(label: str, results: Sequence[vf_config.ResultConfig]) -> tuple[PlannedDevice, ...]:
    """One device per (pool, device); requests merged only when their configs agree (docs/design.md#identity)."""
    order: list[tuple[str, str]] = []
    merged: dict[tuple[str, str], tuple[set[str], vf_config.VfConfig]] = {}
    problems: list[errors.FieldError] = []
    for result in results:
        key = (result.pool, result.device)
        request = base_request(result.request)
        if key not in merged:
            order.append(key)
            merged[key] = ({request}, result.config)
            continue
        requests, config = merged[key]
        if config != result.config:
            problems.append(
                errors.FieldError(
                    f"status.allocation.devices.results[{result.device}]",
                    f"requests {sorted(requests)} and {result.request!r} share this VF with different "
                    "VfConfigs; give them one config or separate devices",
                )
            )
        requests.add(request)
    errors.raise_if_any(
        problems,
        f"{label}: one VF has conflicting requirements",
        reason=errors.Reason.CONFLICTING_DEVICE_REQUIREMENTS,
    )
    return tuple(PlannedDevice(tuple(sorted(merged[k][0])), k[0], k[1], merged[k][1]) for k in order)


# --- claim status ------------------------------------------------------------------------------


def status_entry(
    driver_name: str,
    pool: str,
    device: str,
    data: Mapping[str, object],
    conditions: Sequence[Mapping[str, object]] = (),
) -> dict[str, object]:
    """One ``status.devices`` entry of this driver: ``{driver, pool, device, data, conditions?}``.

    Shapes: ``data`` is the effective VfConfig JSON (``VfConfig.to_json()``), as upstream writes;
    ``conditions`` (``core.plugin.device_conditions``) only when given.
    Source: upstream dra-driver-sriov's claim status.
    """
    entry: dict[str, object] = {"driver": driver_name, "pool": pool, "device": device, "data": dict(data)}
    if conditions:
        entry["conditions"] = [dict(c) for c in conditions]
    return entry


def _conditions(value: object) -> list[Mapping[str, object]]:
    return [c for c in value if isinstance(c, Mapping)] if isinstance(value, list) else []


def _key(entry: Mapping[str, object]) -> tuple[object, ...]:
    return tuple(entry.get(k) for k in STATUS_DEVICE_KEYS)


def merged_status_devices(
    existing: object, ours: Sequence[Mapping[str, object]], *, driver_name: str
) -> list[dict[str, object]] | None:
    """The ``status.devices`` list with this driver's entries replaced by ``ours``.

    Every entry of another driver is kept as it is, in place; this driver's entries whose key
    is in ``ours`` are replaced in place, the others dropped, and new ones appended in ``ours``
    order (an empty ``ours`` removes them all). A replaced entry keeps its ``networkData`` when
    ``ours`` has none (the repair worker fills it from network-status, ``core.plugin.claim_network_data``; a
    repeated prepare must not erase it), and its conditions merge by type
    (``core.plugin.device_conditions.merge``: ``NetworkReady`` stays, an unchanged ``Ready``
    keeps its time). Returns ``None``
    when the result equals ``existing`` (nothing to write).

    Shapes: ``existing`` is the claim's ``status.devices`` (absent/None = empty; null-valued
    fields of an entry count as absent); entries are
    keyed by (driver, pool, device, shareID), so a duplicate key is never produced.
    Raises: ContractViolation when ``ours`` holds another driver's entry or repeats a key.
    The write is diagnostic only, never a condition of prepare (docs/design.md#prepare); it
    upserts where upstream dra-driver-sriov appends, and never drops another driver's entry.
    """
    # The API server shows unset fields as null (e.g. "conditions": null): treat them as absent.
    current = (
        [{k: v for k, v in e.items() if v is not None} for e in existing if isinstance(e, Mapping)]
        if isinstance(existing, list)
        else []
    )
    keys = [_key(e) for e in ours]
    if any(e.get("driver") != driver_name for e in ours) or len(set(keys)) != len(keys):
        raise errors.ContractViolation(
            f"status.devices update for driver {driver_name} must hold only its own, distinct entries"
        )
    wanted = {_key(e): dict(e) for e in ours}
    result: list[dict[str, object]] = []
    for entry in current:
        if entry.get("driver") != driver_name:
            result.append(entry)
        elif _key(entry) in wanted:
            replacement = wanted.pop(_key(entry))
            if "networkData" in entry and "networkData" not in replacement:
                replacement["networkData"] = entry["networkData"]
            if "conditions" in entry or "conditions" in replacement:
                replacement["conditions"] = device_conditions.merge(
                    entry.get("conditions"), _conditions(replacement.get("conditions"))
                )
            result.append(replacement)
    result.extend(wanted.values())
    if result == current:
        return None
    return result
