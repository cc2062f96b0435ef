"""Planning a managed claim before any hardware change.

The pre-hardware half of a first managed prepare (docs/design.md#prepare): :func:`plan_bindings`
turns the verified consumer and the claim's plan into a :class:`ManagedPlan` whose
:meth:`ManagedPlan.attach` gives the checkpoint records their ``Pending`` bindings. Everything
that can fail on input fails here. Cached ``Pending``/``Ready`` records and release never come
here: they use their frozen state. Never changes hardware, writes to the API, or reads a source
twice for one plan.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from sriov_dra.core import binding_annotation, identities, interface_naming, render, templates, vf_config
from sriov_dra.core.plugin import (
    checkpoint_lifecycle,
    claim_plan,
    selection_update,
    selections,
    shadow_object,
)
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver.managed import consumer as consumer_mod
from sriov_dra.driver.managed import pod_selections, seams
from sriov_dra.host import discovery, sysfs
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import views
from sriov_dra.servicekit import fanout
from sriov_dra_rules import errors, names


@dataclass(frozen=True)
class PlannedBinding:
    """One allocated VF's binding, rendered and named, not yet persisted."""

    pool: str
    device: str
    pci_address: identities.PciAddress
    interface: str
    template: templates.SourceTemplate
    source: model.SourceRef
    rendered: render.RenderedConfig
    attachment_id: identities.AttachmentId
    shadow_name: str

    def managed(self, *, namespace: str, node: seams.NodeIdentity) -> model.ManagedBinding:
        """The ``Pending`` checkpoint binding (no shadow UID yet)."""
        return model.ManagedBinding(
            phase=model.Phase.PENDING,
            attachment_id=self.attachment_id,
            shadow_namespace=namespace,
            shadow_name=self.shadow_name,
            shadow_uid="",
            source=self.source,
            rendered_config=self.rendered.config_text,
            config_sha256=self.rendered.config_sha256,
            interface=self.interface,
            node_name=node.name,
            node_uid=node.uid,
        )


@dataclass(frozen=True)
class ManagedPlan:
    """Everything a first managed prepare needs after hardware: one binding per VF of the claim."""

    claim: claim_plan.ClaimPlan
    consumer: consumer_mod.Consumer
    node: seams.NodeIdentity
    bindings: tuple[PlannedBinding, ...]

    def attach(self, record: model.ClaimRecord) -> model.ClaimRecord:
        """Return ``record`` (the claim's prepared devices) with ``Pending`` bindings attached.

        Each device gets its interface name, its rendered config text and its binding.
        Raises: ContractViolation when ``record`` is not the planned claim or its devices differ.
        """
        by_device = {(b.pool, b.device): b for b in self.bindings}
        if record.claim_uid != self.claim.claim_uid or {(d.pool, d.device) for d in record.devices} != set(
            by_device
        ):
            raise errors.ContractViolation(
                f"claim {record.namespace}/{record.name}: prepared devices "
                f"{sorted((d.pool, d.device) for d in record.devices)} differ from the managed plan "
                f"{sorted(by_device)}"
            )
        devices = []
        for dev in record.devices:
            planned = by_device[(dev.pool, dev.device)]
            devices.append(
                replace(
                    dev,
                    interface_name=planned.interface,
                    net_attach_def_config=planned.rendered.config_text,
                    managed=planned.managed(namespace=record.namespace, node=self.node),
                )
            )
        return replace(record, devices=tuple(devices))


def _not_eligible(claim: claim_plan.ClaimPlan, devices: Sequence[str]) -> errors.InvalidSpec:
    return errors.InvalidSpec(
        f"ResourceClaim {claim.namespace}/{claim.name}: allocated VFs are not advertised by any eligible "
        "policy now (their network mapping is unresolved or was withdrawn after scheduling); nothing was "
        "changed. Fix the SriovResourcePolicy/DeviceAttributes mapping, then recreate the workload",
        reason=errors.Reason.DEVICE_NOT_ELIGIBLE,
        errors=[
            errors.FieldError(f"device {d}", "is not in the eligible policy membership") for d in devices
        ],
    )


