# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filters that turn API objects and node files into plans and findings for the roles.

``sriov_vf_plan`` (node policies and PF facts -> VFs per PF, the upstream config daemon's job) and
``sriov_vf_plan_gap`` (why none selects this node),
``sriov_policy_overlaps`` (SriovResourcePolicies that can select one VF),
``sriov_checkpoint_bindings`` and ``sriov_protected_shadows`` (what the drain and cleanup roles
wait for), ``sriov_workloads_with_image`` (device-plugin workloads), ``sriov_retarget``
(shipped manifests -> the install namespace and pinned image) and ``sriov_extended_resource_classes``
(device-plugin resource names -> the DeviceClasses serving them through DRA). Pure functions of their inputs:
no API calls, no files.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.sriovnet.dra.plugins.module_utils.sriov_dra_rules import (
    checkpoint_doc,
    device_selectors,
    errors,
    extended_resources,
    names,
    node_policies,
    preflight_rules,
)

DRIVER_BY_DEVICE_TYPE = {"netdevice": None, "vfio-pci": "vfio-pci"}


def _spec(obj):
    spec = obj.get("spec") if isinstance(obj, dict) else None
    return spec if isinstance(spec, dict) else {}


def _name(obj):
    meta = obj.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace", ""), meta.get("name", ""))


def sriov_vf_plan(policies, node_labels, pfs):
    """The VF count and driver per PF that the node policies selecting this node ask for.

    Shapes: ``[{"pf": <netdev>, "pci_address", "num_vfs", "vf_driver": str|None, "policies": [...]}]``
    sorted by PCI address, only PFs this collection may write. The highest ``numVfs`` of the
    policies selecting a PF wins. Node and NIC selection, ID spellings and VF ranges are the
    operator's and the plugin's own (``module_utils/sriov_dra_rules/node_policies.py`` and
    ``device_selectors.py``). A PF of ``externallyManaged`` policies is never in the plan: the
    host's own tooling creates its VFs, and the plan only checks that it has enough.
    Raises: AnsibleFilterError, naming the policy, the field, the value and the fix, for a
    ``netFilter`` selector (cloud NICs are not supported here), an ID, root device or ``pfNames``
    VF range the operator would not read (``15B3`` is read as ``15b3``; ``ens1f0#3-1`` is refused),
    VF ranges of two policies that overlap on one PF, policies asking for different device types
    on one PF (one VF driver per PF) or disagreeing on ``externallyManaged``, ``externallyManaged``
    with ``bridge``, or an externally managed PF with fewer VFs than a policy needs.
    """
    plan = {}
    for policy in sorted(policies or [], key=lambda p: (node_policies.priority_of(_spec(p)), _name(p))):
        spec = _spec(policy)
        if not node_policies.node_selected(spec.get("nodeSelector"), node_labels or {}):
            continue
        nic = node_policies.read_nic_selector(spec)
        if nic.has_net_filter:
            raise AnsibleFilterError(
                "policy %s: nicSelector.netFilter is not supported by sriovnet.dra.vfs; select the "
                "PF by pfNames, rootDevices, vendor or deviceID" % _name(policy)
            )
        if nic.problems:
            raise AnsibleFilterError(
                "policy %s cannot be read: %s"
                % (_name(policy), "; ".join("%s: %s" % (p.path, p.message) for p in nic.problems))
            )
        device_type = spec.get("deviceType", "netdevice")
        if device_type not in DRIVER_BY_DEVICE_TYPE:
            raise AnsibleFilterError(
                "policy %s: deviceType %r is not netdevice or vfio-pci" % (_name(policy), device_type)
            )
        external = spec.get("externallyManaged") is True
        if external and spec.get("bridge"):
            raise AnsibleFilterError(
                "policy %s: spec.bridge needs VFs this collection creates, but externallyManaged "
                "is true; remove the bridge or externallyManaged (upstream refuses both)" % _name(policy)
            )
        for pf in pfs or []:
            if not nic.selects_pf(pf):
                continue
            entry = plan.setdefault(
                pf["pci_address"],
                {
                    "pf": pf["name"],
                    "pci_address": pf["pci_address"],
                    "num_vfs": 0,
                    "vf_driver": DRIVER_BY_DEVICE_TYPE[device_type],
                    "policies": [],
                    "device_type": device_type,
                    "external": external,
                    "ranges": [],
                },
            )
            _check_shared_pf(entry, policy, pf, device_type, external)
            _check_ranges(entry, policy, nic, pf)
            entry["num_vfs"] = max(entry["num_vfs"], int(spec.get("numVfs", 0)))
            entry["policies"].append(_name(policy))
            if external:
                _check_external(entry, policy, pf, int(spec.get("numVfs", 0)))
    return [
        {k: v for k, v in plan[bdf].items() if k not in ("device_type", "external", "ranges")}
        for bdf in sorted(plan)
        if not plan[bdf]["external"]
    ]


def sriov_vf_plan_gap(policies, node_labels, pfs, node, namespace):
    """Why no node policy selects a PF of this node, or ``""`` when one does.

    The same node and NIC selection as ``sriov_vf_plan`` (an externally managed PF counts as
    selected). The message names the node, the policy namespace read, the node's labels the
    nodeSelectors were matched against, the policies and PFs considered, and the fix.
    """
    policies = list(policies or [])
    labels = ", ".join("%s=%s" % (k, v) for k, v in sorted((node_labels or {}).items())) or "none"
    head = "no policy selects this node: node %s, node labels considered: %s; " % (node, labels)
    if not policies:
        return head + (
            "namespace %s holds no SriovNetworkNodePolicy. Create the node policies there (as "
            "examples/operator-two-rails does), or set operator_namespace (vfs_policy_namespace) to the namespace "
            "that holds them, then run site.yml again" % namespace
        )
    selecting = [p for p in policies if node_policies.node_selected(_spec(p).get("nodeSelector"), node_labels or {})]
    if not selecting:
        return head + (
            "none of the SriovNetworkNodePolicies in namespace %s (%s) has a nodeSelector these labels match. Label "
            "the node or change the policies' nodeSelector, then run site.yml again"
            % (namespace, ", ".join(sorted(_name(p) for p in policies)))
        )
    for policy in selecting:
        nic = node_policies.read_nic_selector(_spec(policy))
        if any(nic.selects_pf(pf) for pf in pfs or []):
            return ""
    return head + (
        "SriovNetworkNodePolicies %s in namespace %s select the node, but their nicSelector matches none of its PFs "
        "(%s). Correct the nicSelector (pfNames, rootDevices, vendor, deviceID), then run site.yml again"
        % (
            ", ".join(sorted(_name(p) for p in selecting)),
            namespace,
            ", ".join("%s %s" % (pf.get("name"), pf.get("pci_address")) for pf in pfs or []) or "no SR-IOV PF found",
        )
    )


def _check_shared_pf(entry, policy, pf, device_type, external):
    """Policies sharing one PF must ask for one device type and agree on externallyManaged."""
    if entry["device_type"] != device_type:
        raise AnsibleFilterError(
            "policies %s ask for deviceType %s and %s on PF %s; sriovnet.dra.vfs binds one VF driver per PF, "
            "so give each PF one deviceType"
            % (", ".join(entry["policies"] + [_name(policy)]), entry["device_type"], device_type, pf["name"])
        )
    if entry["external"] != external:
        raise AnsibleFilterError(
            "policies %s disagree on externallyManaged for PF %s; a PF's VFs are created either by the host's own "
            "tooling or by sriovnet.dra.vfs, so set externallyManaged alike on every policy of the PF (upstream "
            "refuses this too)" % (", ".join(entry["policies"] + [_name(policy)]), pf["name"])
        )


def _check_ranges(entry, policy, nic, pf):
    """VF ranges of different policies on one PF may not overlap (upstream's webhook rule)."""
    for value in nic.pf_names:
        name, vf_range, _problem = device_selectors.pf_name(value)
        if name != pf["name"] or vf_range is None:
            continue
        for other, taken in entry["ranges"]:
            if device_selectors.ranges_overlap(vf_range, taken):
                raise AnsibleFilterError(
                    "policy %s: pfNames entry %r overlaps VFs %d-%d of policy %s on PF %s; give each policy its own "
                    "VF range" % (_name(policy), value, taken[0], taken[1], other, pf["name"])
                )
        entry["ranges"].append((_name(policy), vf_range))


def _check_external(entry, policy, pf, needed):
    """An externally managed PF is never written: it must already have the VFs a policy needs."""
    have = pf.get("numvfs")
    if not isinstance(have, int) or have < needed:
        raise AnsibleFilterError(
            "policy %s: PF %s is externally managed and has %s VFs, but the policy needs %d; create them with the "
            "host's own tooling (sriovnet.dra.vfs never writes sriov_numvfs of an externally managed PF) or lower "
            "numVfs"
            % (_name(policy), pf["name"], have if isinstance(have, int) else "an unknown number of", needed)
        )


def sriov_policy_overlaps(policies, nodes):
    """Pairs of SriovResourcePolicies that can both select one VF on some node.

    The preflight's rule (``module_utils/sriov_dra_rules/preflight_rules.py``), which decides node
    selection and filter matching with the plugin's own ``label_selectors`` and ``resource_filters``
    (``drivers`` never keeps two policies apart; a ``Gt``/``Lt`` term selects no node).
    Shapes: ``[{"policies": [a, b], "nodes": [...]}]`` sorted; empty when they are disjoint.
    """
    return preflight_rules.policy_overlaps(policies, nodes)


def sriov_checkpoint_bindings(checkpoint):
    """Managed bindings recorded in the plugin's checkpoint (decoded JSON, or None when absent).

    Prefer the ``sriovnet.dra.checkpoint_info`` module on the node: it reads ``checkpoint.slots``
    (the durable record) and verifies the checksum; this filter sees only what it is given.
    Shapes: ``[{"claim_uid", "namespace", "name", "pod_uid", "device", "phase", "shadow"}]``.
    Raises: AnsibleFilterError when the document is not a version-1 checkpoint (nothing guessed).
    """
    if checkpoint is None or checkpoint == "":
        return []
    try:
        return checkpoint_doc.bindings_of(checkpoint, source="given to sriov_checkpoint_bindings")
    except errors.SriovDraError as exc:
        raise AnsibleFilterError(exc.detail)


def sriov_protected_shadows(nads):
    """``namespace/name`` of each NAD that still carries the plugin's protection finalizer, sorted.

    ``nads`` are NetworkAttachmentDefinitions as ``k8s_info`` returns them (the drain and cleanup
    roles wait and refuse while any is left: docs/design.md#rollout).
    Raises: AnsibleFilterError for an input that is not a list of objects.
    """
    if not isinstance(nads, list) or not all(isinstance(n, dict) for n in nads):
        raise AnsibleFilterError("sriov_protected_shadows expects a list of NetworkAttachmentDefinitions (k8s_info resources)")
    return sorted(
        _name(n) for n in nads if names.FINALIZER_ATTACHMENT_PROTECTION in ((n.get("metadata") or {}).get("finalizers") or [])
    )


WORKLOAD_KINDS = ("Deployment", "DaemonSet", "StatefulSet", "Job")


def sriov_workloads_with_image(objs, fragment):
    """``namespace/name`` of each workload with a container or init container image containing ``fragment``."""
    return preflight_rules.workloads_with_image(objs, fragment)


def sriov_retarget(docs, namespace, image=None, from_namespace=None, kind_namespaces=None):
    """Copies of ``docs`` moved to ``namespace``, with every container image set to ``image``.

    ``kind_namespaces`` (``{kind: namespace}``) sends namespaced objects of those kinds elsewhere,
    e.g. the plugin's policy Role and RoleBinding to the policy namespace.

    ``metadata.namespace`` of namespaced objects becomes ``namespace``; ServiceAccount subjects of
    bindings in ``from_namespace`` (default: the namespace of the first namespaced object) follow;
    ``image`` (when given) replaces the image of every container and init container of workloads.
    Nothing else changes, so the applied objects stay the shipped ones.
    Raises: AnsibleFilterError for an input that is not a list of objects.
    """
    if not isinstance(docs, list) or not all(isinstance(d, dict) or d is None for d in docs):
        raise AnsibleFilterError("sriov_retarget expects a list of Kubernetes objects (from_yaml_all)")
    docs = [d for d in docs if d]
    if from_namespace is None:
        from_namespace = next(((d.get("metadata") or {}).get("namespace") for d in docs
                               if (d.get("metadata") or {}).get("namespace")), None)
    out = []
    for doc in docs:
        doc = _deepcopy(doc)
        meta = doc.setdefault("metadata", {})
        if "namespace" in meta:
            meta["namespace"] = (kind_namespaces or {}).get(doc.get("kind"), namespace)
        for subject in doc.get("subjects") or []:
            if subject.get("kind") == "ServiceAccount" and subject.get("namespace") == from_namespace:
                subject["namespace"] = namespace
        if image and doc.get("kind") in WORKLOAD_KINDS:
            pod = ((doc.get("spec") or {}).get("template") or {}).get("spec") or {}
            for container in (pod.get("containers") or []) + (pod.get("initContainers") or []):
                container["image"] = image
        out.append(doc)
    return out


def _deepcopy(value):
    if isinstance(value, dict):
        return {k: _deepcopy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_deepcopy(v) for v in value]
    return value


EXTENDED_RESOURCE_CLASS_LABEL = names.DOMAIN + "/extended-resource-class"
"""Label of the DeviceClasses the plugin role generates (value ``plugin-role``): the only ones it removes."""


def sriov_extended_resource_classes(resource_names, prefix):
    """One DeviceClass per device-plugin resource name, serving ``<prefix>/<name>`` through DRA.

    Each selects this driver's VFs whose ``k8s.cni.cncf.io/resourceName`` attribute is exactly
    ``<prefix>/<name>`` (``sriov_dra_rules.extended_resources``, the operator's rule), labelled
    :data:`EXTENDED_RESOURCE_CLASS_LABEL`. Raises AnsibleFilterError naming a name Kubernetes refuses
    as an extended resource, or two names that make one class name.
    """
    if not isinstance(resource_names, list):
        raise AnsibleFilterError("sriov_extended_resource_classes: expected a list of resource names")
    out, owners = [], {}
    labels = {EXTENDED_RESOURCE_CLASS_LABEL: "plugin-role", "app.kubernetes.io/part-of": "sriov-dra"}
    for rn in resource_names:
        problem = extended_resources.extended_resource_problem(prefix, rn)
        if problem is not None:
            raise AnsibleFilterError(
                "plugin_extended_resources: %r cannot be an extended resource: %s; use the resourceName the "
                "SR-IOV device plugin advertised and plugin_extended_resource_prefix its prefix" % (rn, problem)
            )
        obj = extended_resources.device_class(prefix, rn, labels=labels)
        name = obj["metadata"]["name"]
        if name in owners:
            raise AnsibleFilterError(
                "plugin_extended_resources: %r and %r both make DeviceClass %r; list one of them"
                % (owners[name], rn, name)
            )
        owners[name] = rn
        out.append(obj)
    return out


class FilterModule:
    """sriovnet.dra filters."""

    def filters(self):
        return {
            "sriov_vf_plan": sriov_vf_plan,
            "sriov_vf_plan_gap": sriov_vf_plan_gap,
            "sriov_policy_overlaps": sriov_policy_overlaps,
            "sriov_checkpoint_bindings": sriov_checkpoint_bindings,
            "sriov_protected_shadows": sriov_protected_shadows,
            "sriov_retarget": sriov_retarget,
            "sriov_workloads_with_image": sriov_workloads_with_image,
            "sriov_extended_resource_classes": sriov_extended_resource_classes,
        }
