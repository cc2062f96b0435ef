# Copyright: sriov-dra developers
# Apache License 2.0 (see https://www.apache.org/licenses/LICENSE-2.0)
"""SriovNetworkNodePolicy node and NIC selection: the one reading of ``nodeSelector``/``nicSelector``.

Used by the operator's DRA plan (``sriov_dra.core.operator.node_policy``) and the collection's
``sriov_vf_plan`` filter, so both select nodes and PFs alike, as upstream sriov-network-operator
does: ``Selected()`` for nodes, policies applied in ``(priority, name)`` order (lower first,
default 99), ``SriovNetworkNicSelector`` fields that must all match a PF. An entry that is not a
non-empty string is ignored, never guessed. Pure, standard library only; shared with the
collection (siblings by relative import).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from . import device_selectors, errors

DEFAULT_PRIORITY = 99
"""Upstream's default ``spec.priority`` (lower is applied first)."""


def node_selected(node_selector: object, labels: Mapping[str, str]) -> bool:
    """Upstream ``Selected()``: every ``nodeSelector`` pair equals the node's label.

    Shapes: ``node_selector`` is the policy's ``{label: value}`` (``None`` or ``{}`` selects every
    node; a value that is not a string never equals a label); ``labels`` the Node's labels.
    """
    if node_selector is None:
        return True
    if not isinstance(node_selector, Mapping):
        return False
    return all(isinstance(v, str) and labels.get(str(k)) == v for k, v in node_selector.items())


def priority_of(spec: Mapping[str, object]) -> int:
    """A policy's ``spec.priority``; :data:`DEFAULT_PRIORITY` when missing or not an integer."""
    priority = spec.get("priority")
    return priority if isinstance(priority, int) and not isinstance(priority, bool) else DEFAULT_PRIORITY


@dataclass(frozen=True)
class NicSelector:
    """A policy's ``spec.nicSelector``, each field as given (``""``/``()`` when absent).

    ``pf_names`` keeps ``#first-last`` VF ranges; :attr:`whole_pf_names` strips them.
    """

    vendor: str = ""
    device_id: str = ""
    pf_names: tuple[str, ...] = ()
    root_devices: tuple[str, ...] = ()
    has_net_filter: bool = False
    problems: tuple[errors.FieldError, ...] = ()
    """Fields that could not be read (a misspelled ID, a malformed VF range); see :func:`read_nic_selector`."""

    @property
    def whole_pf_names(self) -> tuple[str, ...]:
        """The PF of every ``pfNames`` entry (``ens1f0#0-3`` -> ``ens1f0``)."""
        return tuple(n.split("#", 1)[0] for n in self.pf_names)

    @property
    def ranged_pf_names(self) -> tuple[str, ...]:
        """The ``pfNames`` entries that name a VF range (``<pf>#<first>-<last>``)."""
        return tuple(n for n in self.pf_names if "#" in n)

    def selects_pf(self, pf: Mapping[str, object]) -> bool:
        """Whether every given field matches one PF of the node.

        Shapes: ``pf`` as the ``sriov_facts`` module reports it: ``{"vendor", "device_id"`` (hex,
        without ``0x``), ``"name"`` (netdev), ``"pci_address"}``. IDs compare in sysfs spelling.
        A ``netFilter`` is not decided here (callers refuse it: no PF fact carries it), and a
        selector with :attr:`problems` selects nothing.
        """
        if self.problems:
            return False
        if self.vendor and self.vendor != str(pf.get("vendor") or "").lower():
            return False
        if self.device_id and self.device_id != str(pf.get("device_id") or "").lower():
            return False
        if self.pf_names and pf.get("name") not in self.whole_pf_names:
            return False
        return not self.root_devices or pf.get("pci_address") in self.root_devices


def read_nic_selector(spec: Mapping[str, object]) -> NicSelector:
    """Read ``spec.nicSelector`` of a policy's ``spec`` (a missing or non-object selector reads empty).

    Strings only: a field or list entry of another type, or an empty string, is left out. IDs
    and root devices are read in sysfs spelling, ``pfNames`` ranges checked against ``numVfs``
    (``device_selectors``); what cannot be read is in :attr:`NicSelector.problems` (callers
    refuse the policy with those words) and selects nothing.
    """
    raw = spec.get("nicSelector")
    nic: Mapping[str, object] = raw if isinstance(raw, Mapping) else {}
    problems: list[errors.FieldError] = []
    base = "spec.nicSelector"
    ids = []
    for key in ("vendor", "deviceID"):
        value = _string(nic.get(key))
        canonical, problem = device_selectors.pci_id(value, key) if value else ("", "")
        if problem:
            problems.append(errors.FieldError(f"{base}.{key}", problem))
        ids.append(canonical or "")
    roots = []
    for i, value in enumerate(_strings(nic.get("rootDevices"))):
        canonical, problem = device_selectors.pci_address(value)
        if canonical is None:
            problems.append(errors.FieldError(f"{base}.rootDevices[{i}]", f"{problem} (the PF's address)"))
        else:
            roots.append(canonical)
    num_vfs = spec.get("numVfs")
    bound = num_vfs if isinstance(num_vfs, int) and not isinstance(num_vfs, bool) else None
    pf_names = _strings(nic.get("pfNames"))
    for i, value in enumerate(pf_names):
        problem = device_selectors.pf_name(value, bound)[2]
        if problem:
            problems.append(errors.FieldError(f"{base}.pfNames[{i}]", problem))
    return NicSelector(
        ids[0],
        ids[1],
        pf_names,
        tuple(roots),
        has_net_filter=bool(nic.get("netFilter")),
        problems=tuple(problems),
    )


def _string(value: object) -> str:
    return value if isinstance(value, str) else ""


def _strings(value: object) -> tuple[str, ...]:
    return tuple(v for v in value if isinstance(v, str) and v) if isinstance(value, list) else ()
