"""Per-test objects of the cni tier: source NADs, Pods, shadows and sandboxes on a real API server.

A :class:`World` is one test's namespace on the session's :class:`~sriov_dra_lab.cni_node.CniNode`.
Shadows are planned with the real ``core`` contracts (``tests.fakes.managed_pods``), created on
the API server, and the Pod is annotated with its selections and registry exactly as the plugin
would; its managed bindings are recorded, under the Pod's UID, in the checkpoint the guard's shim
reads (``CniNode.plugin_checkpoint``, written by the plugin's own ``CheckpointStore``). Tests then break one thing and run the runtime's CNI chain through the guard.
Cleanup (in :meth:`World.close`): sandboxes removed, lab VFs deleted, checkpoint records dropped,
shadow finalizers removed so the namespace can go.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.rest import ApiException
from tests import waiting
from tests.fakes import checkpoint_records as cr
from tests.fakes import managed_pods as mp

from sriov_dra.core import registry
from sriov_dra.host import checkpoint
from sriov_dra_lab import cni, cni_node, netns
from sriov_dra_rules import names

T = TypeVar("T")
GROUP, VERSION, PLURAL = "k8s.cni.cncf.io", "v1", "network-attachment-definitions"
WHEREABOUTS_NS = "kube-system"
VERIFICATION_FAILURES = tuple(
    f"multus-guard: {r}:" for r in ("InterfacesMissing", "InterfaceDeviceMismatch", "NetworkStatusMissing")
)


@dataclass(frozen=True)
class Rail:
    """One rail: its source template NAD and the lab VF standing for its allocated VF."""

    source: str
    cni_name: str
    pci: str
    subnet: str
    ipam: str  # "host-local" or "whereabouts"


RAIL_A = Rail("rail-a-net", "rail-a", "0000:03:00.1", "192.0.2.0/24", "host-local")
RAIL_B = Rail("rail-b-net", "rail-b", "0000:80:00.1", "198.51.100.0/24", "whereabouts")
DELEGATE_DELS = ["sriov", "whereabouts", "sriov", "host-local", "tuning", "macvlan", "host-local"]
"""The plugin DELs under Multus's for a managed Pod on rails A and B, in the order Multus runs them
(the selections last to first, each sriov before its IPAM, then the primary's chain)."""


def eventually(what: str, fn: Callable[[], T | None], timeout_s: float = 30.0) -> T:
    """Poll ``fn`` every 0.1 s until truthy; fail naming ``what`` after ``timeout_s``."""
    return waiting.eventually(what, fn, timeout_s=timeout_s, interval_s=0.1)


@dataclass
class ManagedPod:
    """A Pod with its created shadows and registry entries."""

    name: str
    uid: str
    shadows: list[dict[str, Any]]
    planned: list[mp.PlannedShadow]
    entries: list[registry.RegistryEntry]


class World:
    """One test's objects (see the module docstring)."""

    def __init__(self, node: cni_node.CniNode, api: client.ApiClient, namespace: str) -> None:
        self.node = node
        self.api = api
        self.namespace = namespace
        self.core = client.CoreV1Api(api)
        self.custom = client.CustomObjectsApi(api)
        self._sandboxes: list[str] = []
        self.vfs = netns.create_vfs([RAIL_A.pci, RAIL_B.pci], prefix="cvf")
        node.use_vfs(self.vfs)
        self._shadows: list[tuple[str, str]] = []
        self._namespaces: list[str] = []
        node.plugin_checkpoint.parent.mkdir(parents=True, exist_ok=True)
        self.checkpoint = checkpoint.CheckpointStore(node.plugin_checkpoint)
        self.checkpoint.load()
        self._claims: list[str] = []

    # ------------------------------------------------------------------ objects
    def extra_namespace(self) -> str:
        """Create another namespace for this test (deleted at close)."""
        name = f"{self.namespace[:55]}-x{len(self._namespaces)}"
        self.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
        self._namespaces.append(name)
        return name

    def template(self, rail: Rail) -> dict[str, Any]:
        """The administrator's template for ``rail`` (no deviceID)."""
        if rail.ipam == "host-local":
            ipam: dict[str, Any] = {
                "type": "host-local",
                "dataDir": str(self.node.host_local_dir),
                "ranges": [[{"subnet": rail.subnet}]],
            }
        else:
            ipam = {
                "type": "whereabouts",
                "range": rail.subnet,
                "network_name": rail.cni_name,
                "configuration_path": str(self.node.whereabouts_conf),
            }
        return {"cniVersion": "1.0.0", "name": rail.cni_name, "type": "sriov", "ipam": ipam}

    def source(self, rail: Rail) -> dict[str, Any]:
        """Create (or read) the source template NAD of ``rail``."""
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NetworkAttachmentDefinition",
            "metadata": {"name": rail.source, "namespace": self.namespace},
            "spec": {"config": json.dumps(self.template(rail))},
        }
        try:
            created: dict[str, Any] = self.custom.create_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, body
            )
        except ApiException as exc:
            if exc.status != 409:
                raise
            created = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, self.namespace, PLURAL, rail.source
            )
        return created

    def pod(
        self, name: str, *, node_name: str | None = None, annotations: dict[str, str] | None = None
    ) -> dict[str, Any]:
        """Create Pod ``name`` bound to the lab node (it never runs: there is no kubelet)."""
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name, "annotations": annotations or {}},
            "spec": {
                "nodeName": node_name or self.node.settings.node_name,
                "containers": [{"name": "c", "image": "registry.k8s.io/pause:3.10"}],
                "terminationGracePeriodSeconds": 0,
            },
        }
        return self.read_pod(self.core.create_namespaced_pod(self.namespace, body).metadata.name)

    def read_pod(self, name: str) -> dict[str, Any]:
        """The live Pod as JSON."""
        pod = self.core.read_namespaced_pod(name, self.namespace)
        doc: dict[str, Any] = self.api.sanitize_for_serialization(pod)
        return doc

    def pod_exists(self, name: str) -> bool:
        """True while Pod ``name`` can be read (``False`` once it is gone)."""
        try:
            self.core.read_namespaced_pod(name, self.namespace)
        except ApiException as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def create_nad(self, body: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """Create a NAD (remembered for finalizer cleanup)."""
        ns = namespace or body["metadata"].get("namespace") or self.namespace
        body = dict(body, metadata=dict(body["metadata"], namespace=ns))
        created: dict[str, Any] = self.custom.create_namespaced_custom_object(
            GROUP, VERSION, ns, PLURAL, body
        )
        self._shadows.append((ns, created["metadata"]["name"]))
        return created

    def patch_nad(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        """Merge-patch a NAD."""
        self.custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name, patch)

    def delete_nad(self, namespace: str, name: str) -> None:
        """Request deletion of a NAD (finalizers may hold it)."""
        self.custom.delete_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)

    def get_nad(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The live NAD, or ``None``."""
        try:
            doc: dict[str, Any] = self.custom.get_namespaced_custom_object(
                GROUP, VERSION, namespace, PLURAL, name
            )
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return doc

    def annotate_pod(self, name: str, annotations: dict[str, str | None]) -> None:
        """Merge-patch the Pod's annotations (``None`` removes a key)."""
        self.core.patch_namespaced_pod(name, self.namespace, {"metadata": {"annotations": annotations}})

    def managed_pod(
        self,
        name: str,
        rails: Sequence[Rail] = (RAIL_A, RAIL_B),
        *,
        manual: Sequence[str] = (),
        edit_shadow: Callable[[int, dict[str, Any]], None] | None = None,
        before_annotation: Callable[[dict[str, Any]], None] | None = None,
    ) -> ManagedPod:
        """Create a Pod with one shadow per rail (``dra0``, ``dra1``, ...), selections and registry.

        ``edit_shadow(index, body)`` may change a shadow's body before it is created;
        ``before_annotation(pod)`` sees the created Pod before the plugin's annotations land.
        """
        pod = self.pod(name)
        uid = pod["metadata"]["uid"]
        if before_annotation is not None:
            before_annotation(pod)
        planned, created, entries = [], [], []
        for index, rail in enumerate(rails):
            plan = mp.plan_shadow(
                pod_namespace=self.namespace,
                pod_name=name,
                pod_uid=uid,
                source=self.source(rail),
                pci=rail.pci,
                interface=f"dra{index}",
                device=f"vf-{index}",
                node_name=self.node.settings.node_name,
                node_uid=self.node.node.uid if self.node.node else mp.NODE_UID,
            )
            body = json.loads(json.dumps(plan.nad))
            if edit_shadow is not None:
                edit_shadow(index, body)
            nad = self.create_nad(body)
            planned.append(plan)
            created.append(nad)
            entries.append(mp.registry_entry(plan, nad["metadata"]["uid"]))
        self.record_bindings(uid, len(rails))
        annotations: dict[str, str | None] = dict(mp.managed_annotations(uid, entries, manual=manual))
        self.annotate_pod(name, annotations)
        return ManagedPod(name=name, uid=uid, shadows=created, planned=planned, entries=entries)

    def record_bindings(self, pod_uid: str, count: int) -> None:
        """Record ``count`` managed bindings of Pod ``pod_uid`` in the plugin's checkpoint, as prepare does.

        Only the Pod UID matters to the guard's shim; the rest is a valid record (``tests.fakes``).
        """
        claim_uid = str(uuid.uuid4())
        self.checkpoint.set_claim(cr.record(claim_uid, pod_uid, indexes=tuple(range(count))))
        self._claims.append(claim_uid)

    # ------------------------------------------------------------------ CNI
    def sandbox(self) -> str:
        """A fresh network namespace for one Pod sandbox (removed at close)."""
        name = netns.unique_name("csb")
        path = netns.net_edit.create_netns(name)
        self._sandboxes.append(path)
        return path

    def attachment(
        self, pod: str, *, uid: str | None, sandbox: str | None = None, container_id: str | None = None
    ) -> cni.Attachment:
        """The runtime's values for a new sandbox of ``pod``."""
        return self.node.attachment(
            sandbox or self.sandbox(),
            namespace=self.namespace,
            name=pod,
            uid=uid,
            container_id=container_id or f"c-{uuid.uuid4().hex[:12]}",
        )

    def add(self, mode: str, att: cni.Attachment, **kw: Any) -> cni.CniResult:
        """CNI ADD through the runtime's first config (the guard)."""
        return self.node.run(mode, "ADD", att, **kw)

    def attach(
        self, mode: str, pod: str, *, uid: str | None, attempts: int = 3, **kw: Any
    ) -> tuple[cni.Attachment, cni.CniResult]:
        """ADD like the kubelet: a new sandbox per attempt, retried only after a failed verification.

        Thick Multus reads the Pod from its informer, which can lag the plugin's annotation patch by
        a moment; the guard then refuses the primary-only result (Multus DEL already ran) and the
        kubelet retries. Any other failure is returned at once.
        """
        for _ in range(attempts):
            att = self.attachment(pod, uid=uid)
            result = self.add(mode, att, **kw)
            msg = (result.error or {}).get("msg", "")
            if result.ok or not msg.startswith(VERIFICATION_FAILURES):
                break
        return att, result

    def attached(self, mode: str, name: str) -> tuple[ManagedPod, cni.Attachment]:
        """A managed Pod on rails A and B, attached through the guard with :meth:`attach` (ADD must pass)."""
        pod = self.managed_pod(name)
        att, added = self.attach(mode, pod.name, uid=pod.uid)
        assert added.ok, added.stdout + added.stderr
        return pod, att

    def delete(self, mode: str, att: cni.Attachment, **kw: Any) -> cni.CniResult:
        """CNI DEL through the runtime's first config (passed to Multus by the shim)."""
        return self.node.run(mode, "DEL", att, **kw)

    def ippool_allocations(self, rail: Rail) -> dict[str, Any]:
        """The whereabouts IPPool allocations of ``rail`` (``{}`` when the pool does not exist)."""
        pool = f"{rail.cni_name}-{rail.subnet.replace('/', '-')}"
        try:
            doc = self.custom.get_namespaced_custom_object(
                "whereabouts.cni.cncf.io", "v1alpha1", WHEREABOUTS_NS, "ippools", pool
            )
        except ApiException as exc:
            if exc.status == 404:
                return {}
            raise
        allocations: dict[str, Any] = doc.get("spec", {}).get("allocations") or {}
        return allocations

    def host_local_files(self, rail: Rail) -> list[str]:
        """IP reservation files of host-local for ``rail``'s network."""
        directory = self.node.host_local_dir / rail.cni_name
        if not directory.exists():
            return []
        return sorted(
            p.name for p in directory.iterdir() if not p.name.startswith(("last_reserved_ip", "lock"))
        )

    def host_local_reservations(self, network: str) -> dict[str, str]:
        """host-local's reservations of CNI network ``network``: ``{ip: container ID}``.

        ``network`` is the CNI ``name`` (a rail's ``cni_name``, or ``lab-primary`` for the primary).
        """
        directory = self.node.host_local_dir / network
        if not directory.exists():
            return {}
        return {
            p.name: p.read_text().splitlines()[0].strip()
            for p in directory.iterdir()
            if not p.name.startswith(("last_reserved_ip", "lock"))
        }

    def multus_cache_dir(self, mode: str) -> Path:
        """Multus's delegate cache dir (``cniDir``) for ``mode``: ``<dir>/<container ID>`` per sandbox."""
        if mode == "thin":
            return self.node.thin_cache
        assert self.node.thick is not None
        return self.node.thick.cache_dir

    def add_vfs(self, pcis: Sequence[str]) -> list[netns.LabVf]:
        """Create more lab VFs (deleted at close) and add them to the node's VF map."""
        made = netns.create_vfs(list(pcis), prefix="cvx")
        self.vfs.extend(made)
        self.node.use_vfs(self.vfs)
        return made

    def status_entries(self, pod: str) -> list[dict[str, Any]]:
        """The Pod's live network-status entries."""
        text = self.read_pod(pod)["metadata"].get("annotations", {}).get(names.NETWORK_STATUS_ANNOTATION)
        return json.loads(text) if text else []

    # ------------------------------------------------------------------ cleanup
    def close(self) -> None:
        """Remove sandboxes and lab VFs; release shadow finalizers so the namespace can be deleted."""
        for claim_uid in self._claims:  # releaseComplete first: a managed record is deleted only then
            self.checkpoint.mark_managed_deleting(claim_uid)
            self.checkpoint.mark_managed_release_complete(claim_uid)
            self.checkpoint.delete_claim(claim_uid)
        self.checkpoint.close()
        for path in self._sandboxes:
            netns.remove_sandbox(path)
        netns.delete_vfs(self.vfs)
        self.node.use_vfs([])
        for ns, name in self._shadows:
            with contextlib.suppress(ApiException):
                self.patch_nad(ns, name, {"metadata": {"finalizers": None}})
        for ns in self._namespaces:
            with contextlib.suppress(ApiException):
                self.core.delete_namespace(ns)
