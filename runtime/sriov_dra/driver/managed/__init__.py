"""Auto-attach (``--multus-auto-attach``): per-VF shadow NADs, Pod selections, release, repair.

Modules, in the order a prepare uses them (spec §5–§9, §12.2.5; ARCHITECTURE.md §5):

- ``seams``: the consumer-side Protocols (Pod, NAD, claim APIs, checkpoint, clock, device
  snapshot, events) every other module receives as keyword-only arguments;
- ``consumer``: verify the one Pod a claim is reserved for (spec §6.1);
- ``planning``: eligibility, templates, source GETs, rendering, interface names, annotation size
  and manual-selection conflicts, all before any hardware change (spec §5, §12.2.5);
- ``shadow_lifecycle``: create/verify one shadow, and the API-only finalization of a released one;
- ``pod_selections``: the conditional Pod annotation patch with bounded re-read and recompute;
- ``ensure``: EnsureManagedBindings (shadows → UIDs → Pod → Ready);
- ``release``: ReleaseManagedClaim (spec §8.4 steps 1–9);
- ``repair`` and ``orphans``: the background worker and the orphan scan (spec §8.3, §8.5);
- ``network_data_writer``: each published VF's claim ``networkData`` from the Pod's network-status (issue 17);
- ``lock_order``: claim-then-Pod operation locks with the order checked;
- ``observe``: Events and metrics with bounded reason labels (spec §18.2);
- ``service``: the small facade the prepare/unprepare handler calls.

Nothing in this package releases hardware on its own authority: only the kubelet's unprepare
(which persists ``Deleting``) does.
"""
