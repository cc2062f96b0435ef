"""Cluster tier: the repair worker's full pass on the real apiserver, counted in its audit log.

The session control plane audits every ``resource.k8s.io`` and ``k8s.cni.cncf.io`` request
(Metadata level); the plugin acts as its ServiceAccount (impersonation), so its requests are the
audit events whose impersonated user is that account. A pass over a prepared claim where nothing
changed reads the node's shadows with one label-selected LIST and writes
nothing: no NAD GET, no NAD or claim write, the Pod's resourceVersion unchanged (Pods are not
audited; the publisher's ResourceSlice requests of the same identity are not the pass's).
"""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

from kubernetes import client

from sriov_dra.kubeletapi import messages

from .conftest import PLUGIN_USER, eventually
from .test_auto_attach import start_pair_workload

NAD_GROUP = "k8s.cni.cncf.io"


def audit_events(path: Path, since_line: int) -> list[dict[str, Any]]:
    lines = path.read_text().splitlines() if path.exists() else []
    out = []
    for line in lines[since_line:]:
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def line_count(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def flushed(api: client.ApiClient, path: Path, since_line: int) -> list[dict[str, Any]]:
    """Every audit event after ``since_line``, once an admin marker read sent after them is logged."""
    marker = f"audit-marker-{uuid.uuid4().hex[:8]}"
    try:
        client.CustomObjectsApi(api).get_namespaced_custom_object(
            NAD_GROUP, "v1", "default", "network-attachment-definitions", marker
        )
    except client.ApiException as exc:
        assert exc.status == 404

    def logged() -> list[dict[str, Any]] | None:
        events = audit_events(path, since_line)
        return events if any((e.get("objectRef") or {}).get("name") == marker for e in events) else None

    return eventually("the marker read in the audit log", logged)


def plugin_requests(events: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """``(verb, group, resource)`` of the plugin ServiceAccount's requests, in log order."""
    return [
        (str(e.get("verb")), str(ref.get("apiGroup") or ""), str(ref.get("resource") or ""))
        for e in events
        if (e.get("impersonatedUser") or {}).get("username") == PLUGIN_USER
        for ref in [e.get("objectRef") or {}]
    ]


def test_a_repair_pass_with_nothing_changed_issues_one_shadow_list_and_no_write(
    api, plugin, namespace, control_plane
):
    ref = start_pair_workload(api, plugin, namespace)
    assert isinstance(plugin.prepare(ref), messages.Prepared)
    worker = plugin.worker()
    worker.run_once()  # the first pass also runs the orphan scan (its own LIST)
    pod = client.CoreV1Api(api).read_namespaced_pod("gpu-sriov-pairs-demo", namespace)
    since = line_count(control_plane.audit_log)
    report = worker.run_once()
    events = flushed(api, control_plane.audit_log, since)
    assert report.ensured_pods == [pod.metadata.uid] and not report.failed, report
    ours = plugin_requests(events)
    nads = [verb for verb, group, _ in ours if group == NAD_GROUP]
    assert nads == ["list"], ours  # one LIST of the node's shadows, no GET per shadow
    # the publisher's ResourceSlice requests run in the background of the same identity
    writes = [r for r in ours if r[0] in ("create", "update", "patch", "delete") and r[2] != "resourceslices"]
    assert writes == [], ours
    after = client.CoreV1Api(api).read_namespaced_pod("gpu-sriov-pairs-demo", namespace)
    assert after.metadata.resource_version == pod.metadata.resource_version
