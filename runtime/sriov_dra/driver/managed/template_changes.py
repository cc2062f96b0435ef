"""A shadow frozen from a template that has changed since: reported on its Pod, never re-rendered.

A binding keeps the config rendered at its first prepare for the Pod's whole life
(docs/design.md#source-changes): a template fixed afterwards (a corrected IPAM range, VLAN, ...)
reaches new Pods only, and a Pod that fails on the frozen config fails until it is recreated.
The repair pass therefore renders each verified Pod's templates again, live, for the bound VF (at
the orphan scan's cadence, 5 min), and when the result differs from the frozen bytes puts a
``ShadowTemplateChanged`` Warning Event on the Pod saying so and to recreate it. Each distinct
template is read once in such a pass; a template
that is gone, unreadable or no longer renders is not reported here (there is no fix to pick up).

It must never change a shadow, a record or a Pod: it only reads and reports.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from sriov_dra.core import render
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra.driver.managed import observe, seams
from sriov_dra.kube import errors as kube_errors
from sriov_dra_rules import errors

REASON_TEMPLATE_CHANGED = "ShadowTemplateChanged"
"""Event reason on a Pod whose shadow was frozen from a template that renders differently now."""


@dataclass
class TemplateChanges:
    """The live templates of one pass, read once each (``None``: not usable now)."""

    nads: seams.NadApi
    live: dict[tuple[str, str], Mapping[str, object] | None] = field(default_factory=dict)
    due: bool = True
    """Whether this pass compares templates (the worker does it at its orphan scan's cadence, so
    that an ordinary pass stays one LIST and no GET)."""

    def new_pass(self, *, due: bool) -> None:
        """Forget the templates read in the previous pass; compare in this one when ``due``."""
        self.live.clear()
        self.due = due

    def _template(self, namespace: str, name: str) -> Mapping[str, object] | None:
        key = (namespace, name)
        if key not in self.live:
            try:
                self.live[key] = self.nads.get(namespace, name)
            except kube_errors.ApiError:
                self.live[key] = None
        return self.live[key]

    def changed(self, records: Sequence[model.ClaimRecord]) -> list[str]:
        """``shadow (template)`` of every binding whose template renders to other bytes now."""
        out: list[str] = []
        for record in records:
            for device in record.devices:
                binding = device.managed
                if binding is None:
                    continue
                source = binding.source
                live = self._template(source.namespace, source.name)
                if live is None:
                    continue
                try:
                    now = render.render_shadow_config(live, device.pci_address).config_text
                except errors.SriovDraError:
                    continue
                if now != binding.rendered_config:
                    out.append(f"{binding.shadow_name} (template {source.namespace}/{source.name})")
        return out

    def report(
        self, reporter: observe.Reporter, pod: Mapping[str, object], records: Sequence[model.ClaimRecord]
    ) -> None:
        """Put one Warning Event on ``pod`` naming every shadow whose template changed, if any."""
        changed = self.changed(records) if self.due else []
        meta = pod.get("metadata")
        if not changed or not isinstance(meta, Mapping):
            return
        reporter.event(
            observe.POD,
            str(meta.get("namespace") or ""),
            str(meta.get("name") or ""),
            str(meta.get("uid") or ""),
            reason=REASON_TEMPLATE_CHANGED,
            note=f"shadows {', '.join(changed)} keep the config frozen at the first prepare, and their "
            "templates render differently now; recreate the Pod to pick up the fix",
            warning=True,
            action="Repair",
        )