def _infiniband(claim: claim_plan.ClaimPlan, vfs: Sequence[discovery.DiscoveredVf]) -> errors.InvalidSpec:
    return errors.InvalidSpec(
        f"ResourceClaim {claim.namespace}/{claim.name}: allocated VFs have link type infiniband; auto-attach "
        "renders sriov-cni configs, which attach Ethernet VFs only (an InfiniBand VF needs ib-sriov-cni); "
        "nothing was changed. Select Ethernet VFs in the DeviceClass or claim (CEL: "
        f'device.attributes["{names.DOMAIN}"].linkType == "ethernet"), or attach InfiniBand VFs with a '
        "hand-written NAD in manual mode",
        reason=errors.Reason.UNSUPPORTED_LINK_TYPE,
        errors=[
            errors.FieldError(f"device {vf.name}", f"VF {vf.pci_address} of PF {vf.pf_name} is infiniband")
            for vf in vfs
        ],
    )


def _read_source(nads: seams.NadApi, template: templates.SourceTemplate) -> Mapping[str, object]:
    try:
        return nads.get(template.namespace, template.name)
    except kube_errors.NotFound as exc:
        raise errors.InvalidSpec(
            f"network template NAD {template} (from {template.origin}) does not exist; create it, or fix the "
            "mapping that names it; nothing was changed",
            reason=errors.Reason.MISSING_NETWORK_TEMPLATE,
        ) from exc
    except kube_errors.Forbidden as exc:
        raise errors.InvalidSpec(
            f"reading network template NAD {template} was refused ({exc}); grant the plugin's ServiceAccount "
            "get on network-attachment-definitions (ClusterRole dra-sriov-managed-networks)",
            reason=errors.Reason.SOURCE_ACCESS_DENIED,
        ) from exc


def read_sources(
    wanted: Sequence[templates.SourceTemplate],
    *,
    nads: seams.NadApi,
    max_in_flight: int = fanout.DEFAULT_MAX_IN_FLIGHT,
) -> dict[tuple[str, str], Mapping[str, object]]:
    """GET each distinct source NAD of ``wanted`` once, concurrently; ``(namespace, name)`` → object.

    Every read finishes before anything is decided; the error raised is the one of the first
    failing template in ``wanted`` order (the one a sequential loop would have raised).
    Raises: InvalidSpec(MissingNetworkTemplate / SourceAccessDenied); ``kube.errors`` classes.
    """
    distinct: dict[tuple[str, str], templates.SourceTemplate] = {}
    for template in wanted:
        distinct.setdefault((template.namespace, template.name), template)
    read = fanout.values(
        [functools.partial(_read_source, nads, t) for t in distinct.values()], max_in_flight=max_in_flight
    )
    return dict(zip(distinct, read, strict=True))


def _source_ref(template: templates.SourceTemplate, source: Mapping[str, object]) -> model.SourceRef:
    meta = views.mapping(source.get("metadata"))
    uid, version = meta.get("uid"), meta.get("resourceVersion")
    if not isinstance(uid, str) or not isinstance(version, str) or not uid or not version:
        raise errors.ContractViolation(f"source NAD {template} was read without metadata.uid/resourceVersion")
    return model.SourceRef(template.namespace, template.name, identities.ObjectUid(uid), version)


def _allocated(
    claim_uid: str, aliases: Sequence[str], claim: Mapping[str, object]
) -> list[interface_naming.AllocatedDevice]:
    """This driver's results of one claim, once per alias naming it (docs/design.md#interface-names)."""
    allocation = views.mapping(claim.get("status")).get("allocation")
    if not isinstance(allocation, Mapping):
        raise errors.InvalidSpec(
            f"ResourceClaim {views.decode_meta(claim).ref} of the same Pod is not allocated; "
            "interface names need every allocation of the Pod (the scheduler allocates them together)",
            reason=errors.Reason.INVALID_CLAIM,
        )
    out: list[interface_naming.AllocatedDevice] = []
    for result in vf_config.resolve_results(allocation):
        request, _, sub = result.request.partition("/")
        for alias in aliases:
            out.append(
                interface_naming.AllocatedDevice(
                    claim_uid=identities.ClaimUid(claim_uid),
                    claim_alias=alias,
                    request=request,
                    subrequest=sub or None,
                    pool=result.pool,
                    device=result.device,
                    ifname=result.config.if_name or None,
                )
            )
    return out


