"""Parser of the Multus ``k8s.v1.cni.cncf.io/networks`` Pod annotation, by Multus's own rule.

The one reading, shared by the plugin's selection merger and the guard, that turns the annotation
into an ordered tuple of :class:`Selection` (JSON-list and comma forms, namespace defaulting to
the Pod's) exactly as Multus v4.3.0 reads it: what Multus ignores is kept and ignored (unknown
keys, ``interfaceRequest`` as the fallback interface, case variants of a key, repeated keys), and
what makes Multus fail the Pod is an ``InvalidNetworksAnnotation`` with its path, never read as
empty (docs/design.md#selections; field rules in :mod:`core.selection_fields`). Each JSON element
keeps its exact source text, so a writer re-emits unrelated entries byte for byte. The product's
own entries are held to a stricter rule by their owners (``Selection.exact_tuple``). Pure.
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from sriov_dra.core import selection_fields
from sriov_dra_rules import errors, names, strict_json

_JSON_MARKERS: Final = frozenset('[{"')
_COMMA_NAME_RE: Final = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_JSON_WS: Final = " \t\n\r"
_IFNAME_BREAKERS: Final = frozenset(" \t\n\v\f\r/")
"""What Multus's comma parser refuses in an interface name (besides more than 15 bytes)."""


class Notation(enum.StrEnum):
    """How an entry was written in the annotation."""

    JSON = "json"
    COMMA = "comma"


@dataclass(frozen=True)
class Selection:
    """One validated network selection, in annotation order.

    ``namespace`` is resolved (an omitted or empty namespace becomes the Pod namespace, as Multus
    does); ``written_namespace`` is what the entry said (``None`` when omitted or empty).
    ``interface`` is ``None`` when no interface was requested (Multus then assigns ``net<idx>``).
    ``raw`` is the decoded JSON object (for a comma entry: the minimal equivalent object holding
    only what was written) and ``raw_text`` its exact source text (comma entries: compact JSON);
    ``written_keys`` the keys as written, repeats included (``None``: the keys of ``raw``).
    ``name``, ``written_namespace`` and ``interface`` are what Multus reads (a case variant or
    ``interfaceRequest`` resolved), ``raw`` what was written.

    Shapes: ``index`` is the 0-based position in the annotation.
    """

    index: int
    name: str
    namespace: str
    written_namespace: str | None
    interface: str | None
    notation: Notation
    raw: Mapping[str, Any]
    raw_text: str
    written_keys: tuple[str, ...] | None = None

    @property
    def target(self) -> tuple[str, str]:
        """The selected NAD as ``(namespace, name)`` after namespace defaulting."""
        return (self.namespace, self.name)

    @property
    def request(self) -> tuple[str, str, str | None]:
        """``(namespace, name, interface)``: what Multus acts on, independent of notation."""
        return (self.namespace, self.name, self.interface)

    @property
    def multus_view(self) -> dict[str, str]:
        """What Multus reads of the entry: ``name``, and ``namespace``/``interface`` when given.

        The form :mod:`core.interface_naming` takes (a case variant or ``interfaceRequest`` already resolved).
        """
        view = {"name": self.name}
        if self.written_namespace:
            view["namespace"] = self.written_namespace
        if self.interface:
            view["interface"] = self.interface
        return view

    def exact_tuple(self, namespace: str, name: str, interface: str) -> bool:
        """True when the entry is exactly ``{"name","namespace","interface"}`` with these values.

        The rule for the product's own (managed) entries: the JSON form, those three keys each once
        and nothing else, no case variant (docs/design.md#selections).
        """
        keys = self.written_keys if self.written_keys is not None else tuple(self.raw)
        return (
            self.notation is Notation.JSON
            and sorted(keys) == ["interface", "name", "namespace"]
            and self.raw.get("name") == name
            and self.raw.get("namespace") == namespace
            and self.raw.get("interface") == interface
        )


