"""VfConfig opaque parameters: strict decoding, request matching and layering.

Turns a ResourceClaim's ``status.allocation.devices.config`` into one effective :class:`VfConfig`
per allocation result (docs/design.md#template-resolution): decoded strictly as upstream's
serializer does, matched to requests as Kubernetes ``ConfigForResult`` does, filtered by this
driver's ``opaque.driver``, class configs before claim configs, later set fields winning. Also
refuses one explicit ``ifName`` shared by several devices. Never defaults a namespace, reads a
DeviceClass, or does I/O.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sriov_dra.core import attributes
from sriov_dra_rules import errors, names, strict_json

DRIVER_NAME = names.DRIVER_NAME
API_VERSION = f"{names.DOMAIN}/v1alpha1"
KIND = "VfConfig"
_FIELDS = (
    "driver",
    "addVhostMount",
    "ifName",
    "netAttachDefName",
    "netAttachDefNamespace",
    "disableNcclHints",
)
_DRIVER_RE = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.-]*")
_DEFAULT_PATH = "status.allocation.devices.config"


class ConfigSource(enum.StrEnum):
    """Where an allocation config came from; class configs take lower precedence."""

    FROM_CLASS = "FromClass"
    FROM_CLAIM = "FromClaim"


@dataclass(frozen=True)
class VfConfig:
    """Decoded ``sriovnetwork.k8snetworkplumbingwg.io/v1alpha1`` ``VfConfig``.

    Empty strings and ``False`` mean "not set", as upstream's non-pointer fields do.
    Shapes: ``net_attach_def_namespace`` is empty or a DNS-1123 label; it is never defaulted here.
    Source: upstream dra-driver-sriov's ``VfConfig`` type; docs/design.md#template-resolution.
    """

    driver: str = ""
    add_vhost_mount: bool = False
    if_name: str = ""
    net_attach_def_name: str = ""
    net_attach_def_namespace: str = ""
    disable_nccl_hints: bool = False
    """This driver's addition to upstream's five fields: no NCCL variables for the claim
    (docs/design.md#nccl-hints); set in a class or a claim config, it stays set."""

    def layer(self, later: VfConfig) -> VfConfig:
        """Return this config overridden by ``later`` (``later`` has higher precedence).

        Set fields of ``later`` win. A later ``netAttachDefName`` replaces name and namespace
        together (an omitted namespace resets to empty, i.e. the Pod namespace); a later
        namespace without a name overrides only the namespace. Associative, with
        ``VfConfig()`` as identity.
        So a class config ``A`` in ``infra`` layered with a claim config ``B`` without a namespace
        resolves to ``B`` in the Pod's namespace (docs/design.md#template-resolution).
        """
        if later.net_attach_def_name:
            name, namespace = later.net_attach_def_name, later.net_attach_def_namespace
        else:
            name = self.net_attach_def_name
            namespace = later.net_attach_def_namespace or self.net_attach_def_namespace
        return VfConfig(
            driver=later.driver or self.driver,
            add_vhost_mount=self.add_vhost_mount or later.add_vhost_mount,
            if_name=later.if_name or self.if_name,
            net_attach_def_name=name,
            net_attach_def_namespace=namespace,
            disable_nccl_hints=self.disable_nccl_hints or later.disable_nccl_hints,
        )

    def reference(self) -> attributes.NadReference | None:
        """The symbolic source-NAD reference, or ``None`` when no ``netAttachDefName`` is set."""
        if not self.net_attach_def_name:
            return None
        return attributes.NadReference(self.net_attach_def_name, self.net_attach_def_namespace or None)

    def to_json(self) -> dict[str, object]:
        """API form with ``apiVersion``/``kind`` and empty fields omitted (claim status ``data``)."""
        out: dict[str, object] = {"apiVersion": API_VERSION, "kind": KIND}
        for key, value in zip(_FIELDS, self._values(), strict=True):
            if value:
                out[key] = value
        return out

    def _values(self) -> tuple[str | bool, ...]:
        return (
            self.driver,
            self.add_vhost_mount,
            self.if_name,
            self.net_attach_def_name,
            self.net_attach_def_namespace,
            self.disable_nccl_hints,
        )


@dataclass(frozen=True)
class ScopedVfConfig:
    """One decoded allocation config of this driver, with its source, request scope and index."""

    source: ConfigSource
    requests: tuple[str, ...]
    config: VfConfig
    index: int


@dataclass(frozen=True)
class ResultConfig:
    """The effective VfConfig of one allocation result of this driver."""

    request: str
    pool: str
    device: str
    config: VfConfig


def decode_vf_config(raw: object, path: str = "parameters") -> VfConfig:
    """Strictly decode opaque ``parameters`` (an object, or its JSON text/bytes).

    Shapes: ``apiVersion`` must be ``sriovnetwork.k8snetworkplumbingwg.io/v1alpha1`` and
    ``kind`` ``VfConfig``; only upstream's five VfConfig fields and ``disableNcclHints`` are
    allowed; ``null`` equals absent.
    Raises: InvalidSpec(InvalidVfConfig) listing every bad field.
    Source: upstream dra-driver-sriov's strict serializer.
    """
    obj, problems = _load_object(raw, path)
    if obj is None:
        raise errors.InvalidSpec(
            "VfConfig parameters are invalid", reason=errors.Reason.INVALID_VF_CONFIG, errors=problems
        )
    problems.extend(_type_meta_problems(obj, path))
    for key in sorted(obj):
        if key not in _FIELDS and key not in ("apiVersion", "kind"):
            problems.append(
                errors.FieldError(f"{path}.{key}", f"unknown field; allowed: {', '.join(_FIELDS)}")
            )
    values: dict[str, str] = {}
    for key in ("driver", "ifName", "netAttachDefName", "netAttachDefNamespace"):
        value = obj.get(key)
        if value is None:
            values[key] = ""
        elif isinstance(value, str):
            values[key] = value
        else:
            problems.append(
                errors.FieldError(f"{path}.{key}", f"expected a string, got {type(value).__name__}")
            )
    flags = {k: obj.get(k) for k in ("addVhostMount", "disableNcclHints")}
    for key, flag in flags.items():
        if flag is not None and not isinstance(flag, bool):
            problems.append(errors.FieldError(f"{path}.{key}", f"expected a boolean, got {flag!r}"))
    problems.extend(_value_problems(values, path))
    errors.raise_if_any(problems, "VfConfig parameters are invalid", reason=errors.Reason.INVALID_VF_CONFIG)
    return VfConfig(
        driver=values["driver"],
        add_vhost_mount=bool(flags["addVhostMount"]),
        if_name=values["ifName"],
        net_attach_def_name=values["netAttachDefName"],
        net_attach_def_namespace=values["netAttachDefNamespace"],
        disable_nccl_hints=bool(flags["disableNcclHints"]),
    )


def decode_allocation_configs(
    configs: object, *, driver_name: str = DRIVER_NAME, path: str = _DEFAULT_PATH
) -> tuple[ScopedVfConfig, ...]:
    """Decode this driver's entries of ``status.allocation.devices.config``.

    Other drivers' entries are skipped undecoded. Every entry of this driver is decoded, even
    one that matches no result, so a bad config never hides.
    Shapes: class configs first, then claim configs, list order kept within each.
    Raises: InvalidSpec(InvalidVfConfig) for an unknown source, a non-opaque entry or a bad
    VfConfig, listing every problem.
    Source: docs/design.md#template-resolution; Kubernetes ``resourceclaim.ConfigForResult``.
    """
    if configs is None:
        return ()
    if not isinstance(configs, Sequence) or isinstance(configs, (str, bytes)):
        raise errors.InvalidSpec(
            "allocation configs are invalid",
            reason=errors.Reason.INVALID_VF_CONFIG,
            errors=[errors.FieldError(path, f"expected a list, got {type(configs).__name__}")],
        )
    problems: list[errors.FieldError] = []
    decoded: list[ScopedVfConfig] = []
    for index, entry in enumerate(configs):
        where = f"{path}[{index}]"
        if not isinstance(entry, Mapping):
            problems.append(errors.FieldError(where, "expected an object"))
            continue
        opaque = entry.get("opaque")
        if not isinstance(opaque, Mapping):
            problems.append(errors.FieldError(f"{where}.opaque", "only opaque parameters are supported"))
            continue
        if opaque.get("driver") != driver_name:
            continue
        source_raw = entry.get("source")
        if not isinstance(source_raw, str) or source_raw not in {s.value for s in ConfigSource}:
            problems.append(
                errors.FieldError(f"{where}.source", f"{source_raw!r} is not FromClass or FromClaim")
            )
            continue
        requests = entry.get("requests")
        requests = [] if requests is None else requests
        if not isinstance(requests, list) or not all(isinstance(r, str) and r for r in requests):
            problems.append(errors.FieldError(f"{where}.requests", "expected a list of request names"))
            continue
        try:
            config = decode_vf_config(opaque.get("parameters"), f"{where}.opaque.parameters")
        except errors.InvalidSpec as exc:
            problems.extend(exc.errors)
            continue
        decoded.append(ScopedVfConfig(ConfigSource(str(source_raw)), tuple(requests), config, index))
    errors.raise_if_any(problems, "allocation configs are invalid", reason=errors.Reason.INVALID_VF_CONFIG)
    return tuple(sorted(decoded, key=lambda c: (c.source is ConfigSource.FROM_CLAIM, c.index)))


def config_applies(requests: Sequence[str], request: str) -> bool:
    """Kubernetes ``ConfigForResult``: empty = all; ``req`` covers ``req/sub``; ``req/sub`` is exact."""
    return not requests or request in requests or request.split("/", 1)[0] in requests


def effective_vf_config(scoped: Sequence[ScopedVfConfig], request: str) -> VfConfig:
    """Layer every config that applies to ``request`` over the default, in precedence order.

    ``scoped`` must be in the order :func:`decode_allocation_configs` returns.
    """
    result = VfConfig()
    for entry in scoped:
        if config_applies(entry.requests, request):
            result = result.layer(entry.config)
    return result


def resolve_results(
    allocation: Mapping[str, object], *, driver_name: str = DRIVER_NAME, path: str = "status.allocation"
) -> tuple[ResultConfig, ...]:
    """Effective VfConfig of every allocation result of this driver, in result order.

    Raises: InvalidSpec for malformed results (InvalidSpec) or configs (InvalidVfConfig).
    Results and configs of other drivers are filtered out first.
    Source: docs/design.md#template-resolution.
    """
    devices = allocation.get("devices")
    if not isinstance(devices, Mapping):
        raise errors.InvalidSpec(f"{path}.devices is missing; the claim is not allocated")
    scoped = decode_allocation_configs(
        devices.get("config"), driver_name=driver_name, path=f"{path}.devices.config"
    )
    results = devices.get("results")
    results = [] if results is None else results
    if not isinstance(results, list):
        raise errors.InvalidSpec(f"{path}.devices.results must be a list")
    out: list[ResultConfig] = []
    problems: list[errors.FieldError] = []
    for index, result in enumerate(results):
        where = f"{path}.devices.results[{index}]"
        if not isinstance(result, Mapping) or result.get("driver") != driver_name:
            continue
        fields = [result.get(k) for k in ("request", "pool", "device")]
        if not all(isinstance(v, str) and v for v in fields):
            problems.append(errors.FieldError(where, "request, pool and device must be nonempty strings"))
            continue
        request, pool, device = (str(v) for v in fields)
        out.append(ResultConfig(request, pool, device, effective_vf_config(scoped, request)))
    errors.raise_if_any(problems, "allocation results are invalid")
    return tuple(out)


def check_interface_names(
    results: Sequence[ResultConfig], claim_requests: object = None, path: str = "spec.devices.requests"
) -> None:
    """Refuse an explicit ``ifName`` that does not name exactly one device.

    A name shared by two allocated devices, or set for a request with ``count`` > 1 or
    ``allocationMode: All`` (``claim_requests`` = the claim's ``spec.devices.requests``), is
    ambiguous.
    Raises: InvalidSpec(DuplicateInterfaceName) naming the interface, requests and devices.
    Source: docs/design.md#interface-names.
    """
    problems: list[errors.FieldError] = []
    by_name: dict[str, set[tuple[str, str]]] = {}
    requests_by_name: dict[str, set[str]] = {}
    for r in results:
        if r.config.if_name:
            by_name.setdefault(r.config.if_name, set()).add((r.pool, r.device))
            requests_by_name.setdefault(r.config.if_name, set()).add(r.request)
    for if_name in sorted(by_name):
        devices = sorted(by_name[if_name])
        if len(devices) > 1:
            problems.append(
                errors.FieldError(
                    f"VfConfig.ifName={if_name!r}",
                    f"applies to {len(devices)} devices {[d for _, d in devices]} of requests "
                    f"{sorted(requests_by_name[if_name])}; give each device its own request and "
                    "ifName, or omit it",
                )
            )
    for request in sorted({r.request for r in results if r.config.if_name}):
        multi = _multi_device_request(claim_requests, request)
        if multi:
            if_name = next(r.config.if_name for r in results if r.request == request and r.config.if_name)
            problems.append(
                errors.FieldError(
                    f"{path}[{request!r}]",
                    f"{multi}, so VfConfig.ifName={if_name!r} would name several interfaces; "
                    "use count 1 or omit ifName",
                )
            )
    errors.raise_if_any(
        problems, "explicit interface name is ambiguous", reason=errors.Reason.DUPLICATE_INTERFACE_NAME
    )


def _multi_device_request(claim_requests: object, request: str) -> str:
    """Describe why ``request`` may allocate several devices, or return ``""``."""
    if not isinstance(claim_requests, list):
        return ""
    base, _, sub = request.partition("/")
    spec: object = None
    for entry in claim_requests:
        if isinstance(entry, Mapping) and entry.get("name") == base:
            if sub:
                for candidate in entry.get("firstAvailable") or []:
                    if isinstance(candidate, Mapping) and candidate.get("name") == sub:
                        spec = candidate
            else:
                spec = entry.get("exactly")
    if not isinstance(spec, Mapping):
        return ""
    if spec.get("allocationMode") == "All":
        return "allocationMode is All"
    count = spec.get("count")
    if isinstance(count, int) and not isinstance(count, bool) and count > 1:
        return f"count is {count}"
    return ""


def _load_object(raw: object, path: str) -> tuple[dict[str, object] | None, list[errors.FieldError]]:
    if isinstance(raw, (bytes, str)):
        try:
            # Bytes are UTF-8 only: json.loads would also guess UTF-16/32 and skip a BOM.
            text = raw.decode("utf-8") if isinstance(raw, bytes) else raw
        except UnicodeDecodeError as exc:
            return None, [errors.FieldError(path, f"not valid JSON: {exc}")]
        try:
            raw = strict_json.decode_plain(text, path=path)  # a repeated field is named with its path
        except errors.InvalidSpec as exc:
            return None, list(exc.errors)
    if raw is None:
        return None, [errors.FieldError(path, "is missing; set a VfConfig object")]
    if not isinstance(raw, Mapping):
        return None, [errors.FieldError(path, f"expected a VfConfig object, got {type(raw).__name__}")]
    if not all(isinstance(k, str) for k in raw):
        return None, [errors.FieldError(path, "field names must be strings")]
    return {str(k): v for k, v in raw.items()}, []


def _type_meta_problems(obj: Mapping[str, object], path: str) -> list[errors.FieldError]:
    problems: list[errors.FieldError] = []
    if obj.get("apiVersion") != API_VERSION:
        problems.append(
            errors.FieldError(
                f"{path}.apiVersion", f"{obj.get('apiVersion')!r} is not supported; use {API_VERSION!r}"
            )
        )
    if obj.get("kind") != KIND:
        problems.append(
            errors.FieldError(f"{path}.kind", f"{obj.get('kind')!r} is not supported; use {KIND!r}")
        )
    return problems


def _value_problems(values: Mapping[str, str], path: str) -> list[errors.FieldError]:
    problems: list[errors.FieldError] = []
    driver = values.get("driver", "")
    if driver and (_DRIVER_RE.fullmatch(driver) is None or driver in (".", "..")):
        problems.append(errors.FieldError(f"{path}.driver", f"{driver!r} is not a kernel driver name"))
    if_name = values.get("ifName", "")
    if_name_problem = names.ifname_problem(if_name) if if_name else None
    if if_name_problem:
        problems.append(errors.FieldError(f"{path}.ifName", if_name_problem))
    name = values.get("netAttachDefName", "")
    if name and not names.is_dns1123_subdomain(name):
        problems.append(
            errors.FieldError(f"{path}.netAttachDefName", f"{name!r} is not a DNS-1123 subdomain")
        )
    namespace = values.get("netAttachDefNamespace", "")
    if namespace and not names.is_dns1123_label(namespace):
        problems.append(
            errors.FieldError(f"{path}.netAttachDefNamespace", f"{namespace!r} is not a DNS-1123 label")
        )
    return problems
