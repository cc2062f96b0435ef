"""The guard daemon's CNI hooks: live reads and checks before Multus ADD, verification after.

Called by the ``multus-guard`` shim for an ADD of a Pod with managed bindings on this node, of a
Pod it cannot tell about, or of every Pod with ``guard.verifyOrdinarySelections`` (other commands
reaching the daemon go to Multus unchanged). A Pod with neither a registry nor a selected shadow
is ordinary here too: Multus runs with the runtime's environment and its answer is relayed,
checked only by that option (docs/design.md#guard). Within ``settings.add_budget_s``: every live read is bounded by what is
left, Multus gets the rest, a budget spent before Multus fails the ADD without running it. No
state between requests: each ADD reads the Pod and every selected managed shadow live. A failed
verification runs Multus DEL before failing, so the kubelet's retry starts clean. Writes nothing
but its answer and, after a verified ADD, the network part of the Pod's device metadata files
(``guard.metadata_network``; its errors are logged and counted, never fail the ADD). The order of
one ADD: docs/guard.md ("ADD, in order").
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, Protocol

from sriov_dra.core import metadata_document
from sriov_dra.guard import (
    checks,
    decisions,
    layout,
    metadata_network,
    metrics,
    multus,
    request,
    shadow_checks,
    shim,
    verify,
)
from sriov_dra.guard.settings import GuardSettings
from sriov_dra.kube import errors as kube_errors
from sriov_dra.servicekit import fanout

Reason = decisions.Reason
log = logging.getLogger("sriov_dra.guard")
READS_IN_FLIGHT: Final = fanout.DEFAULT_MAX_IN_FLIGHT
"""Shadow reads the daemon runs at once across all its ADDs (a Pod with a shadow per rail of an
8-rail node in one round trip); more wait for a free reader within their ADD's budget."""


class Reader(Protocol):
    """A live GET of one namespaced object (``kube.pods.get_pod`` / ``kube.nads.get_nad`` bound to a client)."""

    def __call__(self, namespace: str, name: str, *, timeout_s: float) -> dict[str, Any]: ...


class Runner(Protocol):
    """Runs Multus (``guard.multus.MultusRunner``)."""

    def run(
        self, conf: shim.GuardConf, env: Mapping[str, str], *, command: str, timeout_s: float
    ) -> multus.MultusRun: ...


class MetadataFiles(Protocol):
    """The device metadata files on this node (``host.pod_metadata_files.PodMetadataFiles``)."""

    def claim_files(self, namespace: str, claim_uids: Collection[str]) -> list[Path]: ...

    def update(
        self, path: Path, edit: Callable[[Mapping[str, object]], dict[str, object] | None]
    ) -> bool: ...