def interface_names(
    consumer: consumer_mod.Consumer,
    claim: Mapping[str, object],
    plan: claim_plan.ClaimPlan,
    *,
    claims: seams.ClaimApi,
    primary_ifname: str = interface_naming.DEFAULT_LAYOUT.primary_ifname,
) -> dict[tuple[str, str], str]:
    """``(pool, device) → interface`` over every allocation of this driver in the Pod's claims.

    Raises: the ``core.interface_naming.assign_interfaces`` errors; InvalidSpec for an unallocated sibling;
    ``kube.errors`` classes for sibling GETs.
    """
    devices = _allocated(plan.claim_uid, consumer.claim_aliases, claim)
    siblings: dict[str, tuple[Mapping[str, object], list[str]]] = {}
    for alias, other in consumer_mod.sibling_claims(consumer, this_claim=plan.name, claims=claims):
        uid = views.decode_meta(other).uid
        siblings.setdefault(uid, (other, []))[1].append(alias)
    for uid, (other, aliases) in sorted(siblings.items()):
        devices.extend(_allocated(uid, sorted(aliases), other))
    assigned = interface_naming.assign_interfaces(devices, primary_ifname=primary_ifname)
    return {(a.pool, a.device): a.ifname for a in assigned if a.claim_uid == plan.claim_uid}


def plan_bindings(
    claim: Mapping[str, object],
    plan: claim_plan.ClaimPlan,
    consumer: consumer_mod.Consumer,
    *,
    node: seams.NodeIdentity,
    devices: seams.DeviceSource,
    nads: seams.NadApi,
    claims: seams.ClaimApi,
    store: seams.Store,
    max_in_flight: int = fanout.DEFAULT_MAX_IN_FLIGHT,
) -> ManagedPlan:
    """Resolve, read, render, name and check every VF of a first managed prepare.

    1. Read ONE device snapshot (eligibility and attributes together) and refuse any device not
       advertised now (``DeviceNotEligible``) before a VfConfig fallback is considered
       (docs/design.md#eligibility), and any InfiniBand VF (``UnsupportedLinkType``: the
       rendered configs are sriov-cni's, Ethernet only).
    2. Resolve each device's template reference (``core.templates``: device attribute first,
       VfConfig second, namespace defaulted once to the Pod's; docs/design.md#template-resolution).
    3. GET each distinct source NAD once and render each VF's frozen config with its trusted PCI
       address (``core.render``, docs/design.md#render).
    4. Name the interfaces over every allocation of this driver in all of the Pod's claims
       (``core.interface_naming``; sibling claims are read, never waited for).
    5. Build each binding's identity, shadow name and shadow object, and dry-run the Pod
       annotation merge against the live Pod with its other checkpointed bindings: manual
       selections of a managed template, interface collisions (over the node's Multus layout)
       and the annotation size limit fail here (docs/design.md#selections).

    The distinct source NADs are read concurrently, at most ``max_in_flight`` at once
    (:func:`read_sources`).

    Raises (nothing has been changed when any is raised): InvalidSpec(DeviceNotEligible) listing
    every withdrawn device; InvalidSpec(UnsupportedLinkType) listing every InfiniBand VF;
    InvalidSpec(InvalidAttribute / InvalidVfConfig /
    MissingNetworkTemplate / SourceAccessDenied / InvalidNetworkTemplate /
    UnsupportedNetworkTemplate); Conflict(ConflictingNetworkReference,
    ManualSelectionConflictsWithManagedTemplate, DuplicateInterfaceName, OwnershipConflict);
    InvalidSpec(AnnotationTooLarge); InvalidSpec(HostReadFailed / InvalidSpec) for the node's
    Multus config (``node.multus``, read once per plan); ``kube.errors`` classes for the reads
    (Forbidden, timeout).
    Source: docs/design.md#prepare.
    """
    layout = node.multus.current()
    view = devices.snapshot()
    withdrawn = [d.device for d in plan.devices if not view.is_eligible(d.device)]
    if withdrawn:
        raise _not_eligible(plan, withdrawn)
    infiniband = [
        view.inventory[d.device]
        for d in plan.devices
        if view.inventory[d.device].link_type is sysfs.LinkType.INFINIBAND
    ]
    if infiniband:
        raise _infiniband(plan, infiniband)
    chosen: list[tuple[claim_plan.PlannedDevice, templates.SourceTemplate]] = []
    for dev in plan.devices:
        attrs = view.attributes_of(dev.device) or {}
        chosen.append(
            (dev, templates.resolve_template(attrs, dev.config, consumer.namespace, device=dev.device))
        )
    sources = read_sources([template for _, template in chosen], nads=nads, max_in_flight=max_in_flight)
    names_by_device = interface_names(
        consumer, claim, plan, claims=claims, primary_ifname=layout.primary_ifname
    )
    planned: list[PlannedBinding] = []
    for dev, template in chosen:
        pci = view.inventory[dev.device].pci_address
        source = sources[(template.namespace, template.name)]
        rendered = render.render_shadow_config(source, pci)
        identity = identities.build_binding_identity(
            node_uid=node.uid,
            pod_uid=consumer.uid,
            claim_uid=plan.claim_uid,
            pool=dev.pool,
            device=dev.device,
        )
        aid = identities.attachment_id(identity)
        ref = _source_ref(template, source)
        interface = names_by_device[(dev.pool, dev.device)]
        shadow_object.build_shadow_nad(  # validates that every field of the future shadow is well-formed
            identity=identity,
            binding=binding_annotation.Binding(
                attachment_id=aid,
                pod_uid=consumer.uid,
                claim_uid=plan.claim_uid,
                node_name=node.name,
                node_uid=node.uid,
                source=binding_annotation.SourceRef(ref.namespace, ref.name, ref.uid, ref.resource_version),
                pci_address=pci,
                interface=interface,
                config_sha256=rendered.config_sha256,
            ),
            rendered=rendered,
            pod_namespace=consumer.namespace,
            pod_name=consumer.name,
        )
        planned.append(
            PlannedBinding(
                pool=dev.pool,
                device=dev.device,
                pci_address=pci,
                interface=interface,
                template=template,
                source=ref,
                rendered=rendered,
                attachment_id=aid,
                shadow_name=identities.shadow_name(aid),
            )
        )
    result = ManagedPlan(claim=plan, consumer=consumer, node=node, bindings=tuple(planned))
    check_pod_annotation(result, store=store, layout=layout)
    return result


