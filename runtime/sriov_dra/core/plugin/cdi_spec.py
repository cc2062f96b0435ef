"""CDI (Container Device Interface) names and spec documents for allocated VFs.

The pure half of CDI: the kind ``sriovnetwork.k8snetworkplumbingwg.io/vf``, the device names and
IDs returned to the kubelet, the spec file names, one VF's container edits (upstream
dra-driver-sriov's env vars and device nodes, which workloads read), the per-claim and Pod-global
documents with their minimum ``cdiVersion``, their deterministic bytes, and a checker applying
the CDI 1.x loader rules. Device names are upstream's (runtimes cache specs by them); file names
end in ``.json``. ``sriov_dra.host.cdi`` writes the files. Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from sriov_dra_rules import errors, names

VENDOR: Final = names.DOMAIN
CLASS: Final = "vf"
KIND: Final = f"{VENDOR}/{CLASS}"
"""CDI kind of every spec this driver writes (upstream-compatible)."""

EARLIEST_VERSION: Final = "0.3.0"
HOSTPATH_OR_DIGIT_NAME_VERSION: Final = "0.5.0"
KNOWN_VERSIONS: Final = ("0.3.0", "0.4.0", "0.5.0", "0.6.0", "0.7.0", "0.8.0", "1.0.0", "1.1.0")
"""``cdiVersion`` values a CDI 1.x loader accepts (0.1.0/0.2.0 are no longer loadable)."""

ENV_PREFIX: Final = "SRIOVNETWORK_"
POD_PCI_ENV: Final = "SRIOVNETWORK_PCI_ADDRESSES"
VFIO_CONTAINER_NODE: Final = "/dev/vfio/vfio"
VHOST_NODES: Final = ("/dev/vhost-net", "/dev/net/tun")
_RDMA_ENV_BY_PREFIX: Final = (("uverbs", "UVERB"), ("umad", "UMAD"), ("issm", "ISSM"), ("rdma_cm", "CM"))

_VENDOR_CLASS_RE: Final = re.compile(r"[A-Za-z]([A-Za-z0-9_.-]*[A-Za-z0-9])?")
_DEVICE_NAME_RE: Final = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.:-]*[A-Za-z0-9])?")
_TRANSIENT_ID_RE: Final = re.compile(r"[A-Za-z0-9]([A-Za-z0-9_.-]*[A-Za-z0-9])?")
_ENV_NAME_RE: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_GROUP_RE: Final = re.compile(r"[0-9]+")


def device_name_problem(value: object) -> str | None:
    """Say why ``value`` is not a CDI device name, or return ``None``.

    Shapes: ``[A-Za-z0-9]``, then ``[A-Za-z0-9_.:-]*``, ending alphanumeric (CDI parser rule).
    """
    return names.pattern_problem(
        value, _DEVICE_NAME_RE, what="a CDI device name (alphanumerics and '_.:-', alphanumeric at both ends)"
    )


def kind_problem(value: object) -> str | None:
    """Say why ``value`` is not a CDI kind ``<vendor>/<class>``, or return ``None``."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    vendor, sep, cls = value.partition("/")
    if not sep or not _VENDOR_CLASS_RE.fullmatch(vendor) or not _VENDOR_CLASS_RE.fullmatch(cls):
        return (
            f"{value!r} is not a CDI kind '<vendor>/<class>' (each starts with a letter, ends alphanumeric)"
        )
    return None


