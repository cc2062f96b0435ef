"""One log schema, one filter: a claim UID follows a prepare from the plugin into the guard.

The plugin, the guard and the operator write the same JSON schema
(``sriov_dra.servicekit.logs``: ``ts`` RFC 3339 UTC with ``Z``, lowercase ``level``, ``logger``,
``msg``, fields, ``exc``), so ``jq 'select(.claim_uid == "<uid>")'`` over the node's plugin and
guard logs (their Pods' logs on real nodes, their log files on simulated ones) finds the claim's
prepare in the plugin and the verification of its interfaces in the guard.
"""

from __future__ import annotations

import json
import re
from typing import Any

from tests.e2e.helpers import SRIOV_CLASS, claim_template, in_namespace, on_pf, template, vf_pod, wait_clean

from sriov_dra.cli import inspect_rows
from sriov_dra.kube import objects
from sriov_dra_lab import workloads

TS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def json_lines(lines: list[str]) -> list[dict[str, Any]]:
    """Every log line that is a JSON object (a service may print other lines at start)."""
    out = []
    for line in lines:
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def test_one_filter_on_a_claim_uid_follows_a_prepare_through_plugin_and_guard_logs(
    lab: Any, rails: Any, namespace: str
) -> None:
    node = lab.nodes[0]
    docs = in_namespace(
        namespace,
        template("rail-a-net", f"{namespace}-a", {"type": "host-local", "subnet": "10.92.0.0/24"}),
        claim_template("one-vf", [("vf", SRIOV_CLASS)], selector=on_pf("ens1f0")),
        vf_pod("traced", "one-vf", node=node.name),
    )
    workloads.apply_docs(lab.api, docs)
    pod = workloads.wait_running(lab.api, namespace, "traced")
    client = objects.Objects(lab.api, field_manager="e2e")
    (status,) = pod["status"]["resourceClaimStatuses"]
    claim_uid = client.get(inspect_rows.CLAIM, status["resourceClaimName"], namespace)["metadata"]["uid"]

    logs = {s: json_lines(lab.service_log(node, s)) for s in ("plugin", "guard")}
    for service, lines in logs.items():
        assert lines, f"{service} wrote no JSON log lines"
        for line in lines:
            assert TS.fullmatch(line["ts"]) and line["level"] in {
                "debug",
                "info",
                "warning",
                "error",
                "critical",
            }
            assert {"logger", "msg"} <= line.keys() and not {"time", "traceback", "exception"} & line.keys()
    found = {
        s: [line["msg"] for line in lines if line.get("claim_uid") == claim_uid] for s, lines in logs.items()
    }
    assert found["plugin"], f"the plugin logged nothing with claim_uid {claim_uid}"
    assert "claim interfaces verified" in found["guard"], found["guard"]
    (verified,) = [x for x in logs["guard"] if x.get("claim_uid") == claim_uid]
    assert verified["ifname"] == "dra0" and verified["pod"] == f"{namespace}/traced"

    workloads.delete_docs(lab.api, [d for d in docs if d["kind"] == "Pod"])
    found_left = wait_clean(lab)
    assert found_left.empty, found_left.describe()
