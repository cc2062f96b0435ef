"""``sriov-dra lab demo`` (``make lab``): the whole product end to end on one machine, then a verdict.

Phases, each on a clean lab state, each ending with its workloads deleted and a leftover count:

1. start the lab as ``lab up`` does (:func:`~sriov_dra_lab.console.start`; control plane, two
   simulated nodes with two rails each, ``playbooks/lab.yml`` with the collection's roles (one summary line per role),
   plugins, guards, Multus, IPAM, operator);
2. ``examples/gpu-nic-pairs``: the GPU/NIC pairs example, applied unchanged (the lab's PF names,
   node label and documentation CIDRs already match it); the correlation table
   (docs/design.md#correlation), once the claim's ``networkData`` names each VF's interface,
   addresses and MAC (checked against the Pod's network namespace); the completion checks
   (docs/design.md#completion: two GPUs and two VFs, pairwise equal pcieRoot, each VF's address in
   its own rail's subnet with both rails used, no networks annotation or resourceName in the
   workload, source NADs unchanged, zero ResourceClaim/ResourceSlice reads by Multus in the audit
   log);
3. ``examples/one-network-deviceclass``: one NAD named once in a DeviceClass;
4. ``examples/operator-two-rails``: SriovNetwork + SriovNetworkNodePolicy through the operator,
   the plugins restarted on the operator's namespace (an operator-managed install), the
   gpu-nic-pairs workload;
5. stop everything; print ``PASS`` or ``FAIL`` with the failed checks, on one line.

The correlation is computed by an injected inspector (``sriov-dra inspect``'s functions, which
live in the CLI layer above this one).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sriov_dra.core.plugin import device_metadata
from sriov_dra.kube import objects
from sriov_dra_lab import console, leftovers, paths, pod_metadata, processes, stack, stack_base, workloads

EXAMPLES = paths.REPO / "examples"
PAIRS = EXAMPLES / "gpu-nic-pairs" / "multus-auto-gpu-nic-pairs.yaml"
ONE_NETWORK = EXAMPLES / "one-network-deviceclass"
OPERATOR = EXAMPLES / "operator-two-rails"
RAIL_SUBNETS = ("192.0.2.0/24", "198.51.100.0/24")
MULTUS_USER = "system:serviceaccount:kube-system:multus"
NAD = objects.NAD
NODE_POLICY = objects.NODE_POLICY
SRIOV_NETWORK = objects.SRIOV_NETWORK
NETWORK_DATA_WAIT_S = 45.0
"""Seconds to wait for the claim's networkData (the Pod watch writes it at once; a repair pass every 30 s)."""


class InspectedRow(Protocol):
    """What the demo reads from one correlated VF (``sriov_dra.cli.inspect_rows.Row``)."""

    @property
    def claim(self) -> str: ...
    @property
    def request(self) -> str: ...
    @property
    def device(self) -> str: ...
    @property
    def interface(self) -> str: ...
    @property
    def ips(self) -> tuple[str, ...]: ...
    @property
    def claim_ips(self) -> tuple[str, ...]: ...
    @property
    def subnet(self) -> str: ...
    @property
    def gpus(self) -> tuple[str, ...]: ...
    @property
    def shadow(self) -> str: ...
    @property
    def checks(self) -> dict[str, bool]: ...
    @property
    def ok(self) -> bool: ...


class Inspector(Protocol):
    """Correlates a Pod's VFs (``inspect_pod``) and renders them (``render_table``)."""

    def inspect(
        self, client: objects.Objects, namespace: str, name: str, netns: str | None
    ) -> Sequence[InspectedRow]:
        """The rows of Pod ``namespace/name`` (``netns``: its sandbox, read on the node)."""
        ...

    def render(self, rows: Sequence[InspectedRow]) -> str:
        """The correlation table."""
        ...


