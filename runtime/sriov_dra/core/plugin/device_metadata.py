"""KEP-5304 device metadata: the per-request file a container reads, its paths and CDI mount spec.

The layout and schema are those the Kubernetes 1.36 kubelet-plugin helper produces for a Go
driver (docs/design.md#device-metadata): one file per (claim, top-level request) holding one
``metadata.resource.k8s.io/v1alpha1`` ``DeviceMetadata`` document, written on the host under
``<plugin data dir>/dra-device-metadata/<namespace>_<claim>/<request>/metadata.json`` and
bind-mounted read-only through a CDI spec of kind ``<driver>/metadata`` into
``/var/run/kubernetes.io/dra-device-attributes/{resourceclaims|resourceclaimtemplates}/<name>/<request>/<driver>-metadata.json``.
The host writer is ``sriov_dra.host.device_metadata_files``. Pure.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Final

from sriov_dra.core import attributes, metadata_document
from sriov_dra.core.plugin import cdi_spec, nccl_hints
from sriov_dra_rules import errors, names

API_VERSION: Final = metadata_document.API_VERSION
KIND: Final = metadata_document.KIND
HOST_SUBDIR: Final = metadata_document.HOST_SUBDIR
HOST_FILE_NAME: Final = metadata_document.HOST_FILE_NAME
CONTAINER_DIR: Final = "/var/run/kubernetes.io/dra-device-attributes"
CLAIMS_SUBDIR: Final = "resourceclaims"
TEMPLATES_SUBDIR: Final = "resourceclaimtemplates"
FILE_SUFFIX: Final = "-metadata.json"
POD_CLAIM_NAME_ANNOTATION: Final = "resource.kubernetes.io/pod-claim-name"
CDI_CLASS: Final = "metadata"
CDI_VERSION: Final = "0.5.0"
"""The helper's version; it admits device names that start with a digit (claim UIDs do)."""
INTERFACE_NAME_ATTRIBUTE: Final = f"{names.DOMAIN}/interfaceName"
"""The Pod-side interface name, as upstream dra-driver-sriov adds it to the file's attributes."""
RDMA_DEVICE_ATTRIBUTE: Final = f"{names.DOMAIN}/rdmaDevice"
"""The VF's RDMA device (``mlx5_3``), when it has exactly one."""
PAIRED_GPU_ATTRIBUTE: Final = f"{names.DOMAIN}/pairedGpu"
"""The GPU a ``matchAttribute`` constraint pairs with the VF: ``<driver>/<pool>/<device>``."""
PAIRED_GPU_REQUEST_ATTRIBUTE: Final = f"{names.DOMAIN}/pairedGpuRequest"
PAIRED_BY_ATTRIBUTE: Final = f"{names.DOMAIN}/pairedBy"
"""The attribute whose value the pair shares (``resource.kubernetes.io/pcieRoot``)."""


@dataclass(frozen=True)
class ClaimIdentity:
    """The claim fields the file's ``metadata`` carries, and how the container path names it.

    Shapes: ``pod_claim_name`` is the value of the claim's ``resource.kubernetes.io/pod-claim-name``
    annotation (a claim made from a template), else ``None``.
    """

    namespace: str
    name: str
    uid: str
    pod_claim_name: str | None = None


@dataclass(frozen=True)
class MetadataDevice:
    """One device of a request as the file lists it.

    Shapes: ``attributes`` maps qualified names to scalar values (written sorted by key);
    ``network_data`` (the claim status's ``networkData`` form) ``None`` until it is known.
    """

    driver: str
    pool: str
    name: str
    attributes: Mapping[str, attributes.AttributeValue] = field(default_factory=dict, hash=False)
    network_data: metadata_document.NetworkData | None = None

    def to_json(self) -> dict[str, object]:
        """The ``requests[].devices[]`` entry; ``attributes``/``networkData`` omitted when empty."""
        out: dict[str, object] = {"driver": self.driver, "pool": self.pool, "name": self.name}
        if self.attributes:
            out["attributes"] = {k: self.attributes[k].to_json() for k in sorted(self.attributes)}
        if self.network_data is not None:
            out["networkData"] = self.network_data.to_json()
        return out


def claim_identity(claim: Mapping[str, object]) -> ClaimIdentity:
    """Read the claim's namespace, name, UID and pod-claim-name annotation.

    Raises: ContractViolation when namespace, name or UID is missing (a claim the API served
    always has them).
    """
    meta = claim.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    values = {k: meta.get(k) for k in ("namespace", "name", "uid")}
    missing = [k for k, v in values.items() if not isinstance(v, str) or not v]
    if missing:
        raise errors.ContractViolation(
            "cannot build device metadata",
            errors=[errors.FieldError(f"metadata.{k}", "must be a nonempty string") for k in missing],
        )
    annotations = meta.get("annotations")
    pod_claim = annotations.get(POD_CLAIM_NAME_ANNOTATION) if isinstance(annotations, Mapping) else None
    return ClaimIdentity(
        namespace=str(values["namespace"]),
        name=str(values["name"]),
        uid=str(values["uid"]),
        pod_claim_name=pod_claim if isinstance(pod_claim, str) and pod_claim else None,
    )


