"""One simulated node's plugin releasing its Pods' claims, as at NodeUnprepare, for ``bench/scale.py``.

Run as ``python -m bench.scalekit.node_release <kubeconfig> <checkpoint.json>``, one process per
simulated node (each node's plugin is its own process: its own API client and fan-out workers).
The checkpoint holds the records the plugin would hold for the node's Pods (the bench writes them
as a readable ``checkpoint.json``, which the product's store adopts on load). On ``release`` it
releases every claim through the product's own ``driver.managed.release.release_managed_claim``
(UID-checked reads, UID-precondition deletes, the Pod's selections, ``Deleting`` and
``ReleaseComplete`` persisted, then only our finalizer removed and the record deleted), with the
plugin's concurrency bounds: :data:`UNPREPARE_CALLS` NodeUnprepare calls at once (the kubelet
plugin server's DRA workers), each releasing its Pod's claims one after the other as the unprepare
handler does, and at most ``fanout.DEFAULT_MAX_IN_FLIGHT`` requests inside a release step
(``--api-max-in-flight``'s default). Bench-only difference: a simulated node has no VFs, so the
host step (drivers, CDI files) does nothing; its claims have no ResourceClaim objects, so there is
no ``status.devices`` entry to clear.

Protocol: one JSON object per line. The child writes ``{"ready": true, "claims": N}`` after loading
the checkpoint, then answers ``release`` with ``{"claims": N, "seconds": S, "failed": [...]}`` and
``stop`` with ``{}``. Product logs go to stderr.
"""

from __future__ import annotations

import concurrent.futures
import inspect
import json
import sys
import time
from pathlib import Path
from typing import Any, Final

from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver.managed import release, seams
from sriov_dra.host import checkpoint
from sriov_dra.kube import claims, nad_client, pod_patch
from sriov_dra.kube import client as kube_client
from sriov_dra.kubeletapi import plugin_server
from sriov_dra.servicekit import fanout

UNPREPARE_CALLS: Final[int] = (
    inspect.signature(plugin_server.KubeletPluginServer).parameters["max_workers"].default
)
"""NodeUnprepare calls one plugin serves at once (its DRA socket's gRPC workers)."""


def _no_host(record: model.ClaimRecord) -> None:
    """A simulated node has no VF to give back and no CDI file to remove."""
    del record


def release_all(store: checkpoint.CheckpointStore, kubeconfig: Path) -> dict[str, Any]:
    """Release every claim of ``store``, Pods in parallel (bounded), claims of one Pod in order."""
    api = kube_client.from_kubeconfig(kubeconfig)
    nads, pods = nad_client.NadClient(api), pod_patch.PodClient(api)
    claim_api, clock = claims.ClaimClient(api), seams.SystemClock()
    by_pod: dict[str, list[model.ClaimRecord]] = {}
    for record in store.all_claims().values():
        by_pod.setdefault(record.pod_uid, []).append(record)

    def unprepare(records: list[model.ClaimRecord]) -> list[str]:
        failed = []
        for record in records:
            try:
                release.release_managed_claim(
                    record,
                    store=store,
                    nads=nads,
                    pods=pods,
                    claims=claim_api,
                    release_host=_no_host,
                    clock=clock,
                    max_in_flight=fanout.DEFAULT_MAX_IN_FLIGHT,
                )
            except Exception as exc:  # reported to the bench, which counts what is left
                failed.append(f"{record.namespace}/{record.name}: {exc}")
        return failed

    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(UNPREPARE_CALLS) as pool:
        failed = [f for result in pool.map(unprepare, by_pod.values()) for f in result]
    return {
        "claims": sum(len(r) for r in by_pod.values()),
        "seconds": time.perf_counter() - start,
        "failed": failed,
    }


def main(argv: list[str]) -> int:
    kubeconfig, path = Path(argv[0]), Path(argv[1])
    store = checkpoint.CheckpointStore(path)
    loaded = store.load()
    print(json.dumps({"ready": True, "claims": len(loaded)}), flush=True)
    for line in sys.stdin:
        cmd = json.loads(line).get("cmd")
        if cmd == "release":
            print(json.dumps(release_all(store, kubeconfig)), flush=True)
        elif cmd == "stop":
            print("{}", flush=True)
            break
    store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
