"""Builders of SriovResourcePolicy/DeviceAttributes objects and VF facts for the policy tests.

Shared by the unit tests of :mod:`sriov_dra.core.policies` and its sub-concern modules
(``resource_filters``, ``device_attributes``, ``device_facts``): four VFs on two rails (``ens1f0``
and ``ens2f0``, the last VF infiniband from another vendor), a dual-rail node, and
:func:`evaluate`, which runs the real evaluation over them.
"""

from __future__ import annotations

from sriov_dra.core import device_facts, policies
from sriov_dra_rules import errors

D = "sriovnetwork.k8snetworkplumbingwg.io"
NAME_KEY = f"{D}/netAttachDefName"
NS_KEY = f"{D}/netAttachDefNamespace"
R = errors.Reason


def vf(bdf: str, pf: str, pf_bdf: str, vf_id: int, **extra: object) -> device_facts.DeviceFacts:
    fields: dict[str, object] = {
        "pci_address": bdf,
        "vendor": "15b3",
        "device_id": "101e",
        "pf_device_id": "101d",
        "pf_name": pf,
        "pf_pci_address": pf_bdf,
        "vf_id": vf_id,
        "driver": "mlx5_core",
        "numa_node": 0,
        "pcie_root": "pci0000:3a" if pf == "ens1f0" else "pci0000:5d",
        "link_type": "ethernet",
    }
    fields.update(extra)
    return device_facts.DeviceFacts(**fields)  # type: ignore[arg-type]


DEVICES = (
    vf("0000:3b:02.0", "ens1f0", "0000:3b:00.0", 0),
    vf("0000:3b:02.1", "ens1f0", "0000:3b:00.0", 1),
    vf("0000:5e:02.0", "ens2f0", "0000:5e:00.0", 0),
    vf("0000:5e:02.1", "ens2f0", "0000:5e:00.0", 1, link_type="infiniband", vendor="8086", device_id="154c"),
)
RAIL_A = frozenset({"0000-3b-02-0", "0000-3b-02-1"})
RAIL_B = frozenset({"0000-5e-02-0", "0000-5e-02-1"})
ALL = RAIL_A | RAIL_B
NODE = {"networking.example.com/dual-rail": "true", "kubernetes.io/hostname": "node-a"}


def hostname_selector(node: str) -> dict[str, object]:
    """A SriovResourcePolicy ``spec.nodeSelector`` that matches the one Node labelled ``kubernetes.io/hostname=node``."""
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": [node]}]}
        ]
    }


def policy(name: str, *configs: dict[str, object], node_selector: object = None) -> dict[str, object]:
    spec: dict[str, object] = {"configs": list(configs)}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    return {"metadata": {"name": name, "namespace": "dra-driver-sriov"}, "spec": spec}


def device_attrs(name: str, labels: dict[str, str], attrs: dict[str, object]) -> dict[str, object]:
    return {"metadata": {"name": name, "labels": labels}, "spec": {"attributes": attrs}}


def pf_config(pf: str, template: str | None = None, **filter_extra: object) -> dict[str, object]:
    config: dict[str, object] = {"resourceFilters": [{"pfNames": [pf], **filter_extra}]}
    if template is not None:
        config["deviceAttributesSelector"] = {"matchLabels": {"networking.example.com/template": template}}
    return config


def rail_attrs(
    name: str, template: str, nad: object, extra: dict[str, object] | None = None
) -> dict[str, object]:
    attrs: dict[str, object] = {NAME_KEY: nad, **(extra or {})}
    return device_attrs(name, {"networking.example.com/template": template}, attrs)


def evaluate(
    pols: list[dict[str, object]],
    objs: list[dict[str, object]] | None = None,
    *,
    managed: bool = True,
    devices: tuple[device_facts.DeviceFacts, ...] = DEVICES,
    node: dict[str, str] | None = None,
) -> policies.PolicyEvaluation:
    return policies.evaluate_policies(
        devices, pols, objs or [], node_labels=NODE if node is None else node, managed=managed
    )


def reasons(ev: policies.PolicyEvaluation, device: str) -> tuple[errors.Reason, ...]:
    return ev.outcomes[device].reasons
