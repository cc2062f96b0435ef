"""Builders of managed Pods and shadow NADs as the plugin writes them, for the guard's tests.

Everything is produced by the real ``sriov_dra.core`` contracts: identities and attachmentIDs
(``core.identities``), the frozen config (``core.render``), the binding annotation and shadow
object (``core.binding_annotation``, ``core.plugin.shadow_object``), the registry (``core.registry``). Unit tests use the
plain dicts (adding the ``uid`` the API server would set); cni tests create them on a real API
server and read back the server-set UIDs. Tests then break one rule to prove one check.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sriov_dra.core import binding_annotation, identities, registry, render
from sriov_dra.core.plugin import shadow_object
from sriov_dra_rules import names

NODE_NAME = "node-a"
NODE_UID = "0b7c6f2e-5a1d-4c3e-9f10-2a3b4c5d6e7f"
POD_UID = "11111111-2222-3333-4444-555555555555"
CLAIM_UID = "c1a1c1a1-0000-4000-8000-000000000001"
SOURCE_UID = "5a5a5a5a-0000-4000-8000-00000000000a"


def source_nad(
    namespace: str,
    name: str,
    config: Mapping[str, Any],
    *,
    uid: str = SOURCE_UID,
    resource_version: str = "4711",
) -> dict[str, Any]:
    """A template (source) NAD as read from the API."""
    return {
        "apiVersion": shadow_object.NAD_API_VERSION,
        "kind": shadow_object.NAD_KIND,
        "metadata": {"name": name, "namespace": namespace, "uid": uid, "resourceVersion": resource_version},
        "spec": {"config": json.dumps(config)},
    }


def host_local_template(
    cni_name: str, subnet: str, *, data_dir: str = "/var/lib/cni/networks", **extra: Any
) -> dict[str, Any]:
    """A single-plugin sriov template with host-local IPAM on ``subnet``."""
    return {
        "cniVersion": "1.0.0",
        "name": cni_name,
        "type": "sriov",
        **extra,
        "ipam": {"type": "host-local", "dataDir": data_dir, "ranges": [[{"subnet": subnet}]]},
    }


@dataclass(frozen=True)
class PlannedShadow:
    """A shadow the plugin would create: the NAD body (without server fields) and its binding."""

    nad: dict[str, Any]
    binding: binding_annotation.Binding
    rendered: render.RenderedConfig

    @property
    def namespace(self) -> str:
        return str(self.nad["metadata"]["namespace"])

    @property
    def name(self) -> str:
        return str(self.nad["metadata"]["name"])

    @property
    def interface(self) -> str:
        return self.binding.interface


def plan_shadow(
    *,
    pod_namespace: str,
    pod_name: str,
    pod_uid: str,
    source: Mapping[str, Any],
    pci: str,
    interface: str,
    device: str,
    node_name: str = NODE_NAME,
    node_uid: str = NODE_UID,
    claim_uid: str = CLAIM_UID,
    pool: str = NODE_NAME,
) -> PlannedShadow:
    """Plan one shadow exactly as the plugin does (identity → render → binding → NAD)."""
    identity = identities.build_binding_identity(
        node_uid=node_uid, pod_uid=pod_uid, claim_uid=claim_uid, pool=pool, device=device
    )
    rendered = render.render_shadow_config(source, pci)
    meta = source["metadata"]
    binding = binding_annotation.Binding(
        attachment_id=identities.attachment_id(identity),
        pod_uid=identities.PodUid(pod_uid),
        claim_uid=identities.ClaimUid(claim_uid),
        node_name=node_name,
        node_uid=identities.NodeUid(node_uid),
        source=binding_annotation.SourceRef(
            namespace=meta["namespace"],
            name=meta["name"],
            uid=identities.ObjectUid(meta["uid"]),
            resource_version=meta["resourceVersion"],
        ),
        pci_address=identities.PciAddress(rendered.pci_address),
        interface=interface,
        config_sha256=rendered.config_sha256,
    )
    nad = shadow_object.build_shadow_nad(
        identity=identity, binding=binding, rendered=rendered, pod_namespace=pod_namespace, pod_name=pod_name
    )
    return PlannedShadow(nad=nad, binding=binding, rendered=rendered)


def plan_rails(
    pod_namespace: str, pod_name: str, rails: Sequence[tuple[str, str, str, str, str]]
) -> list[PlannedShadow]:
    """Plan one shadow per rail of a Pod with ``plan_shadow``, interfaces ``dra<i>`` on devices ``vf-<i>``.

    ``rails``: (source NAD name, host-local CNI name, subnet CIDR, VF PCI address, claim UID), each
    source in ``pod_namespace`` with a host-local template.
    """
    return [
        plan_shadow(
            pod_namespace=pod_namespace,
            pod_name=pod_name,
            pod_uid=POD_UID,
            source=source_nad(pod_namespace, src, host_local_template(cni, subnet)),
            pci=pci,
            interface=f"dra{i}",
            device=f"vf-{i}",
            claim_uid=claim,
        )
        for i, (src, cni, subnet, pci, claim) in enumerate(rails)
    ]


def registry_entry(planned: PlannedShadow, nad_uid: str) -> registry.RegistryEntry:
    """The registry entry for a created shadow whose server-set UID is ``nad_uid``."""
    b = planned.binding
    return registry.RegistryEntry(
        attachment_id=b.attachment_id,
        claim_uid=b.claim_uid,
        namespace=planned.namespace,
        name=planned.name,
        uid=identities.ObjectUid(nad_uid),
        interface=b.interface,
        config_sha256=b.config_sha256,
    )


def selection(entry: registry.RegistryEntry) -> str:
    """The managed selection's JSON text, as the merger writes it."""
    return json.dumps(
        {"name": entry.name, "namespace": entry.namespace, "interface": entry.interface},
        separators=(",", ":"),
    )


def managed_annotations(
    pod_uid: str, entries: Sequence[registry.RegistryEntry], *, manual: Sequence[str] = ()
) -> dict[str, str]:
    """Networks annotation (manual element texts, then managed tuples) and registry for a Pod."""
    texts = [*manual, *(selection(e) for e in entries)]
    out = {names.NETWORKS_ANNOTATION: "[" + ",".join(texts) + "]"}
    if entries:
        out[names.MANAGED_NETWORKS_ANNOTATION] = registry.encode_registry(
            registry.Registry(pod_uid=identities.PodUid(pod_uid), entries=tuple(entries))
        )
    return out


def pod(
    namespace: str,
    name: str,
    *,
    uid: str = POD_UID,
    node_name: str = NODE_NAME,
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Pod as read from the API (only what the guard reads)."""
    meta: dict[str, Any] = {"namespace": namespace, "name": name, "uid": uid, "resourceVersion": "1"}
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": {"nodeName": node_name}}


def with_uid(nad: Mapping[str, Any], uid: str) -> dict[str, Any]:
    """A deep copy of ``nad`` with the ``metadata.uid`` the API server would set."""
    out = copy.deepcopy(dict(nad))
    out["metadata"]["uid"] = uid
    return out
