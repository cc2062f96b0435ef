"""core.plugin.nccl_hints: GPU pairs only from matchAttribute constraints, NCCL variables only for RDMA VFs."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core.plugin import nccl_hints

NIC = "sriovnetwork.k8snetworkplumbingwg.io"
GPU = "gpu.example.com"
ROOT = "resource.kubernetes.io/pcieRoot"


def result(request: str, driver: str, device: str, pool: str = "node-a") -> dict[str, str]:
    return {"request": request, "driver": driver, "pool": pool, "device": device}


def claim(results: list[dict[str, str]], constraints: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "spec": {"devices": {"constraints": constraints}},
        "status": {"allocation": {"devices": {"results": results}}},
    }


PAIRS = claim(
    [
        result("gpu-0", GPU, "gpu-3"),
        result("nic-0", NIC, "0000-81-02-0"),
        result("gpu-1", GPU, "gpu-0"),
        result("nic-1", NIC, "0000-03-02-0"),
    ],
    [
        {"requests": ["gpu-0", "nic-0"], "matchAttribute": ROOT},
        {"requests": ["gpu-1", "nic-1"], "matchAttribute": ROOT},
    ],
)


def test_each_vf_is_paired_with_the_gpu_of_its_own_constraint_never_by_position() -> None:
    assert nccl_hints.paired_gpus(PAIRS, NIC) == {
        "0000-81-02-0": (nccl_hints.Gpu(GPU, "node-a", "gpu-3", "gpu-0", ROOT),),
        "0000-03-02-0": (nccl_hints.Gpu(GPU, "node-a", "gpu-0", "gpu-1", ROOT),),
    }


def test_no_constraint_or_a_constraint_without_a_gpu_pairs_nothing() -> None:
    results = PAIRS["status"]["allocation"]["devices"]["results"]
    assert nccl_hints.paired_gpus(claim(results, []), NIC) == {}
    only_nics = [{"requests": ["nic-0", "nic-1"], "matchAttribute": ROOT}]
    assert nccl_hints.paired_gpus(claim(results, only_nics), NIC) == {}


def test_a_constraint_naming_a_subrequest_or_no_requests_covers_the_results() -> None:
    results = [result("gpu/a100", GPU, "gpu-1"), result("nic/fast", NIC, "0000-03-02-1")]
    for constraint in ({"requests": ["gpu", "nic"], "matchAttribute": ROOT}, {"matchAttribute": ROOT}):
        got = nccl_hints.paired_gpus(claim(results, [constraint]), NIC)
        assert got == {"0000-03-02-1": (nccl_hints.Gpu(GPU, "node-a", "gpu-1", "gpu/a100", ROOT),)}


def test_the_variables_use_the_exact_match_form_and_list_only_rdma_vfs() -> None:
    vfs = [
        nccl_hints.HintVf("0000-81-02-0", "mlx5_1", "dra0"),
        nccl_hints.HintVf("0000-03-02-0", "", "dra1"),
        nccl_hints.HintVf("0000-03-02-1", "mlx5_10", "dra2"),
    ]
    paired = {"0000-81-02-0": ()}
    assert nccl_hints.environment(vfs, paired) == [
        "NCCL_IB_HCA==mlx5_1,mlx5_10",
        "NCCL_SOCKET_IFNAME==dra0,dra2",
    ]


def test_without_a_paired_rdma_vf_there_are_no_variables() -> None:
    vfs = [nccl_hints.HintVf("a", "", "dra0"), nccl_hints.HintVf("b", "mlx5_0", "dra1")]
    assert nccl_hints.environment(vfs, {"a": ()}) == []
    assert nccl_hints.environment(vfs, {}) == []


names = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
hint_vfs = st.lists(
    st.builds(
        nccl_hints.HintVf, device=names, rdma_device=st.just("") | names, interface=st.just("") | names
    ),
    max_size=6,
    unique_by=lambda v: v.device,
)


@given(hint_vfs, st.data())
def test_property_ib_hca_names_exactly_the_rdma_vfs_and_socket_ifname_their_interfaces(
    vfs: list[nccl_hints.HintVf], data: st.DataObject
) -> None:
    paired = {d: () for d in data.draw(st.sets(st.sampled_from([v.device for v in vfs] or ["x"])))}
    env = dict(e.split("=", 1) for e in nccl_hints.environment(vfs, paired))
    rdma = [v for v in vfs if v.rdma_device]
    if not any(v.device in paired for v in rdma):
        assert env == {}
        return
    assert env["NCCL_IB_HCA"].startswith("=")
    assert env["NCCL_IB_HCA"][1:].split(",") == list(dict.fromkeys(v.rdma_device for v in rdma))
    interfaces = list(dict.fromkeys(v.interface for v in rdma if v.interface))
    if interfaces:
        assert env["NCCL_SOCKET_IFNAME"] == "=" + ",".join(interfaces)
    else:
        assert "NCCL_SOCKET_IFNAME" not in env


@given(
    st.lists(st.tuples(st.sampled_from(["g0", "g1", "n0", "n1"]), st.sampled_from([NIC, GPU])), max_size=6)
)
def test_property_a_pair_always_shares_one_constraint_and_joins_two_drivers(
    picks: list[tuple[str, str]],
) -> None:
    results = [result(request, driver, f"d{i}") for i, (request, driver) in enumerate(picks)]
    constraints = [
        {"requests": ["g0", "n0"], "matchAttribute": ROOT},
        {"requests": ["g1", "n1"], "matchAttribute": ROOT},
    ]
    by_device = {r["device"]: r for r in results}
    for device, gpus in nccl_hints.paired_gpus(claim(results, constraints), NIC).items():
        assert by_device[device]["driver"] == NIC
        for gpu in gpus:
            assert gpu.driver == GPU
            assert {by_device[device]["request"], gpu.request} <= {"g0", "n0"} or {
                by_device[device]["request"],
                gpu.request,
            } <= {"g1", "n1"}
