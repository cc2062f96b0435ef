"""Guest half of bench/unprepare_upstream.py: NodeUnprepare of a one-VF claim, this plugin against upstream.

Runs inside the realvf guest (pytest, with the guest fixtures of ``tests.realvf.guest.conftest``).
This plugin runs in manual mode serving the guest's Node (``kubeapi.NODE_NAME``), launched through
``unprepare_probe`` so each unprepare's steps are timed; upstream dra-driver-sriov (MULTUS mode)
serves a second Node with the same labels (``test_upstream_driver.run_upstream``). Both publish the
same device names for the same real VFs. Each round gives each driver a fresh claim of the same VF,
allocated in its own pool and reserved for a Pod (written to the claim's status as the scheduler
writes it; the Pods never run), then times NodePrepare and NodeUnprepare over the driver's DRA
socket, as the kubelet calls them. The two drivers alternate which goes first. Round 0 warms both
and is not counted. The results are printed as one ``UNPREPARE-BENCH <json>`` line for the host.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from bench.realkit import unprepare_probe
from kubernetes import client
from tests.realvf import kubeapi
from tests.realvf.guest import kubeplugin, realvfs
from tests.realvf.guest.test_upstream_driver import UPSTREAM_NODE, devices, run_upstream, upstream_node

from sriov_dra.kubeletapi import messages
from sriov_dra_lab import kubelet_plugins, processes
from sriov_dra_rules import names

__all__ = ["upstream_node"]  # the fixture, used here through its name

ROUNDS: Final = 12
WHAT_IF_ROUNDS: Final = 8
MARK: Final = "UNPREPARE-BENCH "
PROBE: Final = Path(unprepare_probe.__file__).resolve()
STEPS_WAIT_S: Final = 30.0


@pytest.fixture(scope="module")
def manual_plugin(
    api: client.ApiClient, real_pfs: list[realvfs.RealPf], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[kubeplugin.Plugin, Path]]:
    """This plugin in manual mode for the guest's Node, its unprepare steps recorded in the returned file."""
    root = tmp_path_factory.mktemp("manual")
    steps = root / "steps.jsonl"
    for plugin in kubeplugin.run_plugin(
        api,
        real_pfs,
        root,
        auto_attach=False,
        launcher=(str(PROBE),),
        env={unprepare_probe.STEPS_ENV: str(steps)},
    ):
        yield plugin, steps


@pytest.fixture(scope="module")
def namespace(api: client.ApiClient) -> Iterator[str]:
    core = client.CoreV1Api(api)
    ns = f"bench-unprepare-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    try:
        kubeplugin.eventually(
            f"ServiceAccount {ns}/default",
            lambda: any(
                sa.metadata.name == "default" for sa in core.list_namespaced_service_account(ns).items
            ),
        )
        yield ns
    finally:
        core.delete_namespace(ns, propagation_policy="Background")


def allocated_claim(api: client.ApiClient, ns: str, node: str, device: str) -> messages.ClaimRef:
    """A claim of ``device`` from ``node``'s pool, allocated and reserved for a Pod bound to ``node``."""
    core, res = client.CoreV1Api(api), client.ResourceV1Api(api)
    name = f"c-{uuid.uuid4().hex[:8]}"
    claim = res.create_namespaced_resource_claim(
        ns,
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaim",
            "metadata": {"name": name},
            "spec": {
                "devices": {
                    "requests": [
                        {"name": "vf", "exactly": {"deviceClassName": kubeapi.DEVICE_CLASS, "count": 1}}
                    ]
                }
            },
        },
    )
    pod = core.create_namespaced_pod(
        ns,
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": name},
            "spec": {
                "nodeName": node,
                "tolerations": [{"operator": "Exists"}],
                "terminationGracePeriodSeconds": 0,
                "resourceClaims": [{"name": "nic", "resourceClaimName": name}],
                "containers": [
                    {
                        "name": "c",
                        "image": "registry.invalid/toolbox",
                        "resources": {"claims": [{"name": "nic"}]},
                    }
                ],
            },
        },
    )
    body: dict[str, Any] = api.sanitize_for_serialization(claim)
    body["status"] = {
        "allocation": {
            "devices": {
                "results": [{"request": "vf", "driver": names.DRIVER_NAME, "pool": node, "device": device}]
            }
        },
        "reservedFor": [{"resource": "pods", "name": name, "uid": pod.metadata.uid}],
    }
    res.replace_namespaced_resource_claim_status(name, ns, body)
    return messages.ClaimRef(namespace=ns, name=name, uid=claim.metadata.uid)


def timed_ms(fn: Any, *args: Any) -> tuple[Any, float]:
    started = time.perf_counter()
    out = fn(*args)
    return out, (time.perf_counter() - started) * 1000.0