class Clock(Protocol):
    """Monotonic time and pauses (a fake in tests)."""

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock; pauses on an Event so a stop can cut them short."""

    def __init__(self) -> None:
        self._never = threading.Event()

    def monotonic(self) -> float:
        """``time.monotonic()``."""
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        """Pause ``seconds``."""
        self._never.wait(seconds)


@dataclass(frozen=True)
class Outcome:
    """What the shim prints and exits with, plus how the request was decided.

    Units: ``guard_s``/``multus_s`` seconds spent in the guard and in Multus.
    """

    reason: Reason
    exit_code: int
    stdout: str
    guard_s: float = 0.0
    multus_s: float = 0.0
    message: str = ""


@dataclass
class _Budget:
    clock: Clock
    deadline: float
    total_s: float

    def remaining(self) -> float:
        return self.deadline - self.clock.monotonic()


class CniHooks:
    """Handles requests from the shim; every dependency is injected (tests fake each one)."""

    def __init__(
        self,
        *,
        settings: GuardSettings,
        get_pod: Reader,
        get_nad: Reader,
        runner: Runner,
        netns_links: Callable[[str], Sequence[verify.Link]],
        clock: Clock,
        recorder: metrics.GuardMetrics,
        metadata: MetadataFiles | None = None,
    ) -> None:
        self.settings = settings
        self._host_root = str(settings.host_root) if settings.host_root else None
        self._get_pod = get_pod
        self._get_nad = get_nad
        self._runner = runner
        self._netns_links = netns_links
        self._clock = clock
        self.metrics = recorder
        self._metadata = metadata

    # ------------------------------------------------------------------ entry
    def handle(self, env: Mapping[str, str], stdin: bytes) -> Outcome:
        """Decide one request and return the shim's answer; never raises for a bad request."""
        start = self._clock.monotonic()
        try:
            req = request.parse_request(env, stdin)
        except decisions.Rejected as exc:
            return self._finish(self._rejection("1.0.0", exc), None, start)
        if req.command != "ADD":
            return self._finish(self._pass_through(req), req, start)
        try:
            outcome = self._add(req, start)
        except Exception as exc:  # an unforeseen bug must still answer the runtime
            log.exception("guard ADD failed unexpectedly", extra={"op": "ADD", "pod": req.pod_ref})
            rejected = decisions.Rejected.one(Reason.INTERNAL_ERROR, f"{type(exc).__name__}: {exc}")
            outcome = self._rejection(req.conf.cni_version, rejected)
        return self._finish(outcome, req, start)

    # ------------------------------------------------------------------ ADD
    def _add(self, req: request.CniRequest, start: float) -> Outcome:
        budget = _Budget(self._clock, start + self.settings.add_budget_s, self.settings.add_budget_s)
        version = req.conf.cni_version
        try:
            pod = self._live_pod(req, budget)
            nets = checks.read_networks_of_any_pod(pod, cni_ifname=req.ifname)
            nads = self._read_each(
                "network-attachment-definitions",
                self._get_nad,
                checks.managed_targets(nets) if nets else (),
                budget,
            )
            found, managed = checks.managed_findings(pod, nets, nads)
            is_managed = bool(found or managed) or (nets is not None and nets.registry is not None)
            expected: tuple[shadow_checks.ExpectedInterface, ...] = ()
            if nets is not None and (is_managed or req.conf.verify_ordinary_selections):
                multus_layout = layout.multus_layout(
                    req.conf, primary_ifname=nets.primary_ifname, host_root=self._host_root
                )
                if is_managed:
                    found += checks.name_violations(nets, pod, multus_layout)
                if found:
                    raise decisions.Rejected(found)
                expected = (
                    checks.requested_interfaces(nets, pod, multus_layout, managed)
                    if req.conf.verify_ordinary_selections
                    else managed
                )
        except decisions.Rejected as exc:
            return self._rejection(version, exc)

        env = request.env_for_multus(req, pod.uid) if is_managed else dict(req.env)
        remaining = budget.remaining()
        if remaining <= 0:
            return self._rejection(version, self._spent(budget, "before Multus could run"))
        try:
            run = self._runner.run(req.conf, env, command="ADD", timeout_s=remaining)
        except multus.MultusUnavailable as exc:
            return self._rejection(version, decisions.Rejected.one(Reason.MULTUS_UNAVAILABLE, str(exc)))
        self.metrics.multus_runs.labels(command="ADD", outcome="ok" if run.ok else "error").inc()
        if not run.ok:
            return self._multus_failed(version, run)
        if not expected:
            return Outcome(Reason.PASSED_UNMANAGED, 0, run.stdout, multus_s=run.duration_s)

        violations, links, pod_after = self._verify(req, expected, budget)
        if not violations:
            _log_verified_claims(req, expected)
            self._fill_metadata(req, expected, links, pod_after or {})
            return Outcome(
                Reason.PASSED_VERIFIED if managed else Reason.PASSED_UNMANAGED,
                0,
                run.stdout,
                multus_s=run.duration_s,
                message=f"verified {', '.join(e.ifname for e in expected)}",
            )
        return self._undo(req, env, run, violations, budget)

    def _live_pod(self, req: request.CniRequest, budget: _Budget) -> shadow_checks.PodView:
        """The runtime's Pod, read live and checked (UID, node). Raises: :class:`decisions.Rejected`."""
        pod_json = self._read("pods", self._get_pod, req.pod_namespace, req.pod_name, budget)
        if pod_json is None:
            raise decisions.Rejected.one(
                Reason.POD_NOT_FOUND,
                f"{req.pod_ref} was not found by a live GET; the guard does not attach networks to a Pod "
                "it cannot read (the kubelet retries)",
            )
        pod = checks.pod_view(pod_json)
        checks.check_pod_identity(pod, runtime_uid=req.pod_uid, node_name=self.settings.node_name)
        return pod

    def _read(
        self, resource: str, reader: Reader, namespace: str, name: str, budget: _Budget
    ) -> dict[str, Any] | None:
        """One live GET with bounded retries of retryable failures; ``None`` for NotFound."""
        delay_s = 0.1
        window_end = min(budget.deadline, self._clock.monotonic() + self.settings.api_retry_window_s)
        while True:
            remaining = budget.remaining()
            if remaining <= 0:
                raise self._spent(budget, f"while reading {resource} {namespace}/{name}")
            try:
                obj = reader(namespace, name, timeout_s=min(self.settings.api_timeout_s, remaining))
            except kube_errors.NotFound:
                self.metrics.api_reads.labels(resource=resource, outcome="not_found").inc()
                return None
            except kube_errors.Forbidden as exc:
                self.metrics.api_reads.labels(resource=resource, outcome="forbidden").inc()
                raise decisions.Rejected.one(
                    Reason.API_FORBIDDEN,
                    f"{exc}; the guard's identity needs get on {resource} in namespace {namespace} (ClusterRole "
                    "sriov-dra-guard); nothing was attached",
                ) from exc
            except kube_errors.ApiError as exc:
                self.metrics.api_reads.labels(resource=resource, outcome="error").inc()
                pause = exc.retry_after_s if isinstance(exc, kube_errors.Throttled) else delay_s
                if not exc.retryable or self._clock.monotonic() + pause >= window_end:
                    raise decisions.Rejected.one(
                        Reason.API_READ_FAILED, f"{exc}; no stale copy is used instead (the kubelet retries)"
                    ) from exc
                self._clock.sleep(pause)
                delay_s = min(delay_s * 2, 1.0)
                continue
            self.metrics.api_reads.labels(resource=resource, outcome="ok").inc()
            return obj

    def _read_each(
        self, resource: str, reader: Reader, targets: Sequence[tuple[str, str]], budget: _Budget
    ) -> dict[tuple[str, str], dict[str, Any] | None]:
        """:meth:`_read` of every ``(namespace, name)`` of ``targets`` at once, at most
        :data:`READS_IN_FLIGHT` in the whole daemon (``servicekit.fanout``), all finished before it
        returns: a Pod with a shadow per VF waits one round trip, not one per VF. Each read is bounded
        by what is left of ``budget`` when it starts. Raises what the first failed target in order
        raised, as reading in order would."""
        calls = [functools.partial(self._read, resource, reader, ns, name, budget) for ns, name in targets]
        return dict(zip(targets, fanout.values(calls, max_in_flight=READS_IN_FLIGHT), strict=True))

    def _spent(self, budget: _Budget, where: str) -> decisions.Rejected:
        return decisions.Rejected.one(
            Reason.API_READ_FAILED,
            f"the ADD budget of {budget.total_s:g}s was spent {where}; nothing was attached",
        )

    def _verify(
        self, req: request.CniRequest, expected: Sequence[shadow_checks.ExpectedInterface], budget: _Budget
    ) -> tuple[list[decisions.Violation], Sequence[verify.Link], dict[str, Any] | None]:
        """The findings, with the netns links and the Pod read after ADD they came from."""
        try:
            links = self._netns_links(req.netns)
        except Exception as exc:  # host.netlink.NetlinkError and anything the namespace read raises
            problem = f"cannot list interfaces of the sandbox {req.netns} of {req.pod_ref}: {exc}"
            return [decisions.Violation(Reason.INTERFACES_MISSING, problem)], (), None
        found = verify.interface_violations(expected, links, owner=req.pod_ref)
        try:
            pod_after = self._read("pods", self._get_pod, req.pod_namespace, req.pod_name, budget)
        except decisions.Rejected as exc:
            return found + list(exc.violations), links, None
        if pod_after is None:
            gone = decisions.Violation(Reason.POD_NOT_FOUND, f"{req.pod_ref} disappeared during ADD")
            return [*found, gone], links, None
        return (
            found + verify.network_status_violations(expected, pod_after, owner=req.pod_ref),
            links,
            pod_after,
        )

    def _fill_metadata(
        self,
        req: request.CniRequest,
        expected: Sequence[shadow_checks.ExpectedInterface],
        links: Sequence[verify.Link],
        pod_after: Mapping[str, Any],
    ) -> None:
        """Set the verified VFs' network data in their claims' metadata files (docs/design.md#device-metadata).

        Each file counts once in ``sriov_dra_guard_device_metadata_total``; a failure is logged
        (``device metadata network data not written``) and counted, and the ADD still succeeds.
        """
        if self._metadata is None:
            return
        try:
            by_claim = metadata_network.network_data(expected, links, pod_after)
            paths = self._metadata.claim_files(req.pod_namespace, by_claim) if by_claim else []
        except Exception as exc:
            self._metadata_failed(req, exc)
            return
        for path in paths:
            try:
                written = self._metadata.update(path, lambda doc: _network_part(doc, by_claim))
            except Exception as exc:
                self._metadata_failed(req, exc, path)
                continue
            self.metrics.device_metadata.labels(outcome="written" if written else "unchanged").inc()

    def _metadata_failed(self, req: request.CniRequest, exc: Exception, path: Path | None = None) -> None:
        self.metrics.device_metadata.labels(outcome="error").inc()
        log.warning(
            "device metadata network data not written",
            extra={
                "op": "ADD",
                "pod": f"{req.pod_namespace}/{req.pod_name}",
                "pod_uid": req.pod_uid or "",
                "path": str(path or ""),
                "reason": f"{type(exc).__name__}: {exc}",
            },
        )

    def _undo(
        self,
        req: request.CniRequest,
        env: Mapping[str, str],
        run: multus.MultusRun,
        violations: Sequence[decisions.Violation],
        budget: _Budget,
    ) -> Outcome:
        """Multus DEL for the same container, then the failure (docs/design.md#guard-checks; the kubelet retries)."""
        timeout_s = max(budget.remaining(), self.settings.del_after_failure_min_s)
        try:
            undo = self._runner.run(req.conf, env, command="DEL", timeout_s=timeout_s)
            undo_note = (
                "Multus DEL succeeded" if undo.ok else f"Multus DEL failed: {undo.stdout or undo.stderr}"
            )
            self.metrics.multus_runs.labels(command="DEL", outcome="ok" if undo.ok else "error").inc()
            undo_s = undo.duration_s
        except multus.MultusUnavailable as exc:
            undo_note, undo_s = f"Multus DEL could not run: {exc}", 0.0
        rejected = decisions.Rejected(violations)
        outcome = self._rejection(req.conf.cni_version, rejected, note=f"Multus ran; {undo_note}")
        return Outcome(
            outcome.reason,
            outcome.exit_code,
            outcome.stdout,
            multus_s=run.duration_s + undo_s,
            message=outcome.message,
        )

    # ------------------------------------------------------------------ other answers
    def _pass_through(self, req: request.CniRequest) -> Outcome:
        try:
            run = self._runner.run(
                req.conf, req.env, command=req.command, timeout_s=self.settings.add_budget_s
            )
        except multus.MultusUnavailable as exc:
            return self._rejection(
                req.conf.cni_version, decisions.Rejected.one(Reason.MULTUS_UNAVAILABLE, str(exc))
            )
        return Outcome(Reason.PASSED_THROUGH, run.exit_code, run.stdout, multus_s=run.duration_s)

    def _multus_failed(self, version: str, run: multus.MultusRun) -> Outcome:
        """Relay Multus's own error unchanged; synthesize one only when it printed nothing."""
        stdout = run.stdout
        if not stdout.strip():
            why = "timed out (the ADD budget ran out)" if run.timed_out else f"exited {run.exit_code}"
            stdout = shim.cni_error(
                version,
                shim.CniErrorCode.TRY_AGAIN,
                f"multus-guard: Multus {why} without a result",
                run.stderr[-1000:],
            )
        return Outcome(
            Reason.MULTUS_FAILED,
            run.exit_code if run.exit_code > 0 else 1,
            stdout,
            multus_s=run.duration_s,
            message=(run.stdout or run.stderr)[-500:],
        )

    def _rejection(self, version: str, exc: decisions.Rejected, *, note: str = "no delegate ran") -> Outcome:
        first = exc.violations[0]
        details = "; ".join(f"{v.reason}: {v.message}" for v in exc.violations) + f" ({note})"
        return Outcome(
            exc.reason,
            1,
            shim.cni_error(
                version,
                decisions.cni_code(exc.reason),
                f"multus-guard: {first.reason}: {first.message}",
                details,
            ),
            message=details,
        )

    def _finish(self, outcome: Outcome, req: request.CniRequest | None, start: float) -> Outcome:
        total_s = self._clock.monotonic() - start
        guard_s = max(total_s - outcome.multus_s, 0.0)
        final = Outcome(
            outcome.reason, outcome.exit_code, outcome.stdout, guard_s, outcome.multus_s, outcome.message
        )
        self.metrics.decided(final.reason)
        if req is not None and req.command == "ADD":
            self.metrics.add_timing(guard_s=guard_s, multus_s=final.multus_s)
        fields = {
            "op": req.command if req else "?",
            "pod": f"{req.pod_namespace}/{req.pod_name}" if req else "",
            "pod_uid": (req.pod_uid or "") if req else "",
            "container": req.container_id if req else "",
            "netns": req.netns if req else "",
            "outcome": decisions.kind(final.reason).value,
            "reason": final.reason.value,
            "duration_ms": round(total_s * 1000, 1),
            "multus_ms": round(final.multus_s * 1000, 1),
        }
        level = logging.INFO if final.exit_code == 0 else logging.WARNING
        log.log(level, "cni request handled", extra={**fields, "detail": final.message})
        return final


