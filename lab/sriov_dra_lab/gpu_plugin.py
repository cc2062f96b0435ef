"""LAB ONLY — SYNTHETIC: a stand-in kubelet plugin for the ``gpu.nvidia.com`` driver (no GPU anywhere).

The lab publishes synthetic GPU ResourceSlices (:mod:`sriov_dra_lab.session`) so the scheduler
can pair each VF with a GPU by PCIe root, as the gpu-nic-pairs example asks. A kubelet refuses to start a Pod
whose claim has results of a driver that is not registered, so every lab node also runs this
process: it registers as ``gpu.nvidia.com`` over the real kubelet plugin protocol and answers
NodePrepareResources with the claim's ``gpu.nvidia.com`` results and synthetic CDI IDs
(``k8s.gpu.nvidia.com/gpu=synthetic-<device>``), and NodeUnprepareResources with success. It
touches no device, writes no CDI file and is never part of the product.

Like a real DRA driver it keeps its node's ResourceSlice published: a real kubelet deletes every
ResourceSlice of its node when it starts (kubelet v1.36 ``DRAPluginManager`` wipes them so no Pod
is scheduled to a driver that may not come back) and leaves republishing to each driver, so this
process re-creates the synthetic slice (:func:`keep_slice_published`) whenever it is gone.

Run: ``python -m sriov_dra_lab.gpu_plugin --node-name N --kubeconfig K --plugins-dir P --registry-dir R``.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from kubernetes import client

from sriov_dra.kube import claims as kube_claims
from sriov_dra.kube import client as kube_client
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import resource_slices
from sriov_dra.kubeletapi import dra_service, endpoints, messages, plugin_server
from sriov_dra_lab import session

DRIVER = "gpu.nvidia.com"
CDI_KIND = "k8s.gpu.nvidia.com/gpu"


class SyntheticGpuHandler:
    """Prepares ``gpu.nvidia.com`` results by naming them (see the module docstring)."""

    def __init__(self, claims: kube_claims.ClaimClient) -> None:
        self.claims = claims

    def prepare_resources(
        self, claims: Sequence[messages.ClaimRef]
    ) -> Mapping[str, dra_service.PrepareValue]:
        """One ``Prepared`` per claim with its synthetic GPUs; an error if the claim changed."""
        out: dict[str, dra_service.PrepareValue] = {}
        for ref in claims:
            claim = self.claims.get(ref.namespace, ref.name)
            if claim["metadata"]["uid"] != ref.uid:
                out[ref.uid] = messages.ClaimError(
                    f"{ref} was replaced (live UID {claim['metadata']['uid']})"
                )
                continue
            results = (((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get(
                "results"
            ) or []
            out[ref.uid] = messages.Prepared(
                tuple(
                    messages.Device(
                        pool_name=r["pool"],
                        device_name=r["device"],
                        request_names=(str(r["request"]).split("/")[0],),
                        cdi_device_ids=(f"{CDI_KIND}=synthetic-{r['device']}",),
                    )
                    for r in results
                    if r.get("driver") == DRIVER
                )
            )
        return out

    def unprepare_resources(
        self, claims: Sequence[messages.ClaimRef]
    ) -> Mapping[str, dra_service.UnprepareValue]:
        """Nothing to undo."""
        return {ref.uid: None for ref in claims}


def keep_slice_published(
    api: client.ApiClient, node: str, stop: threading.Event, *, interval_s: float = 2.0
) -> None:
    """Until ``stop``: re-create ``node``'s synthetic GPU slice (:func:`session.gpu_slice`) when it is gone.

    Units: ``interval_s`` seconds between LISTs of this driver's slices on ``node``. A failed call
    is printed and retried at the next interval; an existing slice is never rewritten.
    """
    while not stop.wait(interval_s):
        try:
            if not resource_slices.list_slices(api, driver=DRIVER, node=node, timeout_s=10.0):
                resource_slices.create_slice(api, session.gpu_slice(node), timeout_s=10.0)
                print(
                    f"re-created the synthetic {DRIVER} ResourceSlice of {node} (it was deleted)", flush=True
                )
        except kube_errors.ApiError as exc:
            print(f"keeping the synthetic {DRIVER} ResourceSlice of {node}: {exc}", flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit status."""
    parser = argparse.ArgumentParser(prog="lab-gpu-plugin", description=__doc__.splitlines()[0])
    parser.add_argument("--node-name", required=True)
    parser.add_argument("--kubeconfig", type=Path, required=True)
    parser.add_argument("--plugins-dir", type=Path, required=True)
    parser.add_argument("--registry-dir", type=Path, required=True)
    args = parser.parse_args(argv)
    api = kube_client.from_kubeconfig(args.kubeconfig)
    server = plugin_server.KubeletPluginServer(
        driver_name=DRIVER,
        handler=SyntheticGpuHandler(kube_claims.ClaimClient(api, timeout_s=10.0)),
        sockets=endpoints.plugin_sockets(
            DRIVER, plugins_dir=args.plugins_dir, registry_dir=args.registry_dir
        ),
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server.start()
    keeper = threading.Thread(
        target=keep_slice_published, args=(api, args.node_name, stop), name="gpu-slice-keeper", daemon=True
    )
    keeper.start()
    print(f"synthetic {DRIVER} plugin serving for {args.node_name} (no GPU hardware)", flush=True)
    stop.wait()
    keeper.join(timeout=15.0)
    server.stop(grace_s=2.0)
    api.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