@dataclass
class Verdict:
    """Checks made so far: ``name → (passed, detail)`` in order."""

    checks: list[tuple[str, bool, str]] = field(default_factory=list)
    sections: list[str] = field(default_factory=list)

    def check(self, name: str, passed: bool, detail: str = "") -> bool:
        """Record one check and print it."""
        self.checks.append((name, passed, detail))
        mark = "ok  " if passed else "FAIL"
        print(f"    [{mark}] {name}" + (f": {detail}" if detail else ""), flush=True)
        return passed

    def expect(self, name: str, expected: object, got: object) -> bool:
        """Record one check that ``got == expected``, printed as ``<name>: expected X, got Y``.

        Shapes: lists and tuples print as ``[a, b]`` (``[]`` when empty), anything else with ``str``.
        """
        return self.check(name, got == expected, f"expected {_shown(expected)}, got {_shown(got)}")

    @property
    def passed(self) -> bool:
        """True when every check passed (and there was at least one)."""
        return bool(self.checks) and all(ok for _, ok, _ in self.checks)

    def line(self, elapsed_s: float, held_s: float = 0.0) -> str:
        """The final one-line verdict; ``elapsed_s`` is the demo's own time (``held_s`` excluded).

        Units: seconds; ``held_s`` is the time spent at the ``--hold`` pause, named when non-zero.
        """
        failed = [n for n, ok, _ in self.checks if not ok]
        if not failed and self.checks:
            covered = ", ".join(self.sections) or "no section"
            held = f" (demo time; {held_s:.0f} s at the --hold pause not counted)" if held_s >= 0.5 else ""
            return f"PASS: all {len(self.checks)} checks passed ({covered}) in {elapsed_s:.0f} s{held}"
        return f"FAIL: {len(failed)} of {len(self.checks)} checks failed: {', '.join(failed) or 'none ran'}"


say = console.say


def _shown(value: object) -> str:
    """``value`` as a check line shows it: sequences as ``[a, b]``."""
    if isinstance(value, list | tuple):
        return f"[{', '.join(str(v) for v in value)}]"
    return str(value)


def multus_dra_reads(audit_log: Path) -> int:
    """Requests Multus's identity made to ``resource.k8s.io`` (claims, slices, classes) so far."""
    count = 0
    if not audit_log.exists():
        return 0
    for line in audit_log.read_text(errors="replace").splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        user = (event.get("user") or {}).get("username")
        group = (event.get("objectRef") or {}).get("apiGroup")
        if user == MULTUS_USER and group == "resource.k8s.io":
            count += 1
    return count


def multus_requests(audit_log: Path) -> int:
    """Every audited request of Multus's identity (proves Multus actually ran and was audited)."""
    if not audit_log.exists():
        return 0
    return sum(1 for line in audit_log.read_text(errors="replace").splitlines() if MULTUS_USER in line)


def _workload_text_clean(docs: Sequence[Mapping[str, Any]]) -> tuple[bool, str]:
    """No user networks annotation and no resourceName in DeviceClasses, claim templates, Pods."""
    bad = []
    for doc in docs:
        if doc.get("kind") not in ("DeviceClass", "ResourceClaimTemplate", "Pod"):
            continue
        text = json.dumps(doc)
        if "k8s.v1.cni.cncf.io/networks" in text or "resourceName" in text:
            bad.append(f"{doc['kind']}/{doc['metadata']['name']}")
    return (not bad, ", ".join(bad) or "DeviceClasses, ResourceClaimTemplate and Pod name no network")


def _sources(client: objects.Objects, namespace: str, names_: Sequence[str]) -> dict[str, tuple[str, str]]:
    out = {}
    for name in names_:
        nad = client.get_or_none(NAD, name, namespace)
        if nad is not None:
            out[name] = (
                str(nad["metadata"].get("resourceVersion")),
                str((nad.get("spec") or {}).get("config")),
            )
    return out


