# -*- coding: utf-8 -*-
# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Why a workload's rollout did not finish, from its Pods: the reason a person acts on, not the objects.

- ``sriov_rollout_log_targets``: Pods -> the containers whose last log line explains them (a container
  that crashed: its previous instance; one running but not ready: its current one);
- ``sriov_rollout_problems``: a workload, its Pods and those log lines -> one line per Pod that is not
  ready, e.g. ``Pod ns/p on node-1: container plugin ImagePullBackOff: <kubelet message>`` or
  ``... CrashLoopBackOff (exit code 1, 4 restarts); last log line: <line>``.

Pure functions of their inputs; they never call the API.
"""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

MAX_LINE = 300
"""Characters kept of a kubelet message or log line (an image pull error can run to kilobytes)."""


def _short(text):
    text = " ".join(str("" if text is None else text).split())
    return text if len(text) <= MAX_LINE else text[: MAX_LINE - 3] + "..."


def _dict(value):
    return value if isinstance(value, dict) else {}


def _list(value):
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _statuses(pod):
    status = _dict(pod.get("status"))
    return _list(status.get("initContainerStatuses")) + _list(status.get("containerStatuses"))


def _name(obj):
    meta = _dict(obj.get("metadata"))
    return "%s/%s" % (_short(meta.get("namespace")), _short(meta.get("name")))


def _ready(pod):
    conditions = _list(_dict(pod.get("status")).get("conditions"))
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)


def sriov_rollout_log_targets(pods):
    """Containers whose last log line to read: ``[{"namespace", "pod", "container", "previous"}]``.

    A container that terminated at least once and is not running (CrashLoopBackOff, Error) is read from its
    previous instance; one running but not ready from its current one. Ready Pods give none.
    """
    if not isinstance(pods, list):
        raise AnsibleFilterError("sriov_rollout_log_targets expects the Pods (k8s_info resources), a list")
    out = []
    for pod in _list(pods):
        if _ready(pod):
            continue
        meta = _dict(pod.get("metadata"))
        for status in _statuses(pod):
            state = _dict(status.get("state"))
            crashed = "running" not in state and bool(_dict(status.get("lastState")).get("terminated"))
            if crashed or ("running" in state and status.get("ready") is not True):
                out.append({"namespace": _short(meta.get("namespace")), "pod": _short(meta.get("name")),
                            "container": _short(status.get("name")), "previous": crashed})
    return out


def _container_problem(status, last_line):
    state = _dict(status.get("state"))
    name = _short(status.get("name"))
    waiting, terminated = _dict(state.get("waiting")), _dict(state.get("terminated"))
    last = _dict(_dict(status.get("lastState")).get("terminated"))
    restarts = _short(status.get("restartCount") or 0)
    if "waiting" in state:
        reason = _short(waiting.get("reason") or "Waiting")
        text = "container %s %s" % (name, reason)
        if last:
            text += " (exit code %s, %s restarts)" % (_short(last.get("exitCode")), restarts)
        if waiting.get("message") and reason != "CrashLoopBackOff":
            text += ": " + _short(waiting["message"])
    elif "terminated" in state:
        text = "container %s %s (exit code %s)" % (name, _short(terminated.get("reason") or "Terminated"),
                                                   _short(terminated.get("exitCode")))
    elif "running" in state and status.get("ready") is not True:
        text = "container %s running, not ready" % name
        if status.get("restartCount"):
            text += " (%s restarts)" % restarts
    else:
        return None
    if last_line:
        text += "; last log line: " + _short(last_line)
    return text


def _pod_problem(pod, lines):
    status = _dict(pod.get("status"))
    where = _short(_dict(pod.get("spec")).get("nodeName"))
    head = "Pod %s%s: " % (_name(pod), " on %s" % where if where else "")
    if not where:
        for condition in _list(status.get("conditions")):
            if condition.get("type") == "PodScheduled" and condition.get("status") != "True":
                return head + "not scheduled: " + _short(condition.get("message") or condition.get("reason"))
    found = [p for p in (_container_problem(s, lines.get((_name(pod), _short(s.get("name"))), ""))
                         for s in _statuses(pod)) if p]
    if found:
        return head + "; ".join(found)
    return head + "%s, not ready" % _short(status.get("phase") or "no status")


def sriov_rollout_problems(pods, workload, log_results=None):
    """One message: the workload and a line per Pod that is not ready (its reason, the last log line).

    ``workload`` is the DaemonSet or Deployment as k8s_info returns it (or None when it is gone);
    ``log_results`` the registered results of k8s_log looped over ``sriov_rollout_log_targets`` (each with
    ``item``, the target, and ``log_lines``; a failed read gives no line).
    """
    if not isinstance(pods, list):
        raise AnsibleFilterError("sriov_rollout_problems expects the Pods (k8s_info resources), a list")
    lines = {}
    for result in _list(log_results):
        target = _dict(result.get("item"))
        read = [line for line in (result.get("log_lines") if isinstance(result.get("log_lines"), list) else [])
                if str(line).strip()]
        if target and read:
            key = ("%s/%s" % (_short(target.get("namespace")), _short(target.get("pod"))), _short(target.get("container")))
            lines[key] = read[-1]
    workload = _dict(workload)
    kind = _short(workload.get("kind") or "workload")
    head = "%s %s did not finish its rollout" % (kind, _name(workload))
    status, spec = _dict(workload.get("status")), _dict(workload.get("spec"))
    if kind == "DaemonSet":
        counts = (status.get("updatedNumberScheduled"), status.get("desiredNumberScheduled"), status.get("numberReady"))
        head += " (%s of %s Pods up to date, %s ready)" % tuple(_short(c or 0) for c in counts)
    elif kind == "Deployment":
        counts = (status.get("updatedReplicas"), spec.get("replicas"), status.get("readyReplicas"))
        head += " (%s of %s replicas up to date, %s ready)" % tuple(_short(c or 0) for c in counts)
    problems = [_pod_problem(p, lines) for p in _list(pods) if not _ready(p)]
    if not problems:
        return head + "; every Pod it has is ready (the rollout was still replacing Pods when the wait ended)"
    return head + ": " + " | ".join(problems)


class FilterModule:
    """sriovnet.dra filters about rollouts."""

    def filters(self):
        return {
            "sriov_rollout_log_targets": sriov_rollout_log_targets,
            "sriov_rollout_problems": sriov_rollout_problems,
        }
