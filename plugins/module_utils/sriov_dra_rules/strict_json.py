"""Strict JSON decoding and deterministic encoding of CNI configuration text (docs/design.md#render).

A source NetworkAttachmentDefinition's CNI JSON is copied into every shadow and hashed, so
:func:`decode` keeps everything a plugin could see and refuses what is ambiguous: integers stay
``int``, other numbers keep their text (:class:`RawNumber`), key order and unknown fields are kept;
duplicate keys, non-JSON constants, lone surrogates and too deep nesting are errors with paths.
:func:`encode` is compact and a pure function of the value. No CNI semantics, no I/O, no floats.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, TypeAlias, Union, cast

from . import errors

# Union is needed here: a recursive alias spelled with "|" cannot use forward references.
JsonValue: TypeAlias = Union[dict[str, "JsonValue"], list["JsonValue"], str, int, bool, "RawNumber", None]
"""A decoded JSON value: objects are insertion-ordered ``dict``, numbers are ``int`` or RawNumber."""

_NUMBER_LITERAL: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_PLAIN_KEY: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# A \uD800-\uDFFF escape; only a lone one survives decoding as a surrogate code point.
_SURROGATE_ESCAPE: Final = re.compile(r"\\u[dD][89abcdefABCDEF]")


@dataclass(frozen=True, slots=True)
class RawNumber:
    """A JSON number with a fraction or exponent, kept exactly as written in the source text.

    Shapes: ``literal`` is a valid JSON number literal such as ``"1.50"`` or ``"1e3"``.
    Raises: ValueError if ``literal`` is not a JSON number literal.
    """

    literal: str

    def __post_init__(self) -> None:
        if _NUMBER_LITERAL.fullmatch(self.literal) is None:
            raise ValueError(f"{self.literal!r} is not a JSON number literal")


class _NonJsonConstant(ValueError):
    """Raised from the decoder hook for ``NaN``, ``Infinity`` and ``-Infinity``."""


class _NeedsExactEncoder(TypeError):
    """Raised from the fast encoder's ``default`` hook when the value holds a RawNumber."""


class _FastEncoder(json.JSONEncoder):
    """The C-accelerated encoder with our canonical settings; gives up on a RawNumber."""

    def __init__(self) -> None:
        super().__init__(ensure_ascii=False, separators=(",", ":"), allow_nan=False)

    def default(self, o: object) -> object:
        if isinstance(o, RawNumber):
            raise _NeedsExactEncoder
        raise TypeError(f"{type(o).__name__} is not a JSON value")


_ENCODER: Final = _FastEncoder()


def key_path(base: str, key: str) -> str:
    """Return the field path of ``key`` inside the object at ``base``.

    Shapes: ``base.key`` when ``key`` is an identifier-like word, else ``base["key"]`` with
    ``key`` JSON-quoted (``metadata.annotations["k8s.v1.cni.cncf.io/networks"]``).
    """
    if _PLAIN_KEY.fullmatch(key) is not None:
        return f"{base}.{key}"
    return f"{base}[{quoted_key(key)}]"


def index_path(base: str, index: int) -> str:
    """Return the field path of element ``index`` of the array at ``base`` (``base[3]``)."""
    return f"{base}[{index}]"


def decode(text: str, *, path: str = "$") -> JsonValue:
    """Decode strict JSON text into plain values, reporting every problem found with its path.

    Shapes: objects become ``dict`` in document key order, arrays ``list``, integers ``int``,
    other numbers :class:`RawNumber`, plus ``str``/``bool``/``None``. ``path`` names the text
    in error paths (``spec.config`` gives ``spec.config.plugins[1].type``).
    Raises: errors.InvalidSpec (reason ``InvalidSpec``) carrying one FieldError per problem:
    malformed JSON (with line and column), a non-JSON constant, an oversized integer, nesting
    deeper than the interpreter's recursion limit, lone surrogates (they have no UTF-8 form and Go
    would silently replace them), or each duplicate key. The root may be any JSON value; callers
    check its kind.

    The object-pair pass sees every ``key: value`` pair in document order, because a plain map
    decode keeps only one of two equal keys; a duplicate is ambiguous (Go's decoder keeps the
    last, others the first), so re-serialising it would be a silent choice.
    Source: docs/design.md#render; RFC 8259 §4 (duplicate names are not interoperable).
    """
    return cast(JsonValue, _decode(text, path, RawNumber, sequence=False))


