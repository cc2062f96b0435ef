"""Auto-attach (``--multus-auto-attach``): per-VF shadow NADs, Pod selections, release, repair.

``service`` is the facade the handler calls; in the order a prepare uses them: ``seams`` (the
injected interfaces), ``consumer``, ``planning``, ``shadow_lifecycle``, ``pod_selections``,
``ensure``; then ``release``, ``repair`` with ``orphans``, ``gone_claims`` and
``network_data_writer``; ``lock_order`` and ``observe`` throughout (docs/design.md#prepare,
docs/design.md#release, docs/design.md#repair). Nothing here releases hardware on its own
authority: only the kubelet's unprepare, which persists ``Deleting``, does.
"""
