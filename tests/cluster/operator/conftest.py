"""Cluster-tier fixtures for the operator: CRDs installed once, a per-test harness.

The harness drives the two controllers synchronously against the real API server (no threads),
counts every write they make, creates test-scoped Nodes (labelled with a per-test run label that
the test's node policies select, so other tests' nodes never matter) and reads the generated
objects back. The operator namespace is the per-test ``namespace`` fixture; the NAD target
namespace of the operator-two-rails example (``ai-workloads``) becomes ``<namespace>-aiw``, created on request.
"""

from __future__ import annotations

import copy
import json
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest
import yaml
from kubernetes import client
from tests.fakes import operator_objects as oo

from sriov_dra.core.operator import conditions, dra_objects, dra_verdicts, network_refs, sriov_network
from sriov_dra.kube import apply, events, objects
from sriov_dra.operator import network_controller, policy_controller, settings, status
from sriov_dra_lab.fakes import heartbeats

T = TypeVar("T")
MANIFESTS = Path(objects.__file__).resolve().parents[1] / "manifests"
CRD_FILES = [
    MANIFESTS / "crds" / "sriovnetwork.openshift.io_sriovnetworks.yaml",
    MANIFESTS / "crds" / "sriovnetwork.openshift.io_sriovnetworknodepolicies.yaml",
    MANIFESTS / "crds" / "sriovnetwork.k8snetworkplumbingwg.io_deviceattributes.yaml",
    MANIFESTS / "crds" / "sriovnetwork.k8snetworkplumbingwg.io_sriovresourcepolicies.yaml",
]
RUN_LABEL = "sriov-dra.test/run"
SHADOW_SELECTOR = "sriovnetwork.k8snetworkplumbingwg.io/managed-by!=sriov-dra-plugin"