def document(claim: ClaimIdentity, request: str, devices: Sequence[MetadataDevice]) -> dict[str, object]:
    """The ``DeviceMetadata`` object of one request (``request`` as allocated, ``req/sub`` kept).

    Shapes: exactly one ``requests[]`` entry; ``metadata`` holds the claim's name, namespace and
    uid and the document's generation (1: the first write; ``metadata_document`` bumps it), as
    the helper fills it; ``podClaimName`` only for a template's claim.
    """
    out: dict[str, object] = {
        "apiVersion": API_VERSION,
        "kind": KIND,
        "metadata": {
            "name": claim.name,
            "namespace": claim.namespace,
            "uid": claim.uid,
            "generation": metadata_document.FIRST_GENERATION,
        },
    }
    if claim.pod_claim_name is not None:
        out["podClaimName"] = claim.pod_claim_name
    out["requests"] = [{"name": request, "devices": [d.to_json() for d in devices]}]
    return out


def base_request(request: str) -> str:
    """The top-level request name of ``req`` or ``req/sub`` (Kubernetes ``BaseRequestRef``)."""
    return request.split("/", 1)[0]


def host_claim_dir(namespace: str, name: str) -> str:
    """The claim's directory under the data dir's ``dra-device-metadata``: ``<ns>_<name>``.

    Raises: ContractViolation for a namespace or name that is not a DNS name (never a path).
    """
    _require(names.dns1123_label_problem(namespace), "namespace")
    _require(names.dns1123_subdomain_problem(name), "name")
    return f"{namespace}_{name}"


def host_file_parts(namespace: str, name: str, request: str) -> tuple[str, str, str, str]:
    """Path components of a request's file below the plugin data dir."""
    top = base_request(request)
    _require(names.dns1123_label_problem(top), "request")
    return HOST_SUBDIR, host_claim_dir(namespace, name), top, HOST_FILE_NAME


def container_path(claim: ClaimIdentity, request: str, driver: str) -> str:
    """Where a container reads the request's file (the helper's ``containerFilePath``)."""
    if claim.pod_claim_name is not None:
        sub, name = TEMPLATES_SUBDIR, claim.pod_claim_name
    else:
        sub, name = CLAIMS_SUBDIR, claim.name
    return f"{CONTAINER_DIR}/{sub}/{name}/{base_request(request)}/{driver}{FILE_SUFFIX}"


def cdi_kind(driver: str) -> str:
    """CDI kind of the metadata specs: ``<driver>/metadata``."""
    return f"{driver}/{CDI_CLASS}"


def cdi_device_name(claim_uid: str, request: str) -> str:
    """CDI device name of a request's mount: ``<claimUID>_<request>``."""
    name = f"{claim_uid}_{base_request(request)}"
    _require(cdi_spec.device_name_problem(name), "cdi device name")
    return name


def cdi_device_id(driver: str, claim_uid: str, request: str) -> str:
    """The ID the kubelet passes to the runtime: ``<driver>/metadata=<claimUID>_<request>``."""
    return cdi_spec.cdi_device_id(cdi_device_name(claim_uid, request), kind=cdi_kind(driver))


def cdi_spec_file_name(driver: str, claim_uid: str, request: str) -> str:
    """The spec file name in the CDI dir: ``<driver>_metadata_<claimUID>_<request>.json``."""
    return f"{driver}_{CDI_CLASS}_{cdi_device_name(claim_uid, request)}.json"


def cdi_spec_file_prefix(driver: str, claim_uid: str) -> str:
    """The name prefix every metadata spec file of one claim starts with."""
    _require(cdi_spec.device_name_problem(claim_uid), "claim uid")
    return f"{driver}_{CDI_CLASS}_{claim_uid}_"


def pairing_attributes(gpus: Sequence[nccl_hints.Gpu]) -> dict[str, attributes.AttributeValue]:
    """The GPU→NIC map as attributes of the VF (several GPUs comma-separated, in result order)."""
    if not gpus:
        return {}
    s = attributes.string_value
    return {
        PAIRED_GPU_ATTRIBUTE: s(",".join(f"{g.driver}/{g.pool}/{g.device}" for g in gpus)),
        PAIRED_GPU_REQUEST_ATTRIBUTE: s(",".join(dict.fromkeys(g.request for g in gpus))),
        PAIRED_BY_ATTRIBUTE: s(",".join(dict.fromkeys(g.attribute for g in gpus))),
    }


def mount_spec(
    driver: str, claim: ClaimIdentity, request: str, host_path: str, env: Sequence[str] = ()
) -> dict[str, object]:
    """The CDI spec that bind-mounts the host file read-only at :func:`container_path`.

    ``env`` (``NAME=value``, the claim's NCCL variables) joins the same device's edits.
    """
    edits: dict[str, object] = {
        "mounts": [
            {
                "hostPath": host_path,
                "containerPath": container_path(claim, request, driver),
                "options": ["ro", "bind"],
            }
        ]
    }
    if env:
        edits["env"] = list(env)
    return {
        "cdiVersion": CDI_VERSION,
        "kind": cdi_kind(driver),
        "devices": [
            {
                "name": cdi_device_name(claim.uid, request),
                "containerEdits": edits,
            }
        ],
    }


def _require(problem: str | None, path: str) -> None:
    if problem is not None:
        raise errors.ContractViolation(
            "cannot build a device metadata path", errors=[errors.FieldError(path, problem)]
        )
