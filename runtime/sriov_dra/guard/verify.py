"""Post-ADD verification: did Multus really attach every selected interface? (pure)

Multus can answer success with the primary alone (a stale Pod, no API client, a primary-only
config, a delegate that creates no interface; multus-cni #492), so after a successful ADD of a
Pod with selections every selection read live must have its interface in the Pod's network
namespace (for a managed shadow, on the binding's PCI function where the kernel reports it) and a
``network-status`` entry ``<namespace>/<NAD name>`` with that interface (docs/design.md#guard).
A finding fails the ADD after Multus DEL. The guard never writes network-status.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from sriov_dra.guard import decisions, shadow_checks
from sriov_dra_rules import names

Reason = decisions.Reason
Violation = decisions.Violation


class Link(Protocol):
    """What the guard reads of one interface after ADD (``host.netlink.LinkInfo`` satisfies it).

    Shapes: ``mac`` lowercase or ``None``; ``addresses`` CIDR strings in kernel order.
    """

    @property
    def name(self) -> str: ...

    @property
    def parent_bus(self) -> str | None: ...

    @property
    def parent_device(self) -> str | None: ...

    @property
    def mac(self) -> str | None: ...

    @property
    def addresses(self) -> Sequence[str]: ...


def interface_violations(
    expected: Sequence[shadow_checks.ExpectedInterface], links: Sequence[Link], *, owner: str = "the Pod"
) -> list[Violation]:
    """Missing interfaces (one violation naming all of them), then PCI parents that differ.

    ``owner`` names the Pod in messages (``Pod ns/name``). A PCI parent is compared only for
    managed interfaces (``pci_address`` set).
    Source: docs/design.md#guard-checks; multus-cni #492 (success without the requested secondaries).
    """
    by_name = {link.name: link for link in links}
    missing = [e for e in expected if e.ifname not in by_name]
    found: list[Violation] = []
    if missing:
        found.append(
            Violation(
                Reason.INTERFACES_MISSING,
                f"Multus reported success but these interfaces requested by {owner} are not in its network "
                "namespace: "
                + ", ".join(e.describe() for e in missing)
                + "; Multus DEL was run and the kubelet will retry the sandbox",
            )
        )
    for e in expected:
        link = by_name.get(e.ifname)
        if e.pci_address is None or link is None or link.parent_bus != "pci" or link.parent_device is None:
            continue
        if link.parent_device != e.pci_address:
            found.append(
                Violation(
                    Reason.INTERFACE_DEVICE_MISMATCH,
                    f"interface {e.ifname} ({e.network}) is PCI device {link.parent_device}, not the bound VF "
                    f"{e.pci_address}",
                )
            )
    return found


def network_status_violations(
    expected: Sequence[shadow_checks.ExpectedInterface], pod: Mapping[str, Any], *, owner: str = "the Pod"
) -> list[Violation]:
    """One violation naming every selected network without a matching network-status entry.

    ``owner`` names the Pod in messages (``Pod ns/name``).
    """
    entries, problem = network_status_entries(pod)
    # Only string pairs can match (a list or object value would also be unhashable here).
    present = {
        (e.get("name"), e.get("interface"))
        for e in entries
        if isinstance(e.get("name"), str) and isinstance(e.get("interface"), str)
    }
    missing = [e for e in expected if (e.network, e.ifname) not in present]
    if not missing:
        return []
    return [
        Violation(
            Reason.NETWORK_STATUS_MISSING,
            f"{names.NETWORK_STATUS_ANNOTATION} of {owner} has no entry for "
            + ", ".join(f"{e.network} on {e.ifname}" for e in missing)
            + (f" ({problem})" if problem else "")
            + "; Multus did not attach them from the live Pod; Multus DEL was run and the kubelet will retry",
        )
    ]


def network_status_entries(pod: Mapping[str, Any]) -> tuple[list[Mapping[str, Any]], str]:
    """The object entries of the Pod's network-status annotation, and what made it unreadable.

    Returns ``(entries, "")`` when it decodes to a list (non-object items skipped), else
    ``([], problem)`` naming why (absent, not JSON, not a list).
    """
    meta = pod.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    text = annotations.get(names.NETWORK_STATUS_ANNOTATION) if isinstance(annotations, Mapping) else None
    if text is None:
        return [], "the annotation is absent"
    try:
        decoded = json.loads(text)
    except ValueError as exc:
        return [], f"the annotation is not JSON ({exc})"
    except RecursionError:
        return [], "the annotation is not JSON (nested too deeply)"
    if not isinstance(decoded, list):
        return [], "the annotation is not a JSON list"
    return [e for e in decoded if isinstance(e, Mapping)], ""