class Demo:
    """Runs the phases of the module docstring against a started :class:`LabStack`."""

    def __init__(
        self, lab: stack.LabStack, inspector: Inspector, verdict: Verdict, *, hold: bool = False
    ) -> None:
        self.lab = lab
        self.inspector = inspector
        self.verdict = verdict
        self.hold = hold
        self.held_s = 0.0
        """Seconds spent at the ``--hold`` pause (left out of the verdict's time)."""
        self.client = objects.Objects(lab.api, field_manager="lab-user")

    def _netns(self, pod: Mapping[str, Any]) -> str | None:
        return self.lab.pod_netns(pod)

    def show_pod(
        self, namespace: str, name: str, *, expect_vfs: int, rails: Sequence[str]
    ) -> list[InspectedRow]:
        """Wait for the Pod, print its table, check rows, rails and pairs."""
        v = self.verdict
        try:
            pod = workloads.wait_running(self.lab.api, namespace, name, timeout_s=180)
        except workloads.WaitTimeout as exc:
            v.check(f"{namespace}/{name} running", False, str(exc))
            return []
        netns = self._netns(pod)

        def with_network_data() -> list[InspectedRow] | None:
            found = list(self.inspector.inspect(self.client, namespace, name, netns))
            return found if found and all(r.claim_ips for r in found) else None

        try:
            rows = workloads.eventually("claim networkData", with_network_data, timeout_s=NETWORK_DATA_WAIT_S)
        except workloads.WaitTimeout:
            rows = list(self.inspector.inspect(self.client, namespace, name, netns))
        entries = self._metadata_entries(pod, rows)
        table = pod_metadata.with_column(
            self.inspector.render(rows),
            len(rows),
            pod_metadata.TITLE,
            [pod_metadata.cell(e) for e in entries],
        )
        say("")
        for line in table.splitlines():
            say(f"    {line}")
        say("")
        v.expect(
            f"{name}: VFs correlated end to end (rows passing every check)",
            expect_vfs,
            sum(r.ok for r in rows)
            if len(rows) == expect_vfs
            else f"{sum(r.ok for r in rows)} of {len(rows)} rows",
        )
        v.expect(
            f"{name}: interfaces", [f"dra{i}" for i in range(expect_vfs)], sorted(r.interface for r in rows)
        )
        v.expect(f"{name}: rail subnets used", sorted(rails), sorted({r.subnet for r in rows}))
        v.expect(
            f"{name}: claim networkData of each VF holds its interface's addresses",
            sorted(f"{r.interface} {','.join(sorted(r.ips))}" for r in rows),
            sorted(f"{r.interface} {','.join(sorted(r.claim_ips))}" for r in rows),
        )
        v.expect(
            f"{name}: the metadata file in the container holds each VF's claim networkData",
            [self._claim_network_data(pod, r) for r in rows],
            [(e or {}).get("networkData") for e in entries],
        )
        return rows

    def _metadata_entries(
        self, pod: Mapping[str, Any], rows: Sequence[InspectedRow]
    ) -> list[dict[str, Any] | None]:
        """Each row's entry of its request's device metadata file, read in the container (a
        simulated node has none: its host file)."""
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        node = self.lab.node(pod["spec"]["nodeName"])
        texts: dict[tuple[str, str], str | None] = {}
        for claim in workloads.claims_of(self.lab.api, pod):
            claim_name = claim["metadata"]["name"]
            for request, path in pod_metadata.container_paths(claim).items():
                if node.real is not None:
                    text = pod_metadata.exec_cat(str(self.lab.cp.kubeconfig), namespace, name, path)
                else:
                    parts = device_metadata.host_file_parts(namespace, claim_name, request)
                    host = node.layout.plugins_dir.joinpath(stack_base.DRIVER_NAME, *parts)
                    text = host.read_text() if host.exists() else None
                texts[(claim_name, request)] = text
        return [
            pod_metadata.device_entry(texts.get((r.claim, device_metadata.base_request(r.request))), r.device)
            for r in rows
        ]

    def _claim_network_data(self, pod: Mapping[str, Any], row: InspectedRow) -> object:
        for claim in workloads.claims_of(self.lab.api, pod):
            for d in (claim.get("status") or {}).get("devices") or []:
                if (d.get("driver"), d.get("device")) == (stack_base.DRIVER_NAME, row.device):
                    return d.get("networkData")
        return None

    def teardown(self, docs: Sequence[Mapping[str, Any]], what: str) -> None:
        """Delete ``docs`` (Pods first), wait, and check that nothing is left anywhere."""
        pods = [d for d in docs if d.get("kind") == "Pod"]
        workloads.delete_docs(self.lab.api, pods, timeout_s=180)
        workloads.delete_docs(self.lab.api, [d for d in docs if d.get("kind") != "Pod"], timeout_s=180)

        def clean() -> leftovers.Leftovers | None:
            found = leftovers.collect(self.lab)
            return found if found.empty else None

        try:
            found = workloads.eventually("no leftovers", clean, timeout_s=60)
        except workloads.WaitTimeout:
            found = leftovers.collect(self.lab)
        self.verdict.check(
            f"{what}: leftovers after deletion (shadows, finalizers, selections, checkpoint records, "
            "CDI files, IP reservations)",
            found.empty,
            "expected none, got none"
            if found.empty
            else f"expected none, got {found.describe().replace(chr(10), '; ')}",
        )

    # ------------------------------------------------------------------ phases
    def pairs(self) -> None:
        """The gpu-nic-pairs example and the completion checks."""
        v = self.verdict
        say(
            f"\n== gpu-nic-pairs: two GPU/NIC pairs matched by PCIe root ({PAIRS.relative_to(EXAMPLES.parent)}, unchanged)"
        )
        docs = workloads.load(PAIRS)
        clean, detail = _workload_text_clean(docs)
        v.check("workload YAML has no networks annotation and no resourceName", clean, detail)
        admin = [d for d in docs if d["kind"] != "Pod"]
        workloads.apply_docs(self.lab.api, admin)
        before = _sources(self.client, "ai-workloads", ("rail-a-net", "rail-b-net"))
        workloads.apply_docs(self.lab.api, [d for d in docs if d["kind"] == "Pod"])
        rows = self.show_pod("ai-workloads", "gpu-sriov-pairs-demo", expect_vfs=2, rails=RAIL_SUBNETS)
        gpus = sorted({g for r in rows for g in r.gpus})
        v.check(
            "two distinct full GPUs, each paired with one VF on an equal pcieRoot",
            len(gpus) == 2 and all(r.checks.get("pcieRootEqual") for r in rows),
            "; ".join(gpus),
        )
        v.check(
            "source NADs unchanged",
            _sources(self.client, "ai-workloads", ("rail-a-net", "rail-b-net")) == before,
            "resourceVersion and spec.config of rail-a-net, rail-b-net",
        )
        if self.hold:
            self.pause("ai-workloads", "gpu-sriov-pairs-demo")
        audit = self.lab.cp.audit_log
        v.check(
            "Multus made zero DRA lookups (audit log)",
            multus_dra_reads(audit) == 0 and multus_requests(audit) > 0,
            f"expected 0 resource.k8s.io requests, got {multus_dra_reads(audit)} "
            f"(of {multus_requests(audit)} audited Multus requests)",
        )
        self.teardown(docs, "gpu-nic-pairs")
        v.sections.append("gpu-nic-pairs")

    def pause(self, namespace: str, name: str) -> None:
        """Keep the lab and the Pod running until Enter, with commands to look around."""
        pod = self.client.get(workloads.POD, name, namespace)
        say("")
        say(
            console.pod_hints(self.lab, namespace, name, node=pod["spec"]["nodeName"], netns=self._netns(pod))
        )
        self.held_s += console.hold("Press Enter to continue the demo (the Pod is deleted next).")

    def one_network(self) -> None:
        """The one-network-deviceclass example."""
        say(
            f"\n== one-network-deviceclass: one NAD for a DeviceClass ({ONE_NETWORK.relative_to(EXAMPLES.parent)})"
        )
        docs = workloads.load(ONE_NETWORK / "one-network.yaml") + workloads.load(ONE_NETWORK / "pod.yaml")
        workloads.apply_docs(self.lab.api, docs)
        self.show_pod("ai-workloads", "one-network-demo", expect_vfs=1, rails=RAIL_SUBNETS[:1])
        self.teardown(docs, "one-network-deviceclass")
        self.verdict.sections.append("one-network-deviceclass")

    def operator(self) -> None:
        """The operator-two-rails example: plugins on the operator namespace, SriovNetwork + node policies."""
        v = self.verdict
        say(
            f"\n== operator-two-rails: two rails through the operator ({OPERATOR.relative_to(EXAMPLES.parent)})"
        )
        how = "the plugin DaemonSet rolled out" if self.lab.plugin_as_daemonset else "the plugins restarted"
        say(f"    {how} with policy namespace {stack_base.OPERATOR_NAMESPACE} (operator-managed install)")
        self.lab.switch_plugin_policy_namespace(stack_base.OPERATOR_NAMESPACE)
        workload = workloads.load(OPERATOR / "workload.yaml")
        networks = workloads.load(OPERATOR / "sriov-networks-and-policies.yaml")
        workloads.apply_docs(self.lab.api, [d for d in workload if d["kind"] == "Namespace"])
        workloads.apply_docs(self.lab.api, networks)
        try:
            workloads.eventually("operator conditions Ready", self._operator_ready, timeout_s=90)
            v.check("node policies DRAConfigurationReady and SriovNetworks Ready", True)
        except workloads.WaitTimeout:
            v.check(
                "node policies DRAConfigurationReady and SriovNetworks Ready", False, self._operator_state()
            )
        workloads.apply_docs(self.lab.api, [d for d in workload if d["kind"] != "Namespace"])
        self.show_pod("ai-workloads", "gpu-sriov-pairs-demo", expect_vfs=2, rails=RAIL_SUBNETS)
        self.teardown([*networks, *workload], "operator-two-rails")
        v.sections.append("operator-two-rails")
        self.lab.switch_plugin_policy_namespace(stack_base.POLICY_NAMESPACE)

    def _conditions(self) -> dict[str, str]:
        out = {}
        for res, kind in ((NODE_POLICY, "DRAConfigurationReady"), (SRIOV_NETWORK, "Ready")):
            for obj in self.client.list(res, stack_base.OPERATOR_NAMESPACE).items:
                conds = {c.get("type"): c for c in (obj.get("status") or {}).get("conditions") or []}
                c = conds.get(kind) or {}
                out[f"{res.kind}/{obj['metadata']['name']}"] = (
                    f"{kind}={c.get('status', '?')} {c.get('reason', '')}".strip()
                )
        return out

    def _operator_ready(self) -> bool:
        state = self._conditions()
        return len(state) == 4 and all("=True" in s for s in state.values())

    def _operator_state(self) -> str:
        return "; ".join(f"{k}: {v}" for k, v in sorted(self._conditions().items())) or "no objects"