def field_path(index: int | None = None, *fields: str | int) -> str:
    """Path of an annotation element or field for a :class:`~sriov_dra_rules.errors.FieldError`.

    Shapes: ``metadata.annotations["k8s.v1.cni.cncf.io/networks"][2].ips[0]``.
    """
    path = f'metadata.annotations["{names.NETWORKS_ANNOTATION}"]'
    if index is None:
        return path
    path += f"[{index}]"
    for f in fields:
        path += f"[{f}]" if isinstance(f, int) else f".{f}"
    return path


def parse_networks(value: str | None, *, pod_namespace: str, pod: str = "Pod") -> tuple[Selection, ...]:
    """Parse the networks annotation value of one Pod as Multus v4.3.0 parses it.

    ``None`` (annotation absent) and ``""`` give ``()``. Text containing ``[``, ``{`` or ``"`` is
    the JSON form and must be a list of objects (fields: :mod:`core.selection_fields`); anything
    else is the comma form. ``pod`` names the Pod in messages (``Pod ns/name``).

    Shapes: selections in annotation order; namespaces resolved against ``pod_namespace``.
    Raises: InvalidSpec (reason ``InvalidNetworksAnnotation``) listing every problem that makes
    Multus fail the Pod, with its element index and field (malformed JSON or ``NaN``, a list that
    is not of objects, a field of the wrong type, a bad MAC or IP, more than one ``/`` or ``@`` or
    a bad name or interface in a comma entry); never a partial result, never an empty one for a
    broken annotation.
    Source: docs/design.md#selections; Multus v4.3.0 ``parsePodNetworkAnnotation``,
    ``parsePodNetworkObjectName`` (multus-cni #635, #1195, #588, #360, #213).
    """
    if value is None or value == "":
        return ()
    if _JSON_MARKERS.intersection(value):
        selections, problems = _parse_json(value, pod_namespace)
    else:
        selections, problems = _parse_comma(value, pod_namespace)
    errors.raise_if_any(
        problems,
        f"{pod}: annotation {names.NETWORKS_ANNOTATION} is invalid and was left unchanged; write a JSON "
        'list such as [{"name":"net-a","interface":"net1"}] or comma notation such as ns-a/net-a@net1',
        reason=errors.Reason.INVALID_NETWORKS_ANNOTATION,
    )
    return tuple(selections)


def render_networks(texts: Sequence[str]) -> str:
    """Join element texts (each a JSON object) into the annotation's JSON-list form.

    Shapes: ``[`` + texts joined by ``,`` + ``]``; ``[]`` for none.
    """
    return "[" + ",".join(texts) + "]"


