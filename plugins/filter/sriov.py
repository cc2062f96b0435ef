# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Filters that turn API objects and node files into plans and findings for the roles.

``sriov_vf_plan`` (node policies and PF facts -> VFs per PF, the upstream config daemon's job),
``sriov_policy_overlaps`` (SriovResourcePolicies that can select one VF),
``sriov_checkpoint_bindings`` and ``sriov_protected_shadows`` (what the drain and cleanup roles
wait for), ``sriov_workloads_with_image`` (device-plugin workloads) and ``sriov_retarget``
(shipped manifests -> the install namespace and pinned image). Pure functions of their inputs:
no API calls, no files.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.sriovnet.dra.plugins.module_utils.sriov_dra_rules import (
    checkpoint_doc,
    errors,
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
    sorted by PCI address. The highest ``numVfs`` of the policies selecting a PF wins. Node and NIC
    selection are the operator's own (``module_utils/sriov_dra_rules/node_policies.py``, also used
    by the runtime's ``core.operator.node_policy``).
    Raises: AnsibleFilterError for a ``netFilter`` selector (cloud NICs are not supported here)
    or policies asking for different device types on one PF (one VF driver per PF).
    """
    plan = {}
    for policy in sorted(policies or [], key=lambda p: (node_policies.priority_of(_spec(p)), _name(p))):
        spec = _spec(policy)
        if not node_policies.node_selected(spec.get("nodeSelector"), node_labels or {}):
            continue
        nic = node_policies.read_nic_selector(spec)
        if nic.has_net_filter:
            raise AnsibleFilterError("policy %s: nicSelector.netFilter is not supported by sriovnet.dra.vfs; select the "
                                     "PF by pfNames, rootDevices, vendor or deviceID" % _name(policy))
        device_type = spec.get("deviceType", "netdevice")
        if device_type not in DRIVER_BY_DEVICE_TYPE:
            raise AnsibleFilterError("policy %s: deviceType %r is not netdevice or vfio-pci" % (_name(policy), device_type))
        for pf in pfs or []:
            if not nic.selects_pf(pf):
                continue
            entry = plan.setdefault(pf["pci_address"], {
                "pf": pf["name"], "pci_address": pf["pci_address"], "num_vfs": 0,
                "vf_driver": DRIVER_BY_DEVICE_TYPE[device_type], "policies": [], "device_type": device_type,
            })
            if entry["device_type"] != device_type:
                raise AnsibleFilterError(
                    "policies %s ask for deviceType %s and %s on PF %s; sriovnet.dra.vfs binds one VF driver per PF, "
                    "so give each PF one deviceType" % (", ".join(entry["policies"] + [_name(policy)]),
                                                        entry["device_type"], device_type, pf["name"]))
            entry["num_vfs"] = max(entry["num_vfs"], int(spec.get("numVfs", 0)))
            entry["policies"].append(_name(policy))
    return [{k: v for k, v in plan[bdf].items() if k != "device_type"} for bdf in sorted(plan)]


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


class FilterModule:
    """sriovnet.dra filters."""

    def filters(self):
        return {
            "sriov_vf_plan": sriov_vf_plan,
            "sriov_policy_overlaps": sriov_policy_overlaps,
            "sriov_checkpoint_bindings": sriov_checkpoint_bindings,
            "sriov_protected_shadows": sriov_protected_shadows,
            "sriov_retarget": sriov_retarget,
            "sriov_workloads_with_image": sriov_workloads_with_image,
        }
