"""Source NADs and helpers for the shadow config renderer's tests (docs/design.md#render).

Shared by the unit tests of :mod:`sriov_dra.core.render` and its rule modules
(``template_layout``, ``template_fields``): :func:`nad` builds a source NAD as read from the API,
:func:`reject` runs the real renderer and returns the error it raises.
"""

from __future__ import annotations

import json

import pytest

from sriov_dra.core import render
from sriov_dra_rules import errors, strict_json
from sriov_dra_rules.strict_json import JsonValue

PCI = "0000:3b:02.1"
OTHER_PCI = "0000:3b:02.2"
INVALID = errors.Reason.INVALID_NETWORK_TEMPLATE
UNSUPPORTED = errors.Reason.UNSUPPORTED_NETWORK_TEMPLATE


def nad(
    config: object = None, *, name: str = "net-a", namespace: str = "ns-a", **extra: object
) -> dict[str, object]:
    """A source NAD as read from the API; ``config`` dicts are serialised, strings used as-is."""
    text = config if not isinstance(config, dict | list) else json.dumps(config)
    metadata: dict[str, object] = {
        "name": name,
        "namespace": namespace,
        "uid": "5a5a5a5a-0000-4000-8000-00000000000a",
    }
    metadata.update(extra)
    obj: dict[str, object] = {"apiVersion": "k8s.cni.cncf.io/v1", "kind": "NetworkAttachmentDefinition"}
    obj["metadata"] = metadata
    if config is not None:
        obj["spec"] = {"config": text}
    return obj


def rendered_doc(result: render.RenderedConfig) -> dict[str, JsonValue]:
    doc = strict_json.decode(result.config_text)
    assert isinstance(doc, dict)
    return doc


def reject(source: object, pci: str = PCI) -> errors.InvalidSpec:
    with pytest.raises(errors.InvalidSpec) as caught:
        render.render_shadow_config(source, pci)  # type: ignore[arg-type]
    return caught.value


def paths(exc: errors.InvalidSpec) -> list[str]:
    return [e.path for e in exc.errors]


SINGLE = {
    "cniVersion": "1.0.0",
    "name": "sriov-net",
    "type": "sriov",
    "vlan": 100,
    "ipam": {"type": "host-local", "subnet": "10.56.217.0/24"},
}
CONFLIST = {
    "cniVersion": "1.0.0",
    "name": "ai-workloads-rail-a",
    "plugins": [
        {"type": "sriov", "ipam": {"type": "whereabouts", "range": "192.0.2.0/24"}},
        {"type": "tuning", "mtu": 9000},
    ],
}