def decode_plain(text: str, *, path: str = "$") -> object:
    """Decode strict JSON text like :func:`decode`, but give non-integer numbers as ``float``.

    For callers that hand the value on to the standard library (``json.dumps``) or compare it
    with values that came from elsewhere (Ansible module arguments): they get exactly what
    ``json.loads`` gives for valid input, and the same refusals as :func:`decode` otherwise.
    Shapes: as :func:`decode`, with ``float`` in place of :class:`RawNumber` (``1e999`` is ``inf``,
    as ``json.loads`` gives it).
    Raises: errors.InvalidSpec as :func:`decode`.
    """
    return _decode(text, path, float, sequence=False)


def decode_sequence(text: str, *, path: str = "$") -> list[JsonValue]:
    """Decode comma-separated JSON values written without enclosing brackets (``{..},{..}``).

    This is the shape of the SriovNetwork ``spec.metaPlugins`` string (one or more CNI plugin
    objects pasted after the sriov object of a conflist). Values get the paths ``path[0]``,
    ``path[1]``, ... and line/column positions count in ``text`` itself. Empty or blank text
    gives ``[]``; callers decide whether that is allowed.
    Raises: errors.InvalidSpec as :func:`decode` (a trailing or doubled comma is malformed JSON).
    """
    return cast(list[JsonValue], _decode(text, path, RawNumber, sequence=True))


def decode_file(raw: bytes, *, what: str, source: str) -> object:
    """Decode the bytes of a JSON file a person or an installer wrote (a CNI config, ...).

    ``what`` and ``source`` name the file in the summary (``primary config /etc/cni/net.d/10-x``);
    paths in the errors start at ``$``.
    Shapes: UTF-8 text only; plain values as :func:`decode_plain` gives them.
    Raises: errors.InvalidSpec, summary ``<what> <source> is not valid JSON`` with one FieldError
    per problem (a repeated key with its path, NaN, malformed syntax), or ``... is not UTF-8 text``.
    """
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise errors.InvalidSpec(
            f"{what} {source} is not UTF-8 text", errors=[errors.FieldError("$", f"{exc}; save it as UTF-8")]
        ) from None
    try:
        return decode_plain(text)
    except errors.InvalidSpec as exc:
        raise errors.InvalidSpec(f"{what} {source} is not valid JSON", errors=exc.errors) from None