def run(
    *,
    workdir: Path,
    inspector: Inspector,
    multus_mode: str = "thin",
    hold: bool = False,
    phases: Sequence[str] = ("pairs", "one-network", "operator"),
    real_nodes: bool = False,
) -> int:
    """Run the demo (see the module docstring); returns 0 on PASS, 1 on FAIL, 2 when the lab cannot start.

    The verdict's time is the demo's own: the ``--hold`` pause is left out (and named).

    Raises: ``binaries.BinaryMissing`` / ``processes.ProcessFailed`` when the lab cannot start.
    """
    start = time.monotonic()
    verdict = Verdict()
    lab = console.start(workdir, multus_mode=multus_mode, real_nodes=real_nodes)
    if lab is None:
        return 2
    try:
        demo = Demo(lab, inspector, verdict, hold=hold)
        steps: dict[str, Callable[[], None]] = {
            "pairs": demo.pairs,
            "one-network": demo.one_network,
            "operator": demo.operator,
        }
        for phase in phases:
            try:
                steps[phase]()
            except (workloads.WaitTimeout, processes.ProcessFailed, ValueError) as exc:
                verdict.check(f"phase {phase}", False, str(exc))
    finally:
        say(f"\n== stopping the lab (logs stay in {lab.logs_dir})")
        lab.stop()
    say(verdict.line(time.monotonic() - start - demo.held_s, demo.held_s))
    return 0 if verdict.passed else 1
