"""SriovNetworks for the source NAD rendering tests: one network with only the fields a test sets."""

from __future__ import annotations

from typing import Any

from tests.fakes import operator_objects as oo


def simple(**spec: Any) -> dict[str, Any]:
    """SriovNetwork ``ns1/test`` (UID ``u-1``, no networkNamespace) with ``spec`` set and no ``logLevel`` unless given."""
    net = oo.sriov_network("test", namespace="ns1", network_namespace=None, uid="u-1", **spec)
    if "logLevel" not in spec:
        net["spec"].pop("logLevel")
    return net
