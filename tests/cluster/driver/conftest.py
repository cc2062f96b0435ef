"""Shared installation step of the driver cluster tests (publisher, prepare): the plugin's API objects."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client

import sriov_dra
from sriov_dra.kube import apply
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
