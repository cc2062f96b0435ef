"""Shared parts of the driver cluster tests (publisher, prepare, mapping report): the plugin's API
objects, a simulated Node and a publisher on a fake-sysfs node."""

from __future__ import annotations

import threading
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

import sriov_dra
from sriov_dra.driver import publisher
from sriov_dra.kube import apply
from sriov_dra_lab.fakes import fake_pci, fake_sysfs
from sriov_dra_lab.nodes import SimulatedNode
from sriov_dra_rules import names

D = names.DOMAIN
MANIFESTS = Path(sriov_dra.__file__).resolve().parent / "manifests"
CRDS = [
    MANIFESTS / "crds" / f"{D}_sriovresourcepolicies.yaml",
    MANIFESTS / "crds" / f"{D}_deviceattributes.yaml",
]
DEVICE_CLASS = MANIFESTS / "deviceclasses" / f"{D}.yaml"


def install_plugin_objects(api: client.ApiClient, *extra: Mapping[str, Any]) -> None:
    """Apply the two shipped CRDs (waiting until established), the shipped DeviceClass and ``extra``.

    Objects are applied as an installation would (server-side apply through ``kube.apply``);
    raises what ``apply.apply_objects`` and ``apply.wait_crds_established`` raise.
    """
    crds = [yaml.safe_load(p.read_text()) for p in CRDS]
    apply.apply_objects(api, crds)
    apply.wait_crds_established(api, [c["metadata"]["name"] for c in crds])
    apply.apply_objects(api, [yaml.safe_load(DEVICE_CLASS.read_text()), *extra])


@pytest.fixture(scope="module")
def installed(api: client.ApiClient) -> None:
    """The two CRDs and the shipped DeviceClass, applied as an installation would."""
    install_plugin_objects(api)


@pytest.fixture
def node(api: client.ApiClient) -> Iterator[SimulatedNode]:
    name = f"pub-{uuid.uuid4().hex[:6]}"
    n = SimulatedNode(api, name, labels={"kubernetes.io/hostname": name}, interval_s=5.0).start()
    try:
        yield n
    finally:
        n.stop(delete=True)


Factory = Callable[..., publisher.Publisher]


@pytest.fixture
def start_publisher(
    api: client.ApiClient, installed: None, node: SimulatedNode, namespace: str, tmp_path: Path
) -> Iterator[Factory]:
    started: list[publisher.Publisher] = []

    def make(
        *,
        vfs_per_pf: int = 4,
        pfs: Sequence[fake_pci.FakePf] | None = None,
        policy_namespace: str | None = None,
        **kwargs: Any,
    ) -> publisher.Publisher:
        layout = fake_pci.two_root_pfs(vfs_per_pf) if pfs is None else pfs
        fake = fake_sysfs.build(tmp_path / f"sys{len(started)}", layout)
        pub = publisher.Publisher(
            api=api,
            node_name=node.name,
            sysfs=fake.sysfs,
            policy_namespace=policy_namespace or namespace,
            driver_name=names.DRIVER_NAME,
            stop=threading.Event(),
            settle_s=kwargs.pop("settle_s", 0.05),
            **kwargs,
        )
        started.append(pub)
        return pub.start()

    yield make
    for pub in started:
        pub.close()
