"""Parser and validator of the Multus ``k8s.v1.cni.cncf.io/networks`` Pod annotation.

The one rule, shared by the plugin's selection merger and the guard, that turns the annotation
into an ordered tuple of :class:`Selection` (JSON-list and comma forms, namespace defaulting to
the Pod's), each JSON element keeping its exact source text so a writer can re-emit unrelated
entries byte for byte (docs/design.md#selections). Unlike Multus it never reads a broken
annotation as empty (multus-cni #635, #1195, #588, #360, #213): every problem is an
``InvalidNetworksAnnotation`` with its path; field rules are in :mod:`core.selection_fields`. Pure.
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
    only what was written) and ``raw_text`` its exact source text (comma entries: compact JSON).

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

    @property
    def target(self) -> tuple[str, str]:
        """The selected NAD as ``(namespace, name)`` after namespace defaulting."""
        return (self.namespace, self.name)

    @property
    def request(self) -> tuple[str, str, str | None]:
        """``(namespace, name, interface)``: what Multus acts on, independent of notation."""
        return (self.namespace, self.name, self.interface)


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
    """Parse and validate the networks annotation value of one Pod.

    ``None`` (annotation absent) and ``""`` give ``()``. Text containing ``[``, ``{`` or ``"`` is
    the JSON form and must be a list of objects; anything else is the comma form. ``pod`` names
    the Pod in messages (``Pod ns/name``).

    Shapes: selections in annotation order; namespaces resolved against ``pod_namespace``.
    Raises: InvalidSpec (reason ``InvalidNetworksAnnotation``) listing every problem with its
    element index and field (malformed JSON, a non-object element, an unknown or case-variant key,
    a duplicate key, a wrong type, an empty comma entry, ``@`` with no interface,
    ``NaN``/``Infinity``, the deprecated ``interfaceRequest``); never a partial result.
    Source: docs/design.md#selections; Multus ``parsePodNetworkAnnotation``, which ignores what
    this refuses (multus-cni #635, #1195, #588, #360, #213).
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


class _Duplicated(dict[str, Any]):
    """A decoded object whose source text repeated a key (kept so validation can report it)."""

    duplicates: tuple[str, ...] = ()


def _pairs_hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    keys = [k for k, _ in pairs]
    if len(set(keys)) == len(keys):
        return dict(pairs)
    obj = _Duplicated(pairs)
    obj.duplicates = tuple(sorted({k for k in keys if keys.count(k) > 1}))
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
                    field_path(index), f"must be a JSON object, got {strict_json.kind(element)}"
                )
            )
            continue
        found = _element_problems(index, element)
        if found:
            problems.extend(found)
            continue
        written_ns = element.get("namespace") or None
        selections.append(
            Selection(
                index=index,
                name=element["name"],
                namespace=written_ns or pod_namespace,
                written_namespace=written_ns,
                interface=element.get("interface") or None,
                notation=Notation.JSON,
                raw=element,
                raw_text=text,
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


def _element_problems(index: int, element: dict[str, Any]) -> list[errors.FieldError]:
    problems = [errors.FieldError(path, msg) for path, msg in _duplicate_keys(index, element)]
    problems += [
        errors.FieldError(field_path(index, key), msg)
        for key, msg in selection_fields.element_problems(element)
    ]
    return problems


def _duplicate_keys(index: int, element: dict[str, Any]) -> list[tuple[str, str]]:
    """Every object inside ``element`` whose source repeated a key (iterative: no deep recursion)."""
    found: list[tuple[str, str]] = []
    stack: list[tuple[Any, str]] = [(element, field_path(index))]
    while stack:
        node, path = stack.pop()
        if isinstance(node, _Duplicated):
            keys = ", ".join(repr(k) for k in node.duplicates)
            found.append(
                (path, f"repeats key(s) {keys}; Multus would keep only the last, write each key once")
            )
        if isinstance(node, dict):
            stack.extend((v, f"{path}.{k}") for k, v in node.items())
        elif isinstance(node, list):
            stack.extend((v, f"{path}[{i}]") for i, v in enumerate(node))
    return found


# --- Comma form ------------------------------------------------------------------------------


def _parse_comma(value: str, pod_namespace: str) -> tuple[list[Selection], list[errors.FieldError]]:
    items = value.split(",")
    selections: list[Selection] = []
    problems: list[errors.FieldError] = []
    for index, item in enumerate(items):
        parsed = _parse_comma_item(index, item.strip(), len(items))
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


def _parse_comma_item(index: int, item: str, count: int) -> tuple[str, str, str] | errors.FieldError:
    """Split ``[ns/]name[@ifname]``: the last ``@`` first, then ``/`` (multus-cni #213)."""
    path = field_path(index)
    if not item:
        where = "a trailing comma" if index == count - 1 else "a doubled or leading comma"
        return errors.FieldError(
            path, f"empty entry at position {index + 1} ({where} or blank text); remove the extra comma"
        )
    if item.count("@") > 1:
        return errors.FieldError(path, f"{item!r} has more than one '@'; write [namespace/]name[@interface]")
    left, at, ifname = item.rpartition("@") if "@" in item else (item, "", "")
    ifname = ifname.strip()
    if at and not ifname:
        return errors.FieldError(
            path, f"{item!r} has '@' but no interface name; remove '@' or name the interface"
        )
    if left.count("/") > 1:
        return errors.FieldError(path, f"{item!r} has more than one '/'; write [namespace/]name[@interface]")
    ns, slash, name = left.rpartition("/") if "/" in left else ("", "", left)
    ns, name = ns.strip(), name.strip()
    if slash and not ns:
        return errors.FieldError(path, f"{item!r} has '/' but no namespace; remove '/' or name the namespace")
    for label, part in (("namespace", ns), ("name", name)):
        if label == "namespace" and not part:
            continue
        if not part:
            return errors.FieldError(path, f"{item!r} has an empty network name")
        if not _COMMA_NAME_RE.fullmatch(part) or len(part) > (63 if label == "namespace" else 253):
            return errors.FieldError(
                path,
                f"{label} {part!r} in {item!r} must be lower-case alphanumerics or '-', starting and ending "
                "alphanumeric (use the JSON form for names with '.')",
            )
    if ifname:
        problem = names.ifname_problem(ifname)
        if problem is not None:
            return errors.FieldError(field_path(index, "interface"), problem)
    return ns, name, ifname