def _network_part(
    doc: Mapping[str, object], by_claim: Mapping[str, Mapping[str, metadata_document.NetworkData]]
) -> dict[str, object] | None:
    return metadata_document.with_network_data(doc, by_claim.get(metadata_document.claim_uid(doc), {}))


def _log_verified_claims(
    req: request.CniRequest, expected: Sequence[shadow_checks.ExpectedInterface]
) -> None:
    """One INFO line per managed ResourceClaim whose interfaces Multus attached and the guard verified.

    Carries ``claim_uid`` (the same field the plugin logs at prepare), ``pod``, ``pod_uid``,
    ``ifname`` (comma-separated, in attach order) and ``nad``, so one log filter on a claim UID
    follows the claim from the plugin's prepare to its interfaces.
    """
    by_claim: dict[str, list[shadow_checks.ExpectedInterface]] = {}
    for e in expected:
        if e.claim_uid:
            by_claim.setdefault(e.claim_uid, []).append(e)
    for claim_uid, interfaces in by_claim.items():
        log.info(
            "claim interfaces verified",
            extra={
                "op": "ADD",
                "claim_uid": claim_uid,
                "pod": f"{req.pod_namespace}/{req.pod_name}",
                "pod_uid": req.pod_uid or "",
                "ifname": ",".join(e.ifname for e in interfaces),
                "nad": ",".join(e.network for e in interfaces),
            },
        )