def qualified_name_problem(value: object) -> str | None:
    """Say why ``value`` is not a fully-qualified CDI device ID ``<vendor>/<class>=<name>``."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    kind, sep, name = value.partition("=")
    if not sep or kind_problem(kind) is not None or device_name_problem(name) is not None:
        return f"{value!r} is not a qualified CDI device ID like {KIND}=<name>"
    return None


def _require(problem: str | None, what: str, path: str) -> None:
    if problem is not None:
        raise errors.ContractViolation(f"cannot build {what}", errors=[errors.FieldError(path, problem)])


def cdi_device_id(name: str, *, kind: str = KIND) -> str:
    """Return the fully-qualified CDI device ID the kubelet passes unchanged to the runtime.

    Shapes: ``<vendor>/<class>=<name>``, e.g.
    ``sriovnetwork.k8snetworkplumbingwg.io/vf=<claimUID>-0000-3b-02-0``.
    Raises: ``ContractViolation`` if ``kind`` or ``name`` breaks the CDI parser rules.
    Source: CDI ``parser.QualifiedName``.
    """
    _require(kind_problem(kind), "a CDI device ID", "kind")
    _require(device_name_problem(name), "a CDI device ID", "name")
    return f"{kind}={name}"


def claim_device_name(claim_uid: str, device: str) -> str:
    """Return the CDI device name of one prepared VF of a claim: ``<claimUID>-<deviceName>``.

    Raises: ``ContractViolation`` if the result is not a valid CDI device name.
    """
    name = f"{claim_uid}-{device}"
    _require(device_name_problem(name), "a claim CDI device name", "name")
    return name


def prepared_device_ids(claim_uid: str, pod_uid: str, device: str) -> tuple[str, str]:
    """Return the two CDI IDs every prepared VF carries: its claim device, then the Pod device.

    Shapes: ``(<kind>=<claimUID>-<device>, <kind>=<podUID>)`` (upstream order).
    Raises: ``ContractViolation`` for names the CDI parser would reject.
    """
    return cdi_device_id(claim_device_name(claim_uid, device)), cdi_device_id(pod_uid)


def spec_file_name(transient_id: str) -> str:
    """Return the spec file name for a claim UID or Pod UID: ``<vendor>-<class>_<id>.json``.

    Shapes: a single path component; ``transient_id`` is alphanumerics and ``_.-``, alphanumeric at
    both ends (so no ``/``, ``..`` or hidden file). Raises: ``ContractViolation`` otherwise.
    Upstream names its files ``.yaml`` (the Go library's default); ours are ``.json`` because we
    write JSON, which every CDI loader accepts. Names matter only for removal: taking over an
    upstream driver's files in place is not supported.
    Source: CDI ``GenerateTransientSpecName``.
    """
    if not isinstance(transient_id, str) or not _TRANSIENT_ID_RE.fullmatch(transient_id):
        _require(f"{transient_id!r} is not a safe spec name component", "a CDI spec file name", "id")
    return f"{VENDOR}-{CLASS}_{transient_id}.json"


@dataclass(frozen=True)
class VfEdits:
    """What the container of one prepared VF needs, as found on the host at prepare time.

    Shapes: ``device`` is the DRA device name (BDF with ``:``/``.`` → ``-``); ``pci_address`` a
    plain BDF; ``vfio_group`` the IOMMU group number as decimal text, non-empty iff the VF is bound
    to ``vfio-pci``; ``vfio_noiommu`` when the group is a ``vfio-noiommu`` group (host node
    ``/dev/vfio/noiommu-<group>``); ``vhost`` is VfConfig ``addVhostMount``; ``rdma_char_devices``
    absolute ``/dev`` paths of the VF's RDMA character devices.
    """

    device: str
    pci_address: str
    net_attach_def_name: str = ""
    vfio_group: str = ""
    vfio_noiommu: bool = False
    vhost: bool = False
    rdma_device: str = ""
    rdma_char_devices: tuple[str, ...] = ()


def _env_device(device: str) -> str:
    return device.replace("-", "_")


def container_edits(edits: VfEdits) -> dict[str, list[object]]:
    """Return the CDI ``containerEdits`` of one VF: upstream env vars and device nodes.

    Shapes: ``{"env": ["K=V", ...], "deviceNodes": [{"path", "hostPath"?, "type": "c"}, ...]}``;
    env names: ``SRIOVNETWORK_VF_DEVICE_<dev_>``, ``SRIOVNETWORK_NET_ATTACH_DEF_NAME``,
    ``SRIOVNETWORK_<dev_>_VFIO_DEVICE``, ``SRIOVNETWORK_<dev_>_RDMA_{UVERB,UMAD,ISSM,CM,DEVICE}``
    where ``<dev_>`` is the device name with ``-`` → ``_``.
    Raises: ``ContractViolation`` for a malformed PCI address, device name, IOMMU group or a
    relative RDMA device path.
    Source: upstream dra-driver-sriov's container edits (names and device nodes).
    """
    _require(names.pci_address_problem(edits.pci_address), "VF container edits", "pciAddress")
    _require(names.dns1123_label_problem(edits.device), "VF container edits", "device")
    dev = _env_device(edits.device)
    env = [
        f"{ENV_PREFIX}VF_DEVICE_{dev}={edits.pci_address}",
        f"{ENV_PREFIX}NET_ATTACH_DEF_NAME={edits.net_attach_def_name}",
    ]
    nodes: list[object] = []
    if edits.vfio_group:
        if not _GROUP_RE.fullmatch(edits.vfio_group):
            _require(f"{edits.vfio_group!r} is not a decimal IOMMU group", "VF container edits", "vfioGroup")
        container_path = f"/dev/vfio/{edits.vfio_group}"
        host_name = f"noiommu-{edits.vfio_group}" if edits.vfio_noiommu else edits.vfio_group
        nodes.append({"path": container_path, "hostPath": f"/dev/vfio/{host_name}", "type": "c"})
        nodes.append({"path": VFIO_CONTAINER_NODE, "type": "c"})
        env.append(f"{ENV_PREFIX}{dev}_VFIO_DEVICE={container_path}")
    if edits.vhost:
        nodes.extend({"path": p, "type": "c"} for p in VHOST_NODES)
    for char_dev in edits.rdma_char_devices:
        if not char_dev.startswith("/dev/"):
            _require(f"{char_dev!r} is not an absolute /dev path", "VF container edits", "rdmaCharDevices")
        nodes.append({"path": char_dev, "type": "c"})
        base = char_dev.rsplit("/", 1)[-1]
        for prefix, suffix in _RDMA_ENV_BY_PREFIX:
            if base.startswith(prefix):
                env.append(f"{ENV_PREFIX}{dev}_RDMA_{suffix}={char_dev}")
                break
    if edits.rdma_device:
        env.append(f"{ENV_PREFIX}{dev}_RDMA_DEVICE={edits.rdma_device}")
    out: dict[str, list[object]] = {"env": list(env)}
    if nodes:
        out["deviceNodes"] = nodes
    return out


def minimum_version(devices: Iterable[Mapping[str, object]]) -> str:
    """Return the lowest ``cdiVersion`` that admits ``devices`` (the spec's ``devices`` list).

    Shapes: ``0.5.0`` if a device name starts with a non-letter or a device node sets
    ``hostPath`` (UIDs usually start with a digit); else ``0.3.0``, the earliest CDI 1.x loaders
    accept. A loader rejects a version below the minimum. Only the features this module emits
    are considered.
    Source: CDI ``specs-go/version.go`` ``requiresV050``.
    """
    for dev in devices:
        name = dev.get("name")
        if isinstance(name, str) and name and not _is_ascii_letter(name[0]):
            return HOSTPATH_OR_DIGIT_NAME_VERSION
        edits = dev.get("containerEdits")
        nodes = edits.get("deviceNodes", []) if isinstance(edits, Mapping) else []
        if isinstance(nodes, list) and any(isinstance(n, Mapping) and n.get("hostPath") for n in nodes):
            return HOSTPATH_OR_DIGIT_NAME_VERSION
    return EARLIEST_VERSION


def _is_ascii_letter(char: str) -> bool:
    return ("a" <= char <= "z") or ("A" <= char <= "Z")


def _spec(devices: list[dict[str, object]]) -> dict[str, object]:
    return {"cdiVersion": minimum_version(devices), "kind": KIND, "devices": devices}


def claim_spec(claim_uid: str, vfs: Sequence[VfEdits]) -> dict[str, object]:
    """Return the per-claim CDI spec: one device ``<claimUID>-<device>`` per prepared VF.

    Shapes: devices in ``vfs`` order (callers pass allocation order).
    Raises: ``ContractViolation`` for no VFs, a repeated device, or invalid names/edits.
    """
    if not vfs:
        _require("a claim spec needs at least one prepared VF", "a claim CDI spec", "devices")
    seen = [v.device for v in vfs]
    if len(set(seen)) != len(seen):
        _require(f"device names repeat: {seen}", "a claim CDI spec", "devices")
    devices: list[dict[str, object]] = [
        {"name": claim_device_name(claim_uid, v.device), "containerEdits": container_edits(v)} for v in vfs
    ]
    return _spec(devices)


def pod_spec(pod_uid: str, pci_addresses: Iterable[str]) -> dict[str, object]:
    """Return the Pod-global CDI spec: device ``<podUID>`` with ``SRIOVNETWORK_PCI_ADDRESSES``.

    Shapes: the env value is the sorted, de-duplicated addresses joined by ``,`` (upstream uses
    Go map order, which is not stable).
    Raises: ``ContractViolation`` for no addresses, a malformed address or Pod UID.
    """
    addresses = sorted(set(pci_addresses))
    if not addresses:
        _require("a Pod spec needs at least one PCI address", "a Pod CDI spec", "pciAddresses")
    for addr in addresses:
        _require(names.pci_address_problem(addr), "a Pod CDI spec", "pciAddresses")
    _require(device_name_problem(pod_uid), "a Pod CDI spec", "podUID")
    env = [f"{POD_PCI_ENV}={','.join(addresses)}"]
    return _spec([{"name": pod_uid, "containerEdits": {"env": env}}])


def encode_spec(spec: Mapping[str, object]) -> bytes:
    """Return the deterministic file bytes of ``spec``: sorted-key, 2-space JSON plus a newline.

    Raises: ``ContractViolation`` listing every CDI loader rule ``spec`` breaks (see
    :func:`spec_problems`), so an unloadable spec is never written.
    """
    errors.raise_if_any(
        spec_problems(spec),
        "refusing to write a CDI spec the runtime would reject",
        cls=errors.ContractViolation,
    )
    return (json.dumps(spec, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode("utf-8")


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.split("."))


_SPEC_KEYS: Final = frozenset({"cdiVersion", "kind", "annotations", "devices", "containerEdits"})
_DEVICE_KEYS: Final = frozenset({"name", "annotations", "containerEdits"})
_EDIT_KEYS: Final = frozenset(
    {"env", "deviceNodes", "mounts", "hooks", "additionalGids", "intelRdt", "netDevices"}
)
_NODE_KEYS: Final = frozenset(
    {"path", "hostPath", "type", "major", "minor", "fileMode", "permissions", "uid", "gid"}
)
_NODE_TYPES: Final = frozenset({"", "b", "c", "u", "p"})
_MOUNT_KEYS: Final = frozenset({"hostPath", "containerPath", "options", "type"})


def _edits_problems(edits: object, path: str, *, device: bool) -> list[errors.FieldError]:
    """Check one ``containerEdits`` object for the env/deviceNodes rules this module relies on."""
    if not isinstance(edits, Mapping):
        return [errors.FieldError(path, "must be an object")]
    out = [errors.FieldError(f"{path}.{k}", "unknown field") for k in sorted(set(edits) - _EDIT_KEYS)]
    env = edits.get("env", [])
    if not isinstance(env, list):
        out.append(errors.FieldError(f"{path}.env", "must be a list of 'NAME=value' strings"))
        env = []
    for i, item in enumerate(env):
        name = item.partition("=")[0] if isinstance(item, str) else ""
        if not isinstance(item, str) or "=" not in item or not _ENV_NAME_RE.fullmatch(name):
            out.append(errors.FieldError(f"{path}.env[{i}]", f"{item!r} is not 'NAME=value'"))
    nodes = edits.get("deviceNodes", [])
    if not isinstance(nodes, list):
        out.append(errors.FieldError(f"{path}.deviceNodes", "must be a list of objects"))
        nodes = []
    for i, node in enumerate(nodes):
        where = f"{path}.deviceNodes[{i}]"
        if not isinstance(node, Mapping):
            out.append(errors.FieldError(where, "must be an object"))
            continue
        out.extend(errors.FieldError(f"{where}.{k}", "unknown field") for k in sorted(set(node) - _NODE_KEYS))
        for key in ("path", "hostPath"):
            value = node.get(key)
            if (key == "path" or value is not None) and not (
                isinstance(value, str) and value.startswith("/")
            ):
                out.append(errors.FieldError(f"{where}.{key}", f"{value!r} must be an absolute path"))
        if node.get("type", "") not in _NODE_TYPES:
            out.append(errors.FieldError(f"{where}.type", f"{node.get('type')!r} is not one of b, c, u, p"))
    out.extend(_mounts_problems(edits.get("mounts", []), f"{path}.mounts"))
    if device and not any(edits.get(k) for k in _EDIT_KEYS):
        out.append(errors.FieldError(path, "a device needs at least one edit"))
    return out


def _mounts_problems(mounts: object, path: str) -> list[errors.FieldError]:
    """Check ``mounts``: objects with absolute ``hostPath`` and ``containerPath``, string options."""
    if not isinstance(mounts, list):
        return [errors.FieldError(path, "must be a list of objects")]
    out: list[errors.FieldError] = []
    for i, mount in enumerate(mounts):
        where = f"{path}[{i}]"
        if not isinstance(mount, Mapping):
            out.append(errors.FieldError(where, "must be an object"))
            continue
        out.extend(
            errors.FieldError(f"{where}.{k}", "unknown field") for k in sorted(set(mount) - _MOUNT_KEYS)
        )
        for key in ("hostPath", "containerPath"):
            value = mount.get(key)
            if not (isinstance(value, str) and value.startswith("/")):
                out.append(errors.FieldError(f"{where}.{key}", f"{value!r} must be an absolute path"))
        options = mount.get("options", [])
        if not isinstance(options, list) or not all(isinstance(o, str) and o for o in options):
            out.append(errors.FieldError(f"{where}.options", "must be a list of nonempty strings"))
    return out


def spec_problems(spec: Mapping[str, object]) -> list[errors.FieldError]:
    """Return every CDI 1.x loader rule ``spec`` breaks (empty when a runtime would load it).

    Checks: no unknown fields; ``cdiVersion`` known and not below :func:`minimum_version`; a
    valid ``kind``; at least one device; unique valid device names; non-empty device edits;
    ``NAME=value`` env entries; absolute device-node and mount paths; node types ``b|c|u|p``.
    Source: CDI ``pkg/cdi/spec.go``, ``container-edits.go``, ``parser.go``, ``specs-go/version.go``.
    """
    out = [errors.FieldError(k, "unknown field") for k in sorted(set(spec) - _SPEC_KEYS)]
    kind = kind_problem(spec.get("kind"))
    if kind is not None:
        out.append(errors.FieldError("kind", kind))
    devices = spec.get("devices")
    if not isinstance(devices, list) or not devices:
        out.append(errors.FieldError("devices", "must be a non-empty list"))
        devices = []
    seen: set[str] = set()
    for i, dev in enumerate(devices):
        where = f"devices[{i}]"
        if not isinstance(dev, Mapping):
            out.append(errors.FieldError(where, "must be an object"))
            continue
        out.extend(
            errors.FieldError(f"{where}.{k}", "unknown field") for k in sorted(set(dev) - _DEVICE_KEYS)
        )
        name = dev.get("name")
        problem = device_name_problem(name)
        if problem is not None:
            out.append(errors.FieldError(f"{where}.name", problem))
        elif name in seen:
            out.append(errors.FieldError(f"{where}.name", f"{name!r} is defined twice"))
        else:
            seen.add(str(name))
        out.extend(_edits_problems(dev.get("containerEdits"), f"{where}.containerEdits", device=True))
    if "containerEdits" in spec:
        out.extend(_edits_problems(spec["containerEdits"], "containerEdits", device=False))
    version = spec.get("cdiVersion")
    if version not in KNOWN_VERSIONS:
        out.append(errors.FieldError("cdiVersion", f"{version!r} is not one of {', '.join(KNOWN_VERSIONS)}"))
    else:
        needed = minimum_version([d for d in devices if isinstance(d, Mapping)])
        if _version_key(str(version)) < _version_key(needed):
            out.append(errors.FieldError("cdiVersion", f"{version} is below {needed}, which the spec needs"))
    return out