def eventually(what: str, fn: Callable[[], T | None], timeout_s: float = 30.0) -> T:
    """Poll ``fn`` until it returns a truthy value; fail naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout_s
    pause = threading.Event()
    last: T | None = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        pause.wait(0.1)
    pytest.fail(f"timed out after {timeout_s:.0f}s waiting for {what}; last value: {last!r}")


@pytest.fixture(scope="session")
def operator_crds(api: client.ApiClient) -> list[dict[str, Any]]:
    """The four CRDs, applied as an installation would, and established."""
    crds = [yaml.safe_load(p.read_text()) for p in CRD_FILES]
    apply.apply_objects(api, crds, force=True)
    apply.wait_crds_established(api, [c["metadata"]["name"] for c in crds])
    return crds


def strip(obj: dict[str, Any]) -> dict[str, Any]:
    """An object as written by a client: server-set metadata removed."""
    meta = {k: v for k, v in obj["metadata"].items() if k in ("name", "namespace", "labels", "annotations")}
    return {**{k: v for k, v in obj.items() if k not in ("metadata", "status")}, "metadata": meta}


class Harness:
    """Synchronous controllers of one test, with a write log. See the module docstring."""

    def __init__(
        self,
        api: client.ApiClient,
        namespace: str,
        *,
        admin_api: client.ApiClient | None = None,
        recorder: bool = False,
    ) -> None:
        self.api = admin_api or api
        self.ns = namespace
        self.target_ns = f"{namespace}-aiw"
        self.run = namespace
        self.writes: list[tuple[str, str, str]] = []
        self.admin = objects.Objects(self.api, field_manager="test-admin")
        self.client = objects.Objects(
            api,
            field_manager="sriov-dra-operator",
            on_write=lambda v, r, n: self.writes.append((v, str(r), n)),
        )
        self.config = settings.ReconcileSettings(namespace=namespace)
        rec = (
            events.Recorder(self.client, controller="sriov-dra-operator", instance="test")
            if recorder
            else None
        )
        self.writer = status.StatusWriter(self.client, recorder=rec)
        self.networks = network_controller.NetworkController(
            self.client, self.config, self.writer, self.marked
        )
        self.policies = policy_controller.PolicyController(
            self.client,
            self.config,
            self.writer,
            policies=lambda: self.client.list(objects.NODE_POLICY, self.ns).items,
            nodes=lambda: self.client.list(objects.NODE, label_selector=f"{RUN_LABEL}={self.run}").items,
        )
        self.extra_networks: set[network_refs.ObjectRef] = set()
        self.node_names: list[str] = []
        self.namespaces: list[str] = []

    # -- objects -----------------------------------------------------------------------------
    def marked(self, ref: network_refs.ObjectRef) -> list[network_refs.ObjectRef]:
        out = []
        for nad in self.admin.list(objects.NAD).items:
            marker = (nad["metadata"].get("annotations") or {}).get(network_refs.OWNER_REF_ANNOTATION)
            if network_refs.parse_owner_marker(marker) == ref:
                out.append(network_refs.ref_of(nad))
        return out

    def create_namespace(self, name: str) -> None:
        self.admin.create(
            objects.NAMESPACE, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        )
        self.namespaces.append(name)

    def add_node(self, name: str, **labels: str) -> str:
        full = f"{self.run[:40]}-{name}"
        heartbeats.ensure_node(
            self.api,
            full,
            labels={**oo.DUAL_RAIL, RUN_LABEL: self.run, "kubernetes.io/hostname": full, **labels},
        )
        self.node_names.append(full)
        return full

    def selector(self, **extra: str) -> dict[str, str]:
        return {**oo.DUAL_RAIL, RUN_LABEL: self.run, **extra}

    def network(self, name: str, **kw: Any) -> dict[str, Any]:
        kw.setdefault("network_namespace", self.target_ns)
        body = oo.sriov_network(name, namespace=kw.pop("namespace", self.ns), **kw)
        return self.admin.create(objects.SRIOV_NETWORK, body)

    def policy(self, name: str, *, pf: str, dra: dict[str, Any] | None, **kw: Any) -> dict[str, Any]:
        kw.setdefault("node_selector", self.selector())
        body = oo.node_policy(name, uid="", pf=pf, dra=dra, namespace=self.ns, **kw)
        del body["metadata"]["uid"], body["metadata"]["generation"]
        return self.admin.create(objects.NODE_POLICY, body)

    def rails(self) -> list[dict[str, Any]]:
        """The two operator-two-rails policies (references into this test's operator namespace)."""
        return [
            self.policy(
                "rail-a-policy", pf="ens1f0", dra={"attributes": oo.reference("rail-a-net", self.ns)}
            ),
            self.policy(
                "rail-b-policy", pf="ens2f0", dra={"attributes": oo.reference("rail-b-net", self.ns)}
            ),
        ]

    # -- controllers -------------------------------------------------------------------------
    def reconcile_networks(self) -> list[network_controller.Result]:
        refs = {network_refs.ref_of(n) for n in self.admin.list(objects.SRIOV_NETWORK, self.ns).items}
        refs |= {ref for ref in self.extra_networks}
        return [self.networks.reconcile(ref) for ref in sorted(refs)]

    def reconcile_policies(self) -> policy_controller.Result:
        return self.policies.reconcile()

    def settle(self) -> policy_controller.Result:
        self.reconcile_networks()
        return self.reconcile_policies()

    # -- reads -------------------------------------------------------------------------------
    def condition(self, policy: str) -> dict[str, Any] | None:
        cond = conditions.find(
            self.admin.get(objects.NODE_POLICY, policy, self.ns), dra_verdicts.CONDITION_TYPE
        )
        return None if cond is None else dict(cond)

    def reason(self, policy: str) -> str | None:
        cond = self.condition(policy)
        return None if cond is None else str(cond["reason"])

    def ready(self, network: str, namespace: str | None = None) -> dict[str, Any] | None:
        obj = self.admin.get(objects.SRIOV_NETWORK, network, namespace or self.ns)
        cond = conditions.find(obj, sriov_network.READY)
        return None if cond is None else dict(cond)

    def generated(self) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
        """(DeviceAttributes by name, SriovResourcePolicies by name), client-written fields only."""
        attrs = {
            o["metadata"]["name"]: strip(o) for o in self.admin.list(objects.DEVICE_ATTRIBUTES, self.ns).items
        }
        srps = {
            o["metadata"]["name"]: strip(o) for o in self.admin.list(objects.RESOURCE_POLICY, self.ns).items
        }
        return attrs, srps

    def uid(self, policy: str) -> str:
        return str(self.admin.get(objects.NODE_POLICY, policy, self.ns)["metadata"]["uid"])

    def cleanup(self) -> None:
        generated = self.admin.list(
            objects.DEVICE_CLASS, label_selector=dra_objects.device_class_selector(self.ns)
        )
        for obj in generated.items:
            self.admin.delete(objects.DEVICE_CLASS, obj["metadata"]["name"])
        for name in self.node_names:
            heartbeats.delete_node(self.api, name)
        for ns in self.namespaces:
            self.admin.delete(objects.NAMESPACE, ns)


@pytest.fixture
def harness(api: client.ApiClient, namespace: str, operator_crds: list[dict[str, Any]]) -> Iterator[Harness]:
    h = Harness(api, namespace)
    try:
        yield h
    finally:
        h.cleanup()


def audit_writes(path: Path, since_line: int, namespaces: set[str]) -> list[str]:
    """NAD write requests in the audit log after ``since_line`` for objects in ``namespaces``."""
    out = []
    lines = path.read_text().splitlines() if path.exists() else []
    for line in lines[since_line:]:
        try:
            event = json.loads(line)
        except ValueError:
            continue
        ref = event.get("objectRef") or {}
        if (
            ref.get("resource") == "network-attachment-definitions"
            and ref.get("namespace") in namespaces
            and event.get("verb") in ("create", "update", "patch", "delete")
        ):
            out.append(f"{event.get('verb')} {ref.get('namespace')}/{ref.get('name')}")
    return out


def line_count(path: Path) -> int:
    return len(path.read_text().splitlines()) if path.exists() else 0


def copy_of(obj: dict[str, Any]) -> dict[str, Any]:
    return copy.deepcopy(obj)
