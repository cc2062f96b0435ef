"""The node-policy DRA controller: one plan per pass, written in a safe order, then conditions.

:meth:`PolicyController.reconcile` reads the node policies and Nodes from the caches, resolves
every SriovNetwork reference live, builds one DRA policy plan, performs its writes in the safe
order and writes ``DRAConfigurationReady`` (docs/design.md#operator-attributes,
docs/design.md#operator-status). Never writes a NAD or a SriovNetwork, or reports readiness
before its writes succeeded.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from sriov_dra.core.operator import (
    conditions,
    dra_objects,
    dra_policy,
    dra_verdicts,
    generated,
    network_refs,
    sriov_network,
)
from sriov_dra.kube import errors as api_errors
from sriov_dra.kube import objects, views
from sriov_dra.operator import settings, status
from sriov_dra_rules import errors

log = logging.getLogger(__name__)
_KINDS = {
    dra_objects.ATTRIBUTES_KIND: objects.DEVICE_ATTRIBUTES,
    dra_objects.POLICY_KIND: objects.RESOURCE_POLICY,
    dra_objects.DEVICE_CLASS_KIND: objects.DEVICE_CLASS,
}


@dataclass(frozen=True)
class Result:
    """Outcome of one pass: ``failed_writes`` lists the writes that must be retried."""

    outcome: str
    retry: bool = False
    failed_writes: tuple[str, ...] = ()
    reasons: Mapping[str, str] = field(default_factory=dict)


class PolicyController:
    """Plans and applies the generated DRA objects of every node policy.

    ``policies()`` and ``nodes()`` return the current cached objects (dicts).
    """

    def __init__(
        self,
        client: objects.Objects,
        config: settings.ReconcileSettings,
        writer: status.StatusWriter,
        *,
        policies: Callable[[], Sequence[Mapping[str, object]]],
        nodes: Callable[[], Sequence[Mapping[str, object]]],
    ) -> None:
        self.client = client
        self.config = config
        self.writer = writer
        self.policies = policies
        self.nodes = nodes

    def plan_settings(self) -> dra_policy.PlanSettings:
        """The plan's view of the operator settings."""
        return dra_policy.PlanSettings(
            namespace=self.config.namespace,
            resource_prefix=self.config.resource_prefix,
            dra_enabled=self.config.dra_enabled,
            nic_ids=self.config.nic_ids,
        )

    def resolve(self, ref: network_refs.ObjectRef) -> sriov_network.SourceResolution:
        """Resolve one SriovNetwork reference with live reads (docs/design.md#operator-networks)."""
        try:
            network = self.client.get_or_none(objects.SRIOV_NETWORK, ref.name, ref.namespace)
            nad = None
            if network is not None:
                where = network_refs.target(network)
                nad = self.client.get_or_none(objects.NAD, where.name, where.namespace)
        except api_errors.Forbidden as exc:
            return sriov_network.unresolved(
                ref, errors.Reason.SOURCE_ACCESS_DENIED, f"cannot read the source: {exc}"
            )
        except api_errors.ApiError as exc:
            return sriov_network.unresolved(
                ref, errors.Reason.DRA_CONFIGURATION_SYNC_FAILED, f"reading the source failed: {exc}"
            )
        return sriov_network.resolve_source(
            ref,
            network,
            nad,
            operator_namespace=self.config.namespace,
            resource_prefix=self.config.resource_prefix,
        )

    def reconcile(self) -> Result:
        """One full pass.

        1. Read the operator namespace's node policies and the Nodes from the watch caches.
        2. Resolve every SriovNetwork reference with live GETs (network, then the source NAD at
           its rendered target); 403 is ``SourceAccessDenied``, other failures
           ``DRAConfigurationSyncFailed``.
        3. Build one ``core.operator.dra_policy.build_dra_policy_plan``.
        4. List the generated objects (generated-by label only) and perform
           ``core.operator.generated.plan_writes``; a create that meets an unmarked object is
           refused (never adopted); failed writes are retried with backoff.
        5. Write ``DRAConfigurationReady`` with ``observedGeneration`` where it changed; a policy
           whose writes failed reports ``DRAConfigurationSyncFailed`` until they succeed; a
           policy that lost its ``dra`` block loses the condition.
        """
        policy_objects = [
            p
            for p in self.policies()
            if views.mapping(p.get("metadata")).get("namespace") == self.config.namespace
        ]
        refs = dra_policy.references(policy_objects, prefix=self.config.resource_prefix)
        resolutions = {ref: self.resolve(ref) for ref in sorted(refs)}
        plan = dra_policy.build_dra_policy_plan(
            policy_objects, list(self.nodes()), resolutions, self.plan_settings()
        )
        for line in plan.diagnostics:
            log.debug("plan diagnostic", extra={"op": "plan", "detail": line})
        failures: dict[str, str] = {}
        failed: list[str] = []
        try:
            selectors = {
                dra_objects.DEVICE_CLASS_KIND: dra_objects.device_class_selector(self.config.namespace)
            }
            existing = {
                kind: self.client.list(
                    res,
                    self.config.namespace,
                    label_selector=selectors.get(kind, dra_objects.MANAGED_SELECTOR),
                ).items
                for kind, res in _KINDS.items()
            }
        except api_errors.ApiError as exc:
            existing = None
            failed.append(f"list generated objects: {exc}")
            for name in plan.outcomes:
                failures[name] = str(exc)
        if existing is not None:
            writes = generated.plan_writes(
                plan,
                existing[dra_objects.ATTRIBUTES_KIND],
                existing[dra_objects.POLICY_KIND],
                existing[dra_objects.DEVICE_CLASS_KIND],
            )
            for write in writes:
                problem = self._execute(write)
                if problem is None:
                    continue
                failed.append(f"{write}: {problem}")
                for name in write.policies:
                    failures.setdefault(name, f"{write} failed: {problem}")
        reasons = self._write_conditions(policy_objects, plan, failures, failed)
        outcome = "failed" if failed else "synced"
        return Result(outcome, retry=bool(failed), failed_writes=tuple(failed), reasons=reasons)

    def _execute(self, write: generated.Write) -> str | None:
        """Perform one write; return the problem text, or ``None`` on success."""
        res = _KINDS[write.kind]
        ns = self.config.namespace
        try:
            if write.op is generated.Op.DELETE:
                self.client.delete(res, write.name, ns, uid=write.uid or None)
            elif write.op is generated.Op.UPDATE:
                assert write.body is not None
                self.client.replace(res, write.body)
            else:
                assert write.body is not None
                try:
                    self.client.create(res, write.body)
                except api_errors.Conflict as exc:
                    if not exc.already_exists:
                        raise
                    current = self.client.get(res, write.name, ns)
                    if not generated.is_managed(current):
                        return (
                            f"{write.kind} {ns}/{write.name} exists without the label "
                            f"{dra_objects.MANAGED_SELECTOR} and is not adopted; delete or rename it"
                        )
                    body = dict(write.body)
                    meta = body.get("metadata")
                    body["metadata"] = {
                        **(dict(meta) if isinstance(meta, Mapping) else {}),
                        "resourceVersion": (current.get("metadata") or {}).get("resourceVersion"),
                    }
                    self.client.replace(res, body)
        except api_errors.ApiError as exc:
            return str(exc)
        log.info(
            "generated object written", extra={"op": str(write.op), "object": f"{write.kind}/{write.name}"}
        )
        return None

    def _write_conditions(
        self,
        policy_objects: Sequence[Mapping[str, object]],
        plan: dra_policy.DraPolicyPlan,
        failures: Mapping[str, str],
        failed: list[str],
    ) -> dict[str, str]:
        reasons: dict[str, str] = {}
        for obj in policy_objects:
            meta = views.mapping(obj.get("metadata"))
            name = str(meta.get("name"))
            if meta.get("deletionTimestamp"):
                continue
            outcome = plan.outcomes.get(name)
            try:
                if outcome is None:
                    self.writer.remove(objects.NODE_POLICY, obj, dra_verdicts.CONDITION_TYPE)
                    continue
                desired = outcome.condition()
                if outcome.reason is None and name in failures:
                    desired = conditions.Condition(
                        dra_verdicts.CONDITION_TYPE,
                        conditions.Status.FALSE,
                        errors.Reason.DRA_CONFIGURATION_SYNC_FAILED.value,
                        failures[name],
                        outcome.generation,
                    )
                reasons[name] = desired.reason
                self.writer.set(objects.NODE_POLICY, obj, desired)
            except api_errors.ApiError as exc:
                failed.append(f"condition of {dra_verdicts.CONDITION_TYPE} on {name}: {exc}")
        return reasons
