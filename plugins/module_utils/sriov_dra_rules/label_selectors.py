# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""Label selectors and node selectors as SriovResourcePolicy uses them: the one matcher of both.

Shared by the plugin's policy evaluation (``sriov_dra.core.policies``), the DeviceAttributes
selection and the preflight's policy-overlap check, so every part decides which policy applies
to which node alike. A LabelSelector has Kubernetes semantics; a NodeSelector is read as upstream
dra-driver-sriov reads it (:func:`evaluate_node_selector`), and every construct on which the two
disagree is reported, never guessed (docs/design.md#policy-precedence). Pure, standard library
only; shared with the collection (siblings by relative import).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from . import errors, names

_SET_OPS = frozenset({"In", "NotIn"})
_EXIST_OPS = frozenset({"Exists", "DoesNotExist"})
_NUMERIC_OPS = frozenset({"Gt", "Lt"})
"""Valid in a Kubernetes NodeSelectorRequirement, refused by upstream's conversion (module docstring)."""


@dataclass(frozen=True)
class Requirement:
    """One label requirement; ``values`` is empty for ``Exists``/``DoesNotExist``."""

    key: str
    operator: str
    values: frozenset[str]

    def matches(self, labels: Mapping[str, str]) -> bool:
        """Kubernetes ``labels.Requirement.Matches`` for the four set-based operators."""
        if self.operator == "In":
            return self.key in labels and labels[self.key] in self.values
        if self.operator == "NotIn":
            return self.key not in labels or labels[self.key] not in self.values
        if self.operator == "Exists":
            return self.key in labels
        return self.key not in labels


@dataclass(frozen=True)
class LabelSelector:
    """A parsed label selector; no requirements (``{}``) selects everything."""

    requirements: tuple[Requirement, ...]

    def matches(self, labels: Mapping[str, str]) -> bool:
        """True when every requirement holds."""
        return all(r.matches(labels) for r in self.requirements)


def parse_requirement(raw: object, path: str) -> tuple[Requirement | None, list[errors.FieldError]]:
    """Parse one ``matchExpressions`` entry with operators In, NotIn, Exists, DoesNotExist.

    Shapes: key a qualified label key; In/NotIn need at least one value, Exists/DoesNotExist none;
    values are label values.
    Source: Kubernetes ``labels.NewRequirement``.
    """
    if not isinstance(raw, Mapping):
        return None, [errors.FieldError(path, "must be an object with key, operator and values")]
    key, op, values = raw.get("key"), raw.get("operator"), raw.get("values")
    problems: list[errors.FieldError] = []
    if not isinstance(key, str) or not key:
        problems.append(errors.FieldError(f"{path}.key", "must be a nonempty label key"))
    else:
        problems.extend(errors.FieldError(f"{path}.key", m) for m in names.qualified_name_errors(key))
    vals = [] if values is None else values
    if not isinstance(vals, list) or not all(isinstance(v, str) for v in vals):
        problems.append(errors.FieldError(f"{path}.values", "must be a list of strings"))
        vals = []
    for v in vals:
        problems.extend(errors.FieldError(f"{path}.values", m) for m in names.label_value_errors(v))
    if isinstance(op, str) and op in _SET_OPS:  # a list/object operator is unhashable: reported below
        if not vals:
            problems.append(errors.FieldError(f"{path}.values", f"operator {op} needs at least one value"))
    elif isinstance(op, str) and op in _EXIST_OPS:
        if vals:
            problems.append(errors.FieldError(f"{path}.values", f"operator {op} takes no values"))
    elif isinstance(op, str) and op in _NUMERIC_OPS:
        problems.append(
            errors.FieldError(
                f"{path}.operator",
                f"{op!r} is not supported: Kubernetes node affinity compares integer label values with it, "
                "but upstream dra-driver-sriov skips a nodeSelector term that uses it, so the term selects "
                "no node; list the label values with In or NotIn instead",
            )
        )
    else:
        problems.append(
            errors.FieldError(
                f"{path}.operator", f"{op!r} is not supported; use In, NotIn, Exists or DoesNotExist"
            )
        )
    if problems:
        return None, problems
    return Requirement(str(key), str(op), frozenset(vals)), []


def parse_label_selector(raw: object, path: str) -> tuple[LabelSelector | None, list[errors.FieldError]]:
    """Parse a ``metav1.LabelSelector``; ``(None, problems)`` when it is invalid.

    Source: Kubernetes ``metav1.LabelSelectorAsSelector``.
    """
    if not isinstance(raw, Mapping):
        return None, [errors.FieldError(path, "must be a label selector object")]
    problems: list[errors.FieldError] = []
    reqs: list[Requirement] = []
    match_labels = _or(raw.get("matchLabels"), {})
    if not isinstance(match_labels, Mapping):
        problems.append(errors.FieldError(f"{path}.matchLabels", "must map label keys to values"))
        match_labels = {}
    for key in sorted(match_labels, key=str):
        req, req_problems = parse_requirement(
            {"key": key, "operator": "In", "values": [match_labels[key]]}, f'{path}.matchLabels["{key}"]'
        )
        problems.extend(req_problems)
        if req is not None:
            reqs.append(req)
    expressions = _or(raw.get("matchExpressions"), [])
    if not isinstance(expressions, list):
        problems.append(errors.FieldError(f"{path}.matchExpressions", "must be a list"))
        expressions = []
    for index, expr in enumerate(expressions):
        req, req_problems = parse_requirement(expr, f"{path}.matchExpressions[{index}]")
        problems.extend(req_problems)
        if req is not None:
            reqs.append(req)
    for key in sorted(set(map(str, raw)) - {"matchLabels", "matchExpressions"}):
        problems.append(errors.FieldError(f"{path}.{key}", "unknown label selector field"))
    if problems:
        return None, problems
    return LabelSelector(tuple(reqs)), []


@dataclass(frozen=True)
class NodeSelection:
    """Upstream's answer for one node, plus what upstream and Kubernetes would decide differently.

    ``malformed`` lists shapes the schema forbids (not objects or lists where required).
    """

    applies: bool
    unsupported: tuple[errors.FieldError, ...] = ()
    malformed: tuple[errors.FieldError, ...] = ()

    def takes_part(self, managed: bool) -> bool:
        """Whether the policy's configs take part on this node (the plugin's decision).

        Compatibility mode: upstream's answer (:attr:`applies`). Managed mode
        (docs/design.md#policy-precedence, docs/design.md#eligibility): also when the selector
        uses a construct upstream and Kubernetes read differently, so its configs claim and block
        their devices instead of letting them fall through to another policy (rejected for the
        managed configuration rather than pretending to filter). A malformed selector takes part
        nowhere.
        """
        if self.malformed:
            return False
        return self.applies or (managed and bool(self.unsupported))


def evaluate_node_selector(raw: object, node_labels: Mapping[str, str], path: str) -> NodeSelection:
    """Evaluate a policy's ``spec.nodeSelector`` against this node's labels, as upstream does.

    ``None`` applies to every node. Terms are ORed; a term's ``matchExpressions`` are ANDed.
    Upstream's ``matchesNodeSelector`` differs from Kubernetes node affinity, and the plugin
    serving the policy is upstream's, so the preflight never predicts a match the plugin will not
    make: ``matchFields`` is ignored; an empty term or term list matches every node (Kubernetes:
    none); a term with ``Gt`` or ``Lt`` never matches (upstream converts each term with
    ``LabelSelectorAsSelector``, which refuses those operators, and skips the term). Each such
    construct, and every invalid requirement, is listed in :attr:`NodeSelection.unsupported`.
    Source: upstream dra-driver-sriov ``matchesNodeSelector``; docs/design.md#policy-precedence.
    """
    if raw is None:
        return NodeSelection(True)
    terms = raw.get("nodeSelectorTerms") if isinstance(raw, Mapping) else None
    if not isinstance(raw, Mapping) or not isinstance(terms, (list, type(None))):
        return NodeSelection(False, malformed=(errors.FieldError(path, "must be a core/v1 NodeSelector"),))
    if not terms:
        note = errors.FieldError(
            f"{path}.nodeSelectorTerms",
            "is empty (upstream selects every node, Kubernetes none); remove nodeSelector to select every node",
        )
        return NodeSelection(True, unsupported=(note,))
    applies = False
    unsupported: list[errors.FieldError] = []
    malformed: list[errors.FieldError] = []
    for index, term in enumerate(terms):
        term_path = f"{path}.nodeSelectorTerms[{index}]"
        if not isinstance(term, Mapping):
            malformed.append(errors.FieldError(term_path, "must be an object"))
            continue
        if term.get("matchFields"):
            unsupported.append(
                errors.FieldError(f"{term_path}.matchFields", "is ignored by upstream; use matchExpressions")
            )
        expressions = _or(term.get("matchExpressions"), [])
        if not isinstance(expressions, list):
            malformed.append(errors.FieldError(f"{term_path}.matchExpressions", "must be a list"))
            continue
        if not expressions:
            if not term.get("matchFields"):
                unsupported.append(
                    errors.FieldError(
                        term_path, "an empty term selects every node upstream, none in Kubernetes"
                    )
                )
            applies = True
            continue
        reqs: list[Requirement] = []
        for e_index, expr in enumerate(expressions):
            req, problems = parse_requirement(expr, f"{term_path}.matchExpressions[{e_index}]")
            unsupported.extend(problems)
            if req is not None:
                reqs.append(req)
        if len(reqs) == len(expressions) and all(r.matches(node_labels) for r in reqs):
            applies = True
    return NodeSelection(applies and not malformed, tuple(unsupported), tuple(malformed))


def _or(value: object, default: object) -> object:
    """``value`` unless it is absent (``None``); unlike ``or``, a wrong-typed ``{}``/``0`` stays visible."""
    return default if value is None else value