def steps_after(path: Path, offset: int) -> tuple[dict[str, float], int]:
    """Each step's milliseconds summed over the lines the probe appended to ``path`` after byte
    ``offset``, once they include the whole call's (the probe writes them shortly after a call)."""
    deadline = time.monotonic() + STEPS_WAIT_S
    while True:
        data = path.read_bytes() if path.exists() else b""
        entries = [json.loads(line) for line in data[offset:].decode().splitlines()]
        if any(e["step"] == unprepare_probe.OUTER_STEP for e in entries):
            break
        assert time.monotonic() < deadline, f"the probe wrote no steps to {path} within {STEPS_WAIT_S} s"
        time.sleep(0.05)
    out: dict[str, float] = {}
    for entry in entries:
        out[entry["step"]] = out.get(entry["step"], 0.0) + entry["ms"]
    return out, len(data)


Drivers = dict[str, tuple[str, kubelet_plugins.DraPluginClient, processes.Process]]


def measure(
    api: client.ApiClient, namespace: str, device: str, drivers: Drivers, steps_file: Path, rounds: int
) -> dict[str, Any]:
    """``rounds`` counted rounds (after one warm-up) of prepare, unprepare and an unprepare of a claim
    never prepared, per driver; this plugin's unprepare steps from ``steps_file``."""
    result: dict[str, Any] = {
        "rounds": rounds,
        **{f"{who}_{op}_ms": [] for who in drivers for op in ("prepare", "unprepare", "unprepare_absent")},
        "ours_steps_ms": [],
    }
    offset = 0
    for round_ in range(rounds + 1):
        order = list(drivers) if round_ % 2 == 0 else list(reversed(drivers))
        for who in order:
            node, dra, proc = drivers[who]
            ref = allocated_claim(api, namespace, node, device)
            prepared, prepare_ms = timed_ms(dra.node_prepare_resources, [ref])
            assert isinstance(prepared[ref.uid], messages.Prepared), (
                f"{who} NodePrepare of {ref}: {prepared[ref.uid]}\n{processes.tail(proc.log_path, 30)}"
            )
            if who == "ours":
                _, offset = steps_after(steps_file, offset)
            unprepared, unprepare_ms = timed_ms(dra.node_unprepare_resources, [ref])
            assert unprepared[ref.uid] is None, (
                f"{who} NodeUnprepare of {ref}: {unprepared[ref.uid]}\n{processes.tail(proc.log_path, 30)}"
            )
            if who == "ours":
                steps, offset = steps_after(steps_file, offset)
            # the per-call floor: a claim the driver never prepared (nothing to do but answer)
            absent = messages.ClaimRef(namespace=namespace, name="absent", uid=str(uuid.uuid4()))
            answered, absent_ms = timed_ms(dra.node_unprepare_resources, [absent])
            assert answered[absent.uid] is None, f"{who} NodeUnprepare of {absent}: {answered[absent.uid]}"
            if who == "ours":
                _, offset = steps_after(steps_file, offset)
            if round_:
                result[f"{who}_prepare_ms"].append(round(prepare_ms, 2))
                result[f"{who}_unprepare_ms"].append(round(unprepare_ms, 2))
                result[f"{who}_unprepare_absent_ms"].append(round(absent_ms, 2))
                if who == "ours":
                    result["ours_steps_ms"].append(steps)
    return result


def test_node_unprepare_of_one_vf_this_plugin_against_upstream(
    api: client.ApiClient,
    real_pfs: list[realvfs.RealPf],
    manual_plugin: tuple[kubeplugin.Plugin, Path],
    upstream_node: str,
    namespace: str,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    plugin, steps_file = manual_plugin
    for upstream in run_upstream(api, upstream_node, tmp_path_factory.mktemp("upstream")):
        device = sorted(set(devices(api, kubeapi.NODE_NAME)) & set(devices(api, UPSTREAM_NODE)))[0]
        drivers: Drivers = {
            "ours": (kubeapi.NODE_NAME, plugin.dra, plugin.process),
            "upstream": (UPSTREAM_NODE, upstream.dra, upstream.process),
        }
        result = {"device": device, **measure(api, namespace, device, drivers, steps_file, ROUNDS)}
        # What the status clear costs (docs/design.md#release keeps it before the record goes): the
        # same rounds with it skipped by the launcher, in the same boot, beside the same upstream.
        plugin.process.stop()
        root = tmp_path_factory.mktemp("bare")  # short: socket paths stay under 107 bytes
        env = {unprepare_probe.STEPS_ENV: str(root / "steps.jsonl"), unprepare_probe.NO_STATUS_CLEAR_ENV: "1"}
        for bare in kubeplugin.run_plugin(
            api, real_pfs, root, auto_attach=False, launcher=(str(PROBE),), env=env
        ):
            drivers["ours"] = (kubeapi.NODE_NAME, bare.dra, bare.process)
            result["without_status_clear"] = measure(
                api, namespace, device, drivers, root / "steps.jsonl", WHAT_IF_ROUNDS
            )
        print(MARK + json.dumps(result))
