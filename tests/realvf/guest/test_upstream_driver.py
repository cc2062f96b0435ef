"""Upstream dra-driver-sriov and this plugin publish equal devices for the guest's real VFs.

Upstream's driver (the commit pinned in tools/versions.env, built by ``make setup``) runs in the
guest on the same eight VFs as its image runs it: a pci.ids database (``PCIDB_PATH``, from
Debian's ``pci.ids`` package; without it it exits with ``pcidb: No pci-ids DB files found``), its
kubelet directories created beforehand, ``CONFIGURATION_MODE=MULTUS`` (else it starts its NRI
plugin) and the plugin namespace with the session's SriovResourcePolicy and DeviceAttributes.
Both drivers use the same driver and pool names, so they cannot serve one node together: upstream
serves a second Node of the host's control plane, :data:`UPSTREAM_NODE`, with the guest Node's
labels (the policy selects it too) and a ``NoSchedule`` taint (no workload lands there), while the
session's plugin keeps serving the guest Node. Every device upstream publishes must equal this
plugin's device of the same name, attributes and capacities, and the names must be the same set,
so a DeviceClass selector written for upstream keeps matching after a migration; this plugin's only
extra attribute is the standard NUMA key (:data:`ONLY_THIS_PLUGIN`). Slice-level fields (node name,
pool, generation) differ by construction and are not compared, nor are device taints (health, not
identity: upstream sets none, and this plugin's health taint outlives a VF's return by 30 s).
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from tests.realvf import kubeapi
from tests.realvf.guest import kubeplugin, realvfs

from sriov_dra_lab import kubelet_plugins, processes
from sriov_dra_rules import names

UPSTREAM_NODE = "realvf-guest-upstream"
TAINT = {"key": "realvf.sriov-dra/upstream-driver", "value": "compare", "effect": "NoSchedule"}
ONLY_THIS_PLUGIN = {"resource.kubernetes.io/numaNode": "dra.net/numaNode"}
"""Attributes this plugin publishes beyond upstream's, each with the upstream attribute it equals: the
standard NUMA key beside upstream's own (docs/plugin.md). A selector written for upstream never
names them, so it keeps matching."""
REGISTRATION_WAIT_S = 25.0
"""How long to wait for its registration socket (it stops waiting for the kubelet after 30 s)."""
BIN_DIR = realvfs.REPO / ".realvf-bin"
"""The run image's pinned tools (tests/realvf/vm.py ``GUEST_BIN_DIR``): the driver and pci.ids."""


def devices(api: client.ApiClient, node: str) -> dict[str, dict[str, Any]]:
    """Device name -> the device as published (JSON) in this driver's ResourceSlices for ``node``."""
    slices = client.ResourceV1Api(api).list_resource_slice(field_selector=f"spec.nodeName={node}")
    out = {}
    for item in slices.items:
        if item.spec.driver != names.DRIVER_NAME:
            continue
        for device in api.sanitize_for_serialization(item)["spec"].get("devices") or []:
            out[device["name"]] = device
    return out


def _differences(name: str, ours: dict[str, Any], theirs: dict[str, Any]) -> list[str]:
    """One line per field or attribute of device ``name`` that this plugin and upstream publish differently."""
    out = []
    # Taints are health, not identity: a selector never reads them, upstream sets none, and this plugin's
    # stay 30 s after a VF came back (an earlier module may have just removed and re-created the VFs).
    out += [
        f"{name} taint {t}: not this plugin's health taint"
        for t in ours.get("taints") or []
        if t.get("key") != f"{names.DOMAIN}/unhealthy"
    ]
    for field in sorted((set(ours) | set(theirs)) - {"taints"}):
        mine, other = ours.get(field), theirs.get(field)
        if field in ("attributes", "capacity") and isinstance(mine, dict) and isinstance(other, dict):
            for key in sorted(set(mine) | set(other)):
                if field == "attributes" and key in ONLY_THIS_PLUGIN and key not in other:
                    if mine[key] != other.get(ONLY_THIS_PLUGIN[key]):
                        out.append(
                            f"{name} {key}: {mine[key]} differs from upstream's {ONLY_THIS_PLUGIN[key]}"
                        )
                elif mine.get(key) != other.get(key):
                    out.append(
                        f"{name} {field} {key}: this plugin {mine.get(key)}, upstream {other.get(key)}"
                    )
        elif mine != other:
            out.append(f"{name} {field}: this plugin {mine}, upstream {other}")
    return out


