"""Production wiring of auto-attach for the plugin entrypoint (``driver.main``).

Owns the construction of :class:`~sriov_dra.driver.managed.service.ManagedAttach` from the
plugin's API client and settings (the real Pod, NAD, claim and Event clients, the node's UID read
once, the publisher's device snapshot, metric families in the plugin's registry, shared
claim/Pod lock tables) and of the repair worker, whose first pass must finish before the plugin
registers with the kubelet (spec §8.3: "before managed readiness").

It must never start anything the entrypoint cannot stop, nor run with a node UID it did not read.
"""

from __future__ import annotations

import logging
from typing import Any, Final

from sriov_dra.core import identities
from sriov_dra.driver import claim_context, locks, unprepare
from sriov_dra.driver.managed import lockorder, multus_layout, observe, repair, seams, service
from sriov_dra.kube import claims as kube_claims
from sriov_dra.kube import nodeinfo, plugin_events, podpatch, shadows

LOG = logging.getLogger(__name__)

CONTROLLER: Final = "sriov-dra-plugin"
"""``reportingController`` of the plugin's Events."""


def build_attach(
    *,
    api: Any,
    node_name: str,
    devices: seams.DeviceSource,
    store: seams.Store,
    registry: Any,
    api_timeout_s: float,
    multus: multus_layout.LayoutSource = multus_layout.DEFAULT_SOURCE,
) -> service.ManagedAttach:
    """The node's :class:`ManagedAttach` with real clients; reads the Node UID once.

    ``multus`` is where the node's Multus delegate layout is read for interface-name checks.

    Raises: ``kube.errors`` classes when the Node cannot be read (startup fails visibly).
    """
    uid = nodeinfo.node_uid(api, node_name, timeout_s=api_timeout_s)
    metrics = observe.ManagedMetrics(registry)
    events = plugin_events.EventRecorder(api, controller=CONTROLLER, instance=node_name)
    attach = service.ManagedAttach(
        node=seams.NodeIdentity(node_name, identities.NodeUid(uid), multus=multus),
        devices=devices,
        pods=podpatch.PodClient(api, timeout_s=api_timeout_s),
        nads=shadows.NadClient(api, timeout_s=api_timeout_s),
        claims=kube_claims.ClaimClient(api, timeout_s=api_timeout_s),
        store=store,
        locks=lockorder.OperationLocks(locks.KeyedLocks("claim"), locks.KeyedLocks("pod")),
        reporter=observe.Reporter(events, metrics),
    )
    LOG.info("auto-attach enabled", extra={"op": "startup", "node": node_name, "node_uid": uid})
    return attach


def start_worker(
    attach: service.ManagedAttach,
    context: claim_context.ClaimContext,
    *,
    settings: repair.RepairSettings | None = None,
    first_pass_timeout_s: float = 60.0,
) -> repair.RepairWorker:
    """Start the repair worker (host release through the handler's context) and wait for its
    first pass, bounded by ``first_pass_timeout_s`` seconds (a slow API only delays readiness)."""
    worker = repair.RepairWorker(
        attach=attach,
        host_release=lambda record: unprepare.release_host(context, record),
        clear_status=lambda record: unprepare.clear_status(context, record),
        settings=settings,
    )
    worker.start()
    if not worker.wait_first_pass(first_pass_timeout_s):
        LOG.warning("repair worker first pass still running", extra={"op": "startup"})
    return worker
