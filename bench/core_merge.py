"""Benchmark: merging managed selections into a 64-entry networks annotation vs only parsing it.

``bench_merge()`` builds one Pod whose ``k8s.v1.cni.cncf.io/networks`` annotation holds 64
entries (56 manual JSON selections with typical options, 8 managed selections of another claim
recorded in the registry) and times, in the same run on the same machine:

* ``networks.parse_networks`` of that annotation (the unavoidable floor), and
* ``selections.merge_managed_selections`` adding a claim's two VFs (parse, registry decode and
  reconciliation, ownership and template checks, interface collision check, render, registry
  encode, size check, JSON Patch).

It returns the ratio of the two (best of several repeats each). The goal is at most
:data:`GOAL_RATIO`. A ratio, not a duration, is reported because absolute times depend on the
machine; nothing here is a test assertion.

Run as a script (``make bench`` or ``.venv/bin/python bench/core_merge.py``) to print the ratio.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.benchkit import timing

from sriov_dra.core import identities, networks, registry
from sriov_dra.core.plugin import selection_ownership, selection_update, selections
from sriov_dra_rules import names

GOAL_RATIO: Final = 3.0
"""Merging may cost at most this many parses of the same annotation."""

NAMESPACE: Final = "ai-workloads"
POD_UID: Final = "11111111-2222-4333-8444-555555555555"
CLAIM_OTHER: Final = "c1a1c1a1-0000-4000-8000-000000000001"
CLAIM_NEW: Final = "c1a1c1a1-0000-4000-8000-000000000002"
MANUAL_ENTRIES: Final = 56
MANAGED_ENTRIES: Final = 8


def _binding(claim: str, device: int, interface: str) -> selection_ownership.ManagedBinding:
    aid = hashlib.sha256(f"{claim}/{device}".encode()).hexdigest()
    entry = registry.RegistryEntry(
        attachment_id=identities.AttachmentId(aid),
        claim_uid=identities.ClaimUid(claim),
        namespace=NAMESPACE,
        name=identities.shadow_name(aid),
        uid=identities.ObjectUid(f"d0d0d0d0-0000-4000-8000-{device:012d}"),
        interface=interface,
        config_sha256=hashlib.sha256(f"config/{device}".encode()).hexdigest(),
    )
    return selection_ownership.ManagedBinding(entry, source_namespace=NAMESPACE, source_name=f"rail-{device}")


def build_pod() -> tuple[selection_update.PodSnapshot, list[selection_ownership.ManagedBinding]]:
    """The 64-entry Pod and the two bindings to merge into it."""
    manual = [
        {
            "name": f"net-{i}",
            "namespace": "shared-nets" if i % 3 else "",
            "interface": f"m{i}",
            "ips": [f"10.{i}.0.5/24"],
            "mac": f"02:00:5e:00:{i:02x}:01",
            "cni-args": {"ratio": 1.5, "tag": f"t{i}"},
        }
        for i in range(MANUAL_ENTRIES)
    ]
    managed = [_binding(CLAIM_OTHER, d, f"dra{d}") for d in range(MANAGED_ENTRIES)]
    reg = registry.Registry(pod_uid=identities.PodUid(POD_UID), entries=tuple(b.entry for b in managed))
    objects = manual + [
        {"name": b.entry.name, "namespace": NAMESPACE, "interface": b.entry.interface} for b in managed
    ]
    annotations = {
        names.NETWORKS_ANNOTATION: json.dumps(objects, separators=(",", ":")),
        names.MANAGED_NETWORKS_ANNOTATION: registry.encode_registry(reg),
        "kubectl.kubernetes.io/last-applied-configuration": "{}",
    }
    pod = selection_update.PodSnapshot(
        namespace=NAMESPACE, name="bench", uid=POD_UID, resource_version="100", annotations=annotations
    )
    new = [_binding(CLAIM_NEW, d, f"dra{d}") for d in range(MANAGED_ENTRIES, MANAGED_ENTRIES + 2)]
    return pod, new


def bench_merge(*, calls: int = 300, repeats: int = 7) -> float:
    """Return merge time divided by parse time for the same 64-entry annotation, measured now.

    Units: a dimensionless ratio; both sides are timed in this run on the same Pod.
    """
    pod, new = build_pod()
    assert pod.annotations is not None
    text = pod.annotations[names.NETWORKS_ANNOTATION]
    entries = len(networks.parse_networks(text, pod_namespace=pod.namespace))
    assert entries == MANUAL_ENTRIES + MANAGED_ENTRIES, entries

    def parse_only() -> object:
        return networks.parse_networks(text, pod_namespace=pod.namespace)

    def merge() -> object:
        return selections.merge_managed_selections(pod, new)

    update = selections.merge_managed_selections(pod, new)  # warm caches; also proves it changes
    assert update.changed and len(update.added) == 2
    parse_only()
    merge_s = timing.best_per_call(merge, calls=calls, repeats=repeats)
    parse_s = timing.best_per_call(parse_only, calls=calls, repeats=repeats)
    return merge_s / parse_s


def main() -> None:
    """Print the measured ratio and whether it meets :data:`GOAL_RATIO`."""
    ratio = bench_merge()
    verdict = "meets" if ratio <= GOAL_RATIO else "MISSES"
    print(
        f"merge_managed_selections / parse_networks (64 entries): {ratio:.2f}x "
        f"({verdict} goal <= {GOAL_RATIO:.0f}x)"
    )


if __name__ == "__main__":
    main()