def check_pod_annotation(
    plan: ManagedPlan, *, store: seams.Store, layout: interface_naming.MultusLayout | None = None
) -> None:
    """Dry-run the Pod annotation merge with this plan plus the Pod's other forward bindings.

    ``layout`` is the node's Multus delegate layout (read from ``plan.node.multus`` when omitted).
    Raises: the ``core.plugin.selections.merge_managed_selections`` errors (nothing is written); the
    ``LayoutSource.current`` errors.
    """
    draft = model.ClaimRecord(
        claim_uid=plan.claim.claim_uid,
        namespace=plan.claim.namespace,
        name=plan.claim.name,
        pod_uid=plan.consumer.uid,
        devices=tuple(
            model.PreparedDevice(
                request_names=("draft",),
                pool=b.pool,
                device=b.device,
                pci_address=b.pci_address,
                original_driver="",
                vf_config={},
                interface_name=b.interface,
                cdi_device_ids=(),
                net_attach_def_config="",
                managed=b.managed(namespace=plan.claim.namespace, node=plan.node),
            )
            for b in plan.bindings
        ),
    )
    others = [
        r
        for uid, r in store.snapshot_pod(plan.consumer.uid).items()
        if uid != plan.claim.claim_uid
        and r.managed_bindings()
        and not checkpoint_lifecycle.release_in_progress(r)
    ]
    entries = pod_selections.intended_entries([*others, draft], placeholder=True)
    selections.merge_managed_selections(
        selection_update.pod_snapshot(plan.consumer.pod),
        entries,
        layout=layout if layout is not None else plan.node.multus.current(),
    )