def kind(value: object) -> str:
    """Name the JSON kind of a decoded value for messages: ``an object``, ``a list``, ``a string``,
    ``a number``, ``a boolean`` or ``null`` (``got a list``)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, int | float | RawNumber):
        return "a number"
    return type(value).__name__


def walk(value: JsonValue, path: str = "$") -> list[tuple[JsonValue, str]]:
    """Every container and scalar under ``value`` with its field path, in document order.

    Shapes: ``[(value, path), (first child, path.key or path[0]), ...]``; iterative, so any depth
    that :func:`decode` accepts is walked without recursion.
    """
    return _walk(value, path)


def _decode(text: str, path: str, parse_float: Callable[[str], object], *, sequence: bool) -> object:
    duplicates: list[tuple[dict[str, JsonValue], dict[str, list[JsonValue]]]] = []

    def object_pairs(pairs: list[tuple[str, JsonValue]]) -> dict[str, JsonValue]:
        obj = dict(pairs)
        if len(obj) != len(pairs):
            values: dict[str, list[JsonValue]] = {}
            for k, v in pairs:
                values.setdefault(k, []).append(v)
            duplicates.append((obj, {k: vs for k, vs in values.items() if len(vs) > 1}))
        return obj

    def reject_constant(name: str) -> JsonValue:
        raise _NonJsonConstant(name)

    problem: str | None = None
    value: JsonValue = None
    # A sequence is decoded as an array; positions are then shifted back by the added "[".
    source = f"[{text}]" if sequence else text
    shift = 1 if sequence else 0
    try:
        value = json.loads(
            source,
            object_pairs_hook=object_pairs,
            parse_float=parse_float,
            parse_constant=reject_constant,
        )
    except json.JSONDecodeError as exc:
        pos = max(exc.pos - shift, 0)
        column = exc.colno - shift if exc.lineno == 1 else exc.colno
        problem = (
            f"malformed JSON at line {exc.lineno} column {max(column, 1)} (offset {pos}): {exc.msg}; "
            "fix the JSON syntax"
        )
    except _NonJsonConstant as exc:
        problem = f"{exc} is not a JSON number; use a finite number literal"
    except ValueError as exc:
        problem = f"number not accepted ({exc}); use a shorter number"
    except RecursionError:
        problem = "arrays or objects are nested too deeply to decode; flatten the JSON"
    if problem is not None:
        raise errors.InvalidSpec("text is not strict JSON", errors=[errors.FieldError(path, problem)])
    found: list[errors.FieldError] = []
    if duplicates:
        found.extend(_duplicate_errors(value, duplicates, path))
    if _SURROGATE_ESCAPE.search(text) is not None:
        found.extend(_surrogate_errors(value, path))
    errors.raise_if_any(found, "text is not strict JSON")
    return value


def encode(value: JsonValue) -> str:
    """Serialise ``value`` to compact canonical JSON text.

    Shapes: no whitespace between tokens, object keys in the value's order, non-ASCII kept
    as-is, integers in canonical decimal form, RawNumber literals verbatim. The same value
    always gives the same text. Values outside :data:`JsonValue` that the standard library
    encodes (a float, a tuple) are written as it writes them; :func:`decode` never produces them.
    Raises: TypeError for any other object; ValueError for a NaN or infinite float.
    """
    try:
        return _ENCODER.encode(value)
    except _NeedsExactEncoder:
        parts: list[str] = []
        _emit(value, parts)
        return "".join(parts)


def encode_bytes(value: JsonValue, *, path: str = "$") -> bytes:
    """Serialise ``value`` like :func:`encode` and return the exact UTF-8 bytes.

    Raises: errors.InvalidSpec naming each string or key at or under ``path`` that holds a
    lone surrogate (it has no UTF-8 form); TypeError as :func:`encode`.
    """
    text = encode(value)
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:
        errors.raise_if_any(_surrogate_errors(value, path), "value has no UTF-8 form")
        raise


def _emit(value: JsonValue, parts: list[str]) -> None:
    """Append the canonical text of ``value``; identical output to the fast C encoder."""
    if value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, str):
        parts.append(_ENCODER.encode(value))
    elif isinstance(value, int):
        parts.append(int.__repr__(value))
    elif isinstance(value, float):  # never decoded; written as the fast encoder writes it
        parts.append(_ENCODER.encode(value))
    elif isinstance(value, RawNumber):
        parts.append(value.literal)
    elif isinstance(value, dict):
        parts.append("{")
        for i, (k, v) in enumerate(value.items()):
            if not isinstance(k, str):
                raise TypeError(f"object key {k!r} is not a string")
            if i:
                parts.append(",")
            parts.append(_ENCODER.encode(k))
            parts.append(":")
            _emit(v, parts)
        parts.append("}")
    elif isinstance(value, list | tuple):
        parts.append("[")
        for i, v in enumerate(value):
            if i:
                parts.append(",")
            _emit(v, parts)
        parts.append("]")
    else:
        raise TypeError(f"{type(value).__name__} is not a JSON value")


def _walk(value: JsonValue, path: str) -> list[tuple[JsonValue, str]]:
    """Every container and scalar under ``value`` with its path, in document order."""
    out: list[tuple[JsonValue, str]] = []
    stack: list[tuple[JsonValue, str]] = [(value, path)]
    while stack:
        node, node_path = stack.pop()
        out.append((node, node_path))
        if isinstance(node, dict):
            stack.extend((v, key_path(node_path, k)) for k, v in reversed(list(node.items())))
        elif isinstance(node, list):
            stack.extend((v, index_path(node_path, i)) for i, v in reversed(list(enumerate(node))))
    return out


DUPLICATE_VALUE_CHARS: Final = 40
"""How much of each value of a repeated key a message shows (longer values end in ``...``)."""


def shown_value(value: JsonValue) -> str:
    """A decoded value as JSON text for a message, at most :data:`DUPLICATE_VALUE_CHARS` characters.

    Shapes: ``"flannel"``, ``{"type":"x"}``, ``[1,2,3,4,...`` (cut values end in ``...``); a lone
    surrogate is written as its ``\\uXXXX`` escape, so the message stays valid UTF-8.
    """
    try:
        text = encode(value)
    except ValueError:  # an infinite float that decode_plain gave for a literal such as 1e999
        text = repr(value)
    if not has_utf8_form(text):
        text = "".join(c if not 0xD800 <= ord(c) <= 0xDFFF else f"\\u{ord(c):04x}" for c in text)
    if len(text) > DUPLICATE_VALUE_CHARS:
        text = text[: DUPLICATE_VALUE_CHARS - 3] + "..."
    return text


def _values_phrase(values: list[JsonValue]) -> str:
    shown = [shown_value(v) for v in values]
    return ", ".join(shown[:-1]) + " and " + shown[-1]


def _duplicate_errors(
    value: JsonValue, duplicates: list[tuple[dict[str, JsonValue], dict[str, list[JsonValue]]]], path: str
) -> list[errors.FieldError]:
    """One FieldError per repeated key of an object that is part of the decoded value.

    An object inside a value that a later repeat of its parent key replaced is not part of the
    value and has no path; it is not reported on its own, because that parent's repeat always
    is (``{"a":{"b":1,"b":2},"a":0}`` gives one error, at ``$.a``).
    """
    nodes = [(node, node_path) for node, node_path in _walk(value, path) if isinstance(node, dict)]
    paths = {id(node): node_path for node, node_path in nodes}
    order = {id(node): i for i, (node, _node_path) in enumerate(nodes)}
    reachable = [item for item in duplicates if id(item[0]) in paths]
    found: list[errors.FieldError] = []
    for obj, repeated in sorted(reachable, key=lambda item: order[id(item[0])]):
        for key, values in repeated.items():
            found.append(
                errors.FieldError(
                    key_path(paths[id(obj)], key),
                    f"duplicate key {quoted_key(key)} in one object with the values "
                    f"{_values_phrase(values)} (readers disagree on which value wins); keep exactly one",
                )
            )
    return found


def quoted_key(key: str) -> str:
    """``key`` JSON-quoted for a message, its lone surrogates as ``\\uXXXX`` escapes (valid UTF-8)."""
    quoted = json.dumps(key, ensure_ascii=False)
    return quoted if has_utf8_form(quoted) else json.dumps(key)


def has_utf8_form(text: str) -> bool:
    """True unless ``text`` holds a lone UTF-16 surrogate (a JSON ``"\\ud800"`` escape).

    No UTF-8 byte string can carry one, so the API server (and any Go reader) could never store
    it.
    """
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _surrogate_errors(value: JsonValue, path: str) -> list[errors.FieldError]:
    found: list[errors.FieldError] = []
    fix = "contains a lone UTF-16 surrogate, which has no UTF-8 form; use a valid character or pair"
    for node, node_path in _walk(value, path):
        if isinstance(node, dict):
            found.extend(
                errors.FieldError(key_path(node_path, k), f"key {fix}") for k in node if not has_utf8_form(k)
            )
        elif isinstance(node, str) and not has_utf8_form(node):
            found.append(errors.FieldError(node_path, f"string {fix}"))
    return found
