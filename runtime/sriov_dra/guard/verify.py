"""Post-ADD verification: did Multus really attach every selected interface? (pure)

Multus can report success without its secondaries: a stale informer copy of the Pod, a Pod not
found, no API client in thin mode, a primary-only config, or a delegate that returns success
without creating an interface all end in a result for the primary alone (reference multus.md
§11.2; multus-cni #492). So after a successful Multus ADD of a Pod with selections the guard
checks, for every selection it read live (managed shadow or ordinary NAD), from what it reads
itself:

* the requested interface (the selection's ``interface``, or the ``net<N>`` Multus derives) exists
  in the Pod's network namespace (read over netlink), and for a managed shadow, where the kernel
  reports the device's bus parent, it is the PCI function of the binding;
* the live ``k8s.v1.cni.cncf.io/network-status`` annotation, which Multus writes before it
  returns, has an entry named ``<namespace>/<NAD name>`` with that interface.

Any finding fails the ADD (after the caller ran Multus DEL). The guard never writes network-status:
whereabouts' reconciler trusts it (reference multus.md §11.7). This module does no I/O.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from sriov_dra.guard import decisions, shadows
from sriov_dra_rules import names

Reason = decisions.Reason
Violation = decisions.Violation


class Link(Protocol):
    """What verification reads of one interface (``host.netlink.LinkInfo`` satisfies it)."""

    @property
    def name(self) -> str: ...

    @property
    def parent_bus(self) -> str | None: ...

    @property
    def parent_device(self) -> str | None: ...


def interface_violations(
    expected: Sequence[shadows.ExpectedInterface], links: Sequence[Link], *, owner: str = "the Pod"
) -> list[Violation]:
    """Missing interfaces (one violation naming all of them), then PCI parents that differ.

    ``owner`` names the Pod in messages (``Pod ns/name``). A PCI parent is compared only for
    managed interfaces (``pci_address`` set).
    Source: spec §10.3; multus-cni #492 (success without the requested secondaries).
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
    expected: Sequence[shadows.ExpectedInterface], pod: Mapping[str, Any], *, owner: str = "the Pod"
) -> list[Violation]:
    """One violation naming every selected network without a matching network-status entry.

    ``owner`` names the Pod in messages (``Pod ns/name``).
    """
    meta = pod.get("metadata")
    annotations = meta.get("annotations") if isinstance(meta, Mapping) else None
    text = annotations.get(names.NETWORK_STATUS_ANNOTATION) if isinstance(annotations, Mapping) else None
    entries: list[Mapping[str, Any]] = []
    problem = ""
    if text is None:
        problem = "the annotation is absent"
    else:
        try:
            decoded = json.loads(text)
        except ValueError as exc:
            decoded, problem = None, f"the annotation is not JSON ({exc})"
        except RecursionError:
            decoded, problem = None, "the annotation is not JSON (nested too deeply)"
        if isinstance(decoded, list):
            entries = [e for e in decoded if isinstance(e, Mapping)]
        elif not problem:
            problem = "the annotation is not a JSON list"
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
