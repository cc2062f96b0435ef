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
from ansible_collections.sriovnet.dra.plugins.module_utils.sriov_dra_rules import names, preflight_rules

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


def _check(name, ok, detail, fix=""):
    return {"name": name, "status": "pass" if ok else "fail", "detail": detail, "fix": "" if ok else fix}


def _truth(value):
    return value.strip().lower() in ("true", "yes", "1") if isinstance(value, str) else bool(value)


def _deployed(component):
    return _truth(component.get("deployed", True))


def _pod_problem(pod):
    """Why a Pod is not running and Ready (its containers' waiting or terminated reasons), or None."""
    status = pod.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    if status.get("phase") == "Running" and ready:
        return None
    reasons = []
    for c in status.get("containerStatuses") or []:
        state = c.get("state") or {}
        for key in ("waiting", "terminated"):
            if state.get(key):
                reasons.append("container %s %s" % (c.get("name"), state[key].get("reason") or key))
    return "phase %s, not Ready%s" % (status.get("phase", "unknown"), (": " + ", ".join(reasons)) if reasons else "")


def _image_problems(pod, image):
    """Containers of ``pod`` whose image (spec, or the digest the runtime reports) is not ``image``."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    digest = image.partition("@")[2]
    found = []
    for c in (spec.get("initContainers") or []) + (spec.get("containers") or []):
        if c.get("image") != image:
            found.append("container %s runs %s" % (c.get("name"), c.get("image")))
    for c in (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or []):
        running = str(c.get("imageID") or "")
        if "@sha256:" in running and digest and running.partition("@")[2] != digest:
            found.append("container %s's runtime reports %s" % (c.get("name"), running))
    return found


def sriov_auto_attach_gate(components, node):
    """The gate checks of auto-attach on ``node``: ``guard-daemon`` and ``running-images``.

    ``components``: ``[{"component", "namespace", "daemonset", "image", "deployed", "pods"}]`` for the
    guard (``component`` ``guard``), Multus and the plugin, ``pods`` their Pods on ``node`` as read; or
    the registered results of reading them in a loop (``item`` the component, ``resources`` its Pods).
    ``guard-daemon`` passes when the guard's Pod there runs and is Ready (its readiness is the daemon's
    socket listening); ``running-images`` when every deployed component has one Pod there, running,
    Ready, whose every container runs the installed ``image`` (and, when the runtime reports a repository
    digest, that digest). A component the roles did not deploy (``deployed`` false) is not checked,
    and says so. Shapes: preflight check dicts ``{name, status, detail, fix}``.
    Raises: AnsibleFilterError when ``components`` has no ``guard`` entry.
    """
    components = [dict(r["item"], pods=r.get("resources") or []) if "item" in r else r for r in components or []]
    by_name = {c["component"]: c for c in components}
    if "guard" not in by_name:
        raise AnsibleFilterError("sriov_auto_attach_gate needs the guard's entry (component: guard)")
    guard = by_name["guard"]
    where = "DaemonSet %s/%s" % (guard["namespace"], guard["daemonset"])
    if not _deployed(guard):
        daemon = _check("guard-daemon", True, "%s is not deployed by the roles (guard_deploy_daemonset: false); the "
                        "guard daemon on %s is not checked here" % (where, node))
    else:
        pods = guard.get("pods") or []
        problems = ["%s/%s: %s" % (guard["namespace"], p["metadata"]["name"], _pod_problem(p))
                    for p in pods if _pod_problem(p)]
        daemon = _check(
            "guard-daemon", bool(pods) and not problems,
            ("the guard daemon runs on %s (%s)" % (node, ", ".join(p["metadata"]["name"] for p in pods)))
            if pods and not problems else
            ("%s has no Pod on %s" % (where, node)) if not pods else "the guard daemon on %s is not up: %s"
            % (node, "; ".join(problems)),
            "the guard daemon must be up before auto-attach: kubectl -n %s describe pod -l "
            "app.kubernetes.io/name=%s --field-selector spec.nodeName=%s, fix what it says, then run the preflight "
            "again" % (guard["namespace"], guard["daemonset"], node),
        )
    problems, checked, skipped = [], [], []
    for c in components:
        label = "%s %s/%s" % (c["component"], c["namespace"], c["daemonset"])
        if not _deployed(c):
            skipped.append(label)
            continue
        pods = c.get("pods") or []
        if not pods:
            problems.append("%s has no Pod on %s" % (label, node))
        for p in pods:
            name = "%s/%s" % (c["namespace"], p["metadata"]["name"])
            bad = _image_problems(p, c["image"])
            if bad:
                problems.append("%s: %s, not the installed %s" % (name, "; ".join(bad), c["image"]))
            elif _pod_problem(p):
                problems.append("%s: %s" % (name, _pod_problem(p)))
        checked.append("%s %s" % (c["component"], c["image"]))
    detail = ("every Pod on %s runs the installed image: %s" % (node, ", ".join(checked))) if not problems else \
        "; ".join(problems)
    if skipped:
        detail += " (not deployed by the roles, not checked: %s)" % ", ".join(skipped)
    images = _check(
        "running-images", not problems, detail,
        "wait until each DaemonSet's rollout reached %s (kubectl -n <namespace> rollout status daemonset/<name>), or "
        "delete the Pod named so that the current template recreates it, then run the preflight again" % node,
    )
    return [daemon, images]


def wanted_modes(gate_on, bindings):
    """The modes the gate accepts from a node's plugin, and why: ``(modes, why)``.

    ``gate_on``: every check of the node passed; ``bindings``: the managed bindings its checkpoint
    holds (``checkpoint_info``'s ``bindings``), None when not read. Open: ``full``. Closed:
    ``release-only`` while there are bindings (only auto-attach releases them), ``off`` once there
    are none (a release-only plugin left so would refuse every new claim), either when not read.
    """
    if _truth(gate_on):
        return ("full",), ""
    if bindings is None:
        return ("release-only", "off"), ""
    if bindings:
        return ("release-only",), (" (its checks failed, and the node's checkpoint holds %d auto-attached "
                                   "binding(s) to release)" % len(bindings))
    return ("off",), " (its checks failed, and the node's checkpoint holds no auto-attached binding: manual mode)"


def sriov_auto_attach_mode_mismatch(pods, gate_on, bindings):
    """The plugin Pods whose reported auto-attach mode is not one the gate wants (:func:`wanted_modes`).

    ``pods``: the plugin's Pods on one node as read; one being deleted is left out. Each Pod reports the
    mode its process runs in ``names.AUTO_ATTACH_MODE_ANNOTATION`` (none: a plugin that did not report).
    ``bindings``: the node's checkpoint bindings, or None when not read (the plugin decides from them).
    Shapes: ``[{namespace, name, reported, wanted, detail}]`` with ``reported`` ``""`` when absent and
    ``wanted`` the accepted modes; empty when every Pod runs a wanted mode (no restart needed).
    Raises: AnsibleFilterError when ``bindings`` is neither a list nor None.
    """
    if bindings is not None and not isinstance(bindings, (list, tuple)):
        raise AnsibleFilterError("sriov_auto_attach_mode_mismatch: bindings must be the list checkpoint_info "
                                 "returns (bindings), or None when the checkpoint was not read; got %r" % (bindings,))
    wanted, why = wanted_modes(gate_on, bindings)
    found = []
    for pod in pods or []:
        meta = pod.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            continue
        reported = str((meta.get("annotations") or {}).get(names.AUTO_ATTACH_MODE_ANNOTATION) or "")
        if reported in wanted:
            continue
        found.append({
            "namespace": meta.get("namespace", ""), "name": meta.get("name", ""), "reported": reported,
            "wanted": list(wanted),
            "detail": "%s/%s %s, the gate wants %s%s" % (
                meta.get("namespace", ""), meta.get("name", ""),
                ("reports auto-attach mode %s" % reported) if reported else
                "reports no auto-attach mode (%s absent: it did not start, or cannot patch its Pod)"
                % names.AUTO_ATTACH_MODE_ANNOTATION,
                " or ".join(wanted), why),
        })
    return found


class FilterModule:
    """sriovnet.dra preflight filters."""

    def filters(self):
        return {
            "sriov_preflight_cluster": sriov_preflight_cluster,
            "sriov_preflight_permissions": sriov_preflight_permissions,
            "sriov_preflight_admission_grant": sriov_preflight_admission_grant,
            "sriov_auto_attach_gate": sriov_auto_attach_gate,
            "sriov_auto_attach_mode_mismatch": sriov_auto_attach_mode_mismatch,
        }