@pytest.fixture(scope="module")
def upstream_node(api: client.ApiClient) -> Iterator[str]:
    """:data:`UPSTREAM_NODE` with the guest Node's labels and :data:`TAINT`; deleted with its slices after."""
    core = client.CoreV1Api(api)
    labels = core.read_node(kubeapi.NODE_NAME).metadata.labels or {}
    core.create_node(
        client.V1Node(
            metadata=client.V1ObjectMeta(name=UPSTREAM_NODE, labels=dict(labels)),
            spec=client.V1NodeSpec(taints=[client.V1Taint(**TAINT)]),
        )
    )
    try:
        yield UPSTREAM_NODE
    finally:
        core.delete_node(UPSTREAM_NODE)
        res = client.ResourceV1Api(api)
        for item in res.list_resource_slice(field_selector=f"spec.nodeName={UPSTREAM_NODE}").items:
            try:  # the garbage collector deletes them too once the Node is gone
                res.delete_resource_slice(item.metadata.name)
            except client.ApiException as exc:
                if exc.status != 404:
                    raise


@dataclass
class Upstream:
    """Upstream's running driver and the kubelet's client for its DRA socket."""

    process: processes.Process
    dra: kubelet_plugins.DraPluginClient


def run_upstream(api: client.ApiClient, node: str, root: Path) -> Iterator[Upstream]:
    """Upstream's driver serving ``node`` (state under ``root``), registered, once its slices list every
    device this plugin publishes for the guest's Node; stopped after (skips when it is not in the run image)."""
    binary, pci_ids = BIN_DIR / "dra-driver-sriov", BIN_DIR / "pci.ids"
    missing = [p.name for p in (binary, pci_ids) if not p.is_file()]
    if missing:
        pytest.skip(f"{missing} not in the run image (make setup builds dra-driver-sriov; Debian's pci.ids)")
    for sub in ("registry", "plugins", "cdi"):
        (root / sub).mkdir()
    argv = [
        str(binary),
        f"--node-name={node}",
        f"--kubeconfig={os.environ['SRIOV_DRA_REALVF_KUBECONFIG']}",
        f"--cdi-root={root / 'cdi'}",
        f"--kubelet-registrar-directory-path={root / 'registry'}",
        f"--kubelet-plugins-directory-path={root / 'plugins'}",
        f"--namespace={kubeapi.PLUGIN_NS}",
        "--configuration-mode=MULTUS",
    ]
    proc = processes.Process(
        "dra-driver-sriov",
        argv,
        root / "upstream.log",
        env={**os.environ, "PCIDB_PATH": str(pci_ids)},
        stop_grace_s=10.0,
    )
    started = time.monotonic()
    proc.start()
    try:
        # It publishes only once the kubelet accepted its registration, and gives up after 30 s.
        socket = kubelet_plugins.wait_for_new_socket(root / "registry", timeout_s=REGISTRATION_WAIT_S)
        assert socket is not None, f"no registration socket:\n{processes.tail(proc.log_path, 40)}"
        registered = kubelet_plugins.register_plugin(socket, timeouts=kubeplugin.TCG_TIMEOUTS)
        registered_s = time.monotonic() - started
        want = set(devices(api, kubeapi.NODE_NAME))
        kubeplugin.eventually(
            f"upstream's ResourceSlices for {node} listing {len(want)} devices "
            f"(log {proc.log_path}):\n{processes.tail(proc.log_path, 20)}",
            lambda: set(devices(api, node)) == want or not proc.running(),
        )
        assert proc.running(), f"upstream's driver exited:\n{processes.tail(proc.log_path, 40)}"
        print(
            f"upstream dra-driver-sriov: registered after {registered_s:.1f}s, {len(want)} devices published "
            f"after {time.monotonic() - started:.1f}s"
        )
        dra = kubelet_plugins.DraPluginClient(registered, call_timeout_s=kubeplugin.TCG_TIMEOUTS.call_s)
        try:
            yield Upstream(proc, dra)
        finally:
            dra.close()
    finally:
        proc.stop()


@pytest.fixture(scope="module")
def upstream_driver(
    api: client.ApiClient,
    upstream_node: str,
    plugin: kubeplugin.Plugin,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[processes.Process]:
    """Upstream's driver serving :data:`UPSTREAM_NODE` (:func:`run_upstream`) beside the session's plugin."""
    root = tmp_path_factory.mktemp("upstream")
    try:
        for upstream in run_upstream(api, upstream_node, root):
            yield upstream.process
    finally:
        shutil.rmtree(root, ignore_errors=True)


def test_upstream_publishes_the_same_device_names_attributes_and_capacities_for_the_real_vfs(
    api: client.ApiClient, upstream_driver: processes.Process, all_vfs: list[realvfs.RawVf]
) -> None:
    ours, theirs = devices(api, kubeapi.NODE_NAME), devices(api, UPSTREAM_NODE)
    assert len(ours) == len(all_vfs) == 8, sorted(ours)
    assert sorted(theirs) == sorted(ours)
    differences = [line for name in sorted(ours) for line in _differences(name, ours[name], theirs[name])]
    assert not differences, "devices that differ:\n" + "\n".join(differences)
    attributes = next(iter(ours.values()))["attributes"]
    print(
        f"both drivers publish {len(ours)} devices with these {len(attributes)} attributes: {sorted(attributes)}"
    )
