# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""The preflight role's cluster checks: facts read with kubernetes.core -> checks with pass/fail, fix.

The decisions are the shared ``sriov_dra_rules.preflight_rules``, which ``sriov-dra preflight``
uses too, so the role and the CLI report the same checks with the same words. Pure; it never
calls the API.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError
from ansible_collections.sriovnet.dra.plugins.module_utils.sriov_dra_rules import preflight_rules

KEYS = ("version", "apis", "service_account", "policy_namespace", "denied", "reviewed", "crds", "workloads",
        "policies", "all_policies", "device_attributes", "nodes", "admission", "minimum")


def sriov_preflight_cluster(facts):
    """Every cluster check (``preflight_rules.CLUSTER_CHECKS`` order) from a dict of facts.

    Raises: AnsibleFilterError naming missing or unknown keys.
    """
    if not isinstance(facts, dict):
        raise AnsibleFilterError("sriov_preflight_cluster expects a dict with the keys %s" % ", ".join(KEYS))
    missing = [k for k in KEYS if k not in facts]
    unknown = sorted(k for k in facts if k not in KEYS)
    if missing or unknown:
        raise AnsibleFilterError("sriov_preflight_cluster: missing keys %s, unknown keys %s; pass exactly %s"
                                 % (missing, unknown, ", ".join(KEYS)))
    return preflight_rules.cluster_checks(
        version=str(facts["version"]), apis=list(facts["apis"] or []), service_account=str(facts["service_account"]),
        policy_namespace=str(facts["policy_namespace"]), denied=list(facts["denied"] or []),
        reviewed=int(facts["reviewed"]), crds=list(facts["crds"] or []), workloads=list(facts["workloads"] or []),
        policies=list(facts["policies"] or []), nodes=list(facts["nodes"] or []),
        all_policies=list(facts["all_policies"] or []), device_attributes=list(facts["device_attributes"] or []),
        admission=dict(facts["admission"] or {}), minimum=str(facts["minimum"]),
    )


def sriov_preflight_permissions(_unused=None):
    """The permissions the plugin's ServiceAccount needs (every verb of the shipped plugin RBAC)."""
    return [dict(p) for p in preflight_rules.PERMISSIONS]


def sriov_preflight_admission_grant(_unused=None):
    """The permission the admission policy checks for the plugin's own writes (``ADMISSION_GRANT``)."""
    return dict(preflight_rules.ADMISSION_GRANT)


class FilterModule:
    """sriovnet.dra preflight filters."""

    def filters(self):
        return {
            "sriov_preflight_cluster": sriov_preflight_cluster,
            "sriov_preflight_permissions": sriov_preflight_permissions,
            "sriov_preflight_admission_grant": sriov_preflight_admission_grant,
        }