def compact_json(obj: Any) -> str:
    """Compact JSON as our parts write it: no spaces, key order kept, non-ASCII kept as UTF-8."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False)


# --- JSON form -------------------------------------------------------------------------------


class _Object(dict[str, Any]):
    """A decoded JSON object that keeps its source pairs (repeats included) as ``pairs``."""

    pairs: tuple[tuple[str, Any], ...] = ()


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = _Object(pairs)
    obj.pairs = tuple(pairs)
    return obj


def _no_constant(token: str) -> Any:
    raise ValueError(f"{token} is not valid JSON (Go's decoder rejects it)")


_DECODER: Final = json.JSONDecoder(object_pairs_hook=_pairs_hook, parse_constant=_no_constant)


def _parse_json(value: str, pod_namespace: str) -> tuple[list[Selection], list[errors.FieldError]]:
    try:
        decoded = _DECODER.decode(value)
    except json.JSONDecodeError as exc:
        return [], [
            errors.FieldError(
                field_path(),
                f"malformed JSON at line {exc.lineno} column {exc.colno} (char {exc.pos}): {exc.msg}",
            )
        ]
    except (ValueError, RecursionError) as exc:
        return [], [errors.FieldError(field_path(), f"malformed JSON: {exc}")]
    if not isinstance(decoded, list):
        return [], [
            errors.FieldError(
                field_path(),
                f"must be a JSON list of objects, got {strict_json.kind(decoded)}",
            )
        ]
    texts = _element_texts(value)
    selections: list[Selection] = []
    problems: list[errors.FieldError] = []
    for index, (element, text) in enumerate(zip(decoded, texts, strict=True)):
        if not isinstance(element, dict):
            problems.append(
                errors.FieldError(
                    field_path(index),
                    f"must be a JSON object, got {strict_json.kind(element)} (Multus fails the Pod on it)",
                )
            )
            continue
        pairs = selection_fields.pairs_of(element)
        fields, found = selection_fields.multus_fields(pairs)
        if found:
            problems.extend(errors.FieldError(field_path(index, key), msg) for key, msg in found)
            continue
        written_ns = fields.get("namespace") or None
        selections.append(
            Selection(
                index=index,
                name=fields.get("name", ""),
                namespace=written_ns or pod_namespace,
                written_namespace=written_ns,
                interface=fields.get("interface") or None,
                notation=Notation.JSON,
                raw=element,
                raw_text=text,
                written_keys=tuple(k for k, _ in pairs),
            )
        )
    return selections, problems


def _element_texts(value: str) -> list[str]:
    """Exact source text of each element of an already-validated JSON list."""
    pos = _skip_ws(value, 0) + 1  # past '['
    texts: list[str] = []
    pos = _skip_ws(value, pos)
    if value[pos] == "]":
        return texts
    while True:
        _, end = _DECODER.raw_decode(value, pos)
        texts.append(value[pos:end])
        pos = _skip_ws(value, end)
        if value[pos] == "]":
            return texts
        pos = _skip_ws(value, pos + 1)  # past ','


def _skip_ws(value: str, pos: int) -> int:
    while pos < len(value) and value[pos] in _JSON_WS:
        pos += 1
    return pos


# --- Comma form ------------------------------------------------------------------------------


def _parse_comma(value: str, pod_namespace: str) -> tuple[list[Selection], list[errors.FieldError]]:
    selections: list[Selection] = []
    problems: list[errors.FieldError] = []
    for index, item in enumerate(value.split(",")):
        parsed = _parse_comma_item(index, item.strip())
        if isinstance(parsed, errors.FieldError):
            problems.append(parsed)
            continue
        ns, name, ifname = parsed
        raw: dict[str, Any] = {"name": name}
        if ns:
            raw["namespace"] = ns
        if ifname:
            raw["interface"] = ifname
        selections.append(
            Selection(
                index=index,
                name=name,
                namespace=ns or pod_namespace,
                written_namespace=ns or None,
                interface=ifname or None,
                notation=Notation.COMMA,
                raw=raw,
                raw_text=compact_json(raw),
            )
        )
    return selections, problems


def _parse_comma_item(index: int, item: str) -> tuple[str, str, str] | errors.FieldError:
    """Split ``[ns/]name[@ifname]`` as Multus does: at ``/`` first, then at ``@`` (multus-cni #213).

    Namespace and name, when not empty, must be DNS-1123 labels; an interface at most 15 bytes
    without ``/`` or white space. What Multus's parser accepts but cannot attach (an empty name)
    is accepted here too: Multus fails the Pod on it when it looks the NAD up.
    """
    path = field_path(index)
    slash = item.split("/")
    if len(slash) > 2:
        return errors.FieldError(path, f"{item!r} has more than one '/'; write [namespace/]name[@interface]")
    ns, rest = (slash[0].strip(), slash[1]) if len(slash) == 2 else ("", slash[0])
    at = rest.split("@")
    if len(at) > 2:
        return errors.FieldError(path, f"{item!r} has more than one '@'; write [namespace/]name[@interface]")
    name, ifname = at[0].strip(), (at[1].strip() if len(at) == 2 else "")
    for label, part in (("namespace", ns), ("name", name)):
        if part and not _COMMA_NAME_RE.fullmatch(part):
            return errors.FieldError(
                path,
                f"{label} {part!r} in {item!r} must be lower-case alphanumerics or '-', starting and ending "
                "alphanumeric (use the JSON form for names with '.')",
            )
    if len(ifname.encode("utf-8", "surrogatepass")) > 15 or any(c in _IFNAME_BREAKERS for c in ifname):
        return errors.FieldError(
            field_path(index, "interface"),
            f"interface {ifname!r} in {item!r} must be at most 15 bytes without '/' or white space",
        )
    return ns, name, ifname
