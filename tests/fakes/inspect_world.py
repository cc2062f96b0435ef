"""The objects of the gpu-nic-pairs example after prepare, for the ``sriov-dra inspect`` tests.

A claim with two GPU and two VF results, their ResourceSlices, two shadows with binding
annotations, the source templates and the Pod with Multus's network-status (:func:`world`), a
fake object reader answering the reads ``inspect_pod`` makes (:class:`FakeObjects`), and
:func:`rows`, which runs the real correlation over them.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from sriov_dra.cli import inspect_rows
from sriov_dra.core import binding_annotation
from sriov_dra.kube import errors as kube_errors
from sriov_dra.kube import objects
from sriov_dra_rules import names

POD_UID = "11111111-2222-3333-4444-555555555555"
CLAIM_UID = "c1a1c1a1-0000-4000-8000-000000000001"
SRIOV = names.DRIVER_NAME
RAILS = {
    "nic-0": ("0000:03:00.2", "pci0000:00", "rail-a-net", "192.0.2.0/24", "192.0.2.10/24", "dra0"),
    "nic-1": ("0000:81:00.2", "pci0000:80", "rail-b-net", "198.51.100.0/24", "198.51.100.10/24", "dra1"),
}


def template(name: str, subnet: str) -> dict[str, Any]:
    config = {
        "cniVersion": "1.0.0",
        "name": f"ai-{name}",
        "type": "sriov",
        "ipam": {"type": "whereabouts", "range": subnet},
    }
    return {
        "metadata": {
            "name": name,
            "namespace": "ai",
            "uid": f"5a5a5a5a-0000-4000-8000-00000000000{len(name) % 10}",
        },
        "spec": {"config": json.dumps(config)},
    }


def shadow(request: str) -> dict[str, Any]:
    pci, _root, source, subnet, _ip, ifname = RAILS[request]
    config = json.dumps(
        {
            "cniVersion": "1.0.0",
            "name": f"ai-{source}",
            "type": "sriov",
            "deviceID": pci,
            "ipam": {"type": "whereabouts", "range": subnet},
        }
    )
    binding = binding_annotation.Binding(
        attachment_id="a" * 63 + ("0" if request == "nic-0" else "1"),
        pod_uid=POD_UID,
        claim_uid=CLAIM_UID,
        node_name="lab-node-1",
        node_uid="0b7c6f2e-5a1d-4c3e-9f10-2a3b4c5d6e7f",
        source=binding_annotation.SourceRef("ai", source, "5a5a5a5a-0000-4000-8000-00000000000a", "1"),
        pci_address=pci,
        interface=ifname,
        config_sha256=binding_annotation.config_sha256(config),
    )
    return {
        "metadata": {
            "name": f"dra-sriov-{request[-1] * 32}",
            "namespace": "ai",
            "labels": {names.LABEL_POD_UID: POD_UID},
            "annotations": {names.BINDING_ANNOTATION: binding_annotation.encode_binding(binding)},
        },
        "spec": {"config": config},
    }


def world() -> dict[str, Any]:
    results = [
        {"request": "gpu-0", "driver": "gpu.nvidia.com", "pool": "lab-node-1", "device": "gpu-0"},
        {"request": "nic-0", "driver": SRIOV, "pool": "lab-node-1", "device": "0000-03-00-2"},
        {"request": "gpu-1", "driver": "gpu.nvidia.com", "pool": "lab-node-1", "device": "gpu-1"},
        {"request": "nic-1", "driver": SRIOV, "pool": "lab-node-1", "device": "0000-81-00-2"},
    ]
    claim = {
        "metadata": {
            "name": "pairs-devices",
            "namespace": "ai",
            "uid": CLAIM_UID,
            "ownerReferences": [
                {"apiVersion": "v1", "kind": "Pod", "name": "pairs", "uid": POD_UID, "controller": True}
            ],
        },
        "spec": {
            "devices": {
                "constraints": [
                    {"requests": ["gpu-0", "nic-0"], "matchAttribute": inspect_rows.PCIE_ROOT},
                    {"requests": ["gpu-1", "nic-1"], "matchAttribute": inspect_rows.PCIE_ROOT},
                ]
            }
        },
        "status": {"allocation": {"devices": {"results": results}}},
    }
    gpu_slice = {
        "spec": {
            "driver": "gpu.nvidia.com",
            "pool": {"name": "lab-node-1"},
            "devices": [
                {
                    "name": f"gpu-{i}",
                    "attributes": {"type": {"string": "gpu"}, inspect_rows.PCIE_ROOT: {"string": root}},
                }
                for i, root in enumerate(("pci0000:00", "pci0000:80"))
            ],
        }
    }
    vf_slice = {
        "spec": {
            "driver": SRIOV,
            "pool": {"name": "lab-node-1"},
            "devices": [
                {
                    "name": pci.replace(":", "-").replace(".", "-"),
                    "attributes": {
                        inspect_rows.DEVICE_ID: {"string": pci},
                        inspect_rows.PCIE_ROOT: {"string": root},
                    },
                }
                for pci, root, *_ in RAILS.values()
            ],
        }
    }
    status = [
        {"name": "ai/" + shadow(r)["metadata"]["name"], "interface": v[5], "ips": [v[4].split("/")[0]]}
        for r, v in RAILS.items()
    ]
    pod = {
        "metadata": {
            "name": "pairs",
            "namespace": "ai",
            "uid": POD_UID,
            "annotations": {names.NETWORK_STATUS_ANNOTATION: json.dumps(status)},
        },
        "spec": {
            "nodeName": "lab-node-1",
            "resourceClaims": [{"name": "devices", "resourceClaimTemplateName": "t"}],
        },
        "status": {"resourceClaimStatuses": [{"name": "devices", "resourceClaimName": "pairs-devices"}]},
    }
    return {
        "pods": [pod],
        "resourceclaims": [claim],
        "resourceslices": [gpu_slice, vf_slice],
        "network-attachment-definitions": [
            template("rail-a-net", "192.0.2.0/24"),
            template("rail-b-net", "198.51.100.0/24"),
            shadow("nic-0"),
            shadow("nic-1"),
        ],
    }


class FakeObjects:
    """The reads ``inspect_pod`` makes, answered from a dict of lists by resource plural."""

    def __init__(self, world: dict[str, Any]) -> None:
        self.world = world

    def _find(self, res: objects.Resource, name: str, namespace: str | None) -> dict[str, Any] | None:
        for item in self.world.get(res.plural, []):
            meta = item["metadata"]
            if meta["name"] == name and meta.get("namespace") == namespace:
                return copy.deepcopy(item)
        return None

    def get(self, res: objects.Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        found = self._find(res, name, namespace)
        if found is None:
            raise kube_errors.NotFound(f"{res} {namespace}/{name} not found", status=404)
        return found

    def get_or_none(
        self, res: objects.Resource, name: str, namespace: str | None = None
    ) -> dict[str, Any] | None:
        return self._find(res, name, namespace)

    def list(
        self, res: objects.Resource, namespace: str | None = None, *, label_selector: str | None = None
    ) -> objects.Listing:
        items = [
            copy.deepcopy(i)
            for i in self.world.get(res.plural, [])
            if namespace is None or i.get("metadata", {}).get("namespace") == namespace
        ]
        if label_selector:
            key, _, value = label_selector.partition("=")
            items = [i for i in items if (i["metadata"].get("labels") or {}).get(key) == value]
        return objects.Listing(items, "1")


def rows(
    world: dict[str, Any],
    netns: dict[str, list[str]] | None = None,
    metadata: dict[tuple[str, str, str], str] | None = None,
) -> list[inspect_rows.Row]:
    reader = (lambda _path: netns) if netns is not None else None
    files = (lambda ns, claim, request: metadata.get((ns, claim, request))) if metadata is not None else None
    return inspect_rows.inspect_pod(
        FakeObjects(world),
        "ai",
        "pairs",  # type: ignore[arg-type]
        netns="/var/run/netns/x" if reader else None,
        read_netns=reader,
        read_metadata=files,
    )
