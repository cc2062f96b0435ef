"""Tests for sriov_dra.core.plugin.cdi_spec: CDI names, device IDs, container edits and spec documents."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core.plugin import cdi_spec
from sriov_dra_rules import errors

CLAIM = "7e3c1d2a-4b5f-4a6e-8c9d-0e1f2a3b4c5d"
POD = "9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
KIND = "sriovnetwork.k8snetworkplumbingwg.io/vf"


def test_kind_is_upstream_vendor_and_class() -> None:
    assert cdi_spec.KIND == KIND
    assert cdi_spec.kind_problem(KIND) is None


def test_cdi_device_id_is_fully_qualified_vendor_class_name() -> None:
    assert cdi_spec.cdi_device_id(f"{CLAIM}-0000-3b-02-0") == f"{KIND}={CLAIM}-0000-3b-02-0"


def test_prepared_device_ids_are_claim_device_then_pod_device() -> None:
    assert cdi_spec.prepared_device_ids(CLAIM, POD, "0000-3b-02-0") == (
        f"{KIND}={CLAIM}-0000-3b-02-0",
        f"{KIND}={POD}",
    )


@pytest.mark.parametrize(
    "name",
    ["", "-leading-dash", "trailing-dash-", "has/slash", "has=equals", "space inside", "ünïcode"],
    ids=["empty", "leading-dash", "trailing-dash", "slash", "equals", "space", "non-ascii"],
)
def test_cdi_device_id_rejects_names_the_cdi_parser_rejects(name: str) -> None:
    with pytest.raises(errors.ContractViolation, match="CDI device name"):
        cdi_spec.cdi_device_id(name)


@pytest.mark.parametrize(
    ("value", "ok"),
    [
        (f"{KIND}=abc", True),
        (f"{KIND}=0abc:1.x_y-z", True),
        ("vendor.example/gpu=0", True),
        ("noclass=abc", False),
        (f"{KIND}=", False),
        ("/vf=abc", False),
        ("1vendor/vf=abc", False),
        ("vendor/cl@ss=abc", False),
        (f"{KIND}abc", False),
        (42, False),
    ],
    ids=[
        "ours",
        "name-with-colon-dot-underscore",
        "other-vendor",
        "missing-class",
        "empty-name",
        "empty-vendor",
        "vendor-starts-with-digit",
        "bad-class-char",
        "missing-equals",
        "not-a-string",
    ],
)
def test_qualified_name_problem_follows_cdi_parser(value: object, ok: bool) -> None:
    assert (cdi_spec.qualified_name_problem(value) is None) is ok


def test_spec_file_name_is_vendor_class_transient_json() -> None:
    assert cdi_spec.spec_file_name(CLAIM) == f"sriovnetwork.k8snetworkplumbingwg.io-vf_{CLAIM}.json"


@pytest.mark.parametrize(
    "transient_id",
    ["", "..", "../etc/passwd", "a/b", ".hidden", "trailing.", "new\nline"],
    ids=["empty", "dotdot", "traversal", "slash", "hidden", "trailing-dot", "newline"],
)
def test_spec_file_name_rejects_unsafe_ids(transient_id: str) -> None:
    with pytest.raises(errors.ContractViolation, match="safe spec name"):
        cdi_spec.spec_file_name(transient_id)


def test_netdevice_vf_gets_upstream_env_and_no_device_nodes() -> None:
    edits = cdi_spec.container_edits(
        cdi_spec.VfEdits(device="0000-3b-02-0", pci_address="0000:3b:02.0", net_attach_def_name="rail-a-net")
    )
    assert edits == {
        "env": [
            "SRIOVNETWORK_VF_DEVICE_0000_3b_02_0=0000:3b:02.0",
            "SRIOVNETWORK_NET_ATTACH_DEF_NAME=rail-a-net",
        ]
    }


def test_vfio_vf_gets_group_node_container_node_and_env() -> None:
    edits = cdi_spec.container_edits(
        cdi_spec.VfEdits(device="0000-3b-02-1", pci_address="0000:3b:02.1", vfio_group="42")
    )
    assert edits["deviceNodes"] == [
        {"path": "/dev/vfio/42", "hostPath": "/dev/vfio/42", "type": "c"},
        {"path": "/dev/vfio/vfio", "type": "c"},
    ]
    assert "SRIOVNETWORK_0000_3b_02_1_VFIO_DEVICE=/dev/vfio/42" in edits["env"]


def test_noiommu_group_maps_container_path_to_noiommu_host_node() -> None:
    edits = cdi_spec.container_edits(
        cdi_spec.VfEdits(device="0000-3b-02-1", pci_address="0000:3b:02.1", vfio_group="7", vfio_noiommu=True)
    )
    assert edits["deviceNodes"][0] == {"path": "/dev/vfio/7", "hostPath": "/dev/vfio/noiommu-7", "type": "c"}


def test_vhost_adds_vhost_net_and_tun_nodes() -> None:
    edits = cdi_spec.container_edits(
        cdi_spec.VfEdits(device="0000-3b-02-0", pci_address="0000:3b:02.0", vhost=True)
    )
    assert edits["deviceNodes"] == [
        {"path": "/dev/vhost-net", "type": "c"},
        {"path": "/dev/net/tun", "type": "c"},
    ]


def test_rdma_char_devices_become_nodes_and_env_by_basename() -> None:
    chars = (
        "/dev/infiniband/uverbs3",
        "/dev/infiniband/umad3",
        "/dev/infiniband/issm3",
        "/dev/infiniband/rdma_cm",
    )
    edits = cdi_spec.container_edits(
        cdi_spec.VfEdits(
            device="0000-3b-02-0", pci_address="0000:3b:02.0", rdma_device="mlx5_3", rdma_char_devices=chars
        )
    )
    assert edits["deviceNodes"] == [{"path": p, "type": "c"} for p in chars]
    assert edits["env"][2:] == [
        "SRIOVNETWORK_0000_3b_02_0_RDMA_UVERB=/dev/infiniband/uverbs3",
        "SRIOVNETWORK_0000_3b_02_0_RDMA_UMAD=/dev/infiniband/umad3",
        "SRIOVNETWORK_0000_3b_02_0_RDMA_ISSM=/dev/infiniband/issm3",
        "SRIOVNETWORK_0000_3b_02_0_RDMA_CM=/dev/infiniband/rdma_cm",
        "SRIOVNETWORK_0000_3b_02_0_RDMA_DEVICE=mlx5_3",
    ]


@pytest.mark.parametrize(
    ("edits", "field"),
    [
        (cdi_spec.VfEdits(device="0000-3b-02-0", pci_address="pci:0000:3b:02.0"), "pciAddress"),
        (cdi_spec.VfEdits(device="0000_3b_02_0", pci_address="0000:3b:02.0"), "device"),
        (cdi_spec.VfEdits(device="0000-3b-02-0", pci_address="0000:3b:02.0", vfio_group="../1"), "vfioGroup"),
        (
            cdi_spec.VfEdits(
                device="0000-3b-02-0", pci_address="0000:3b:02.0", rdma_char_devices=("uverbs0",)
            ),
            "rdmaCharDevices",
        ),
    ],
    ids=["pci-prefix", "device-not-dns-label", "group-not-decimal", "relative-rdma-path"],
)
def test_container_edits_reject_malformed_host_facts(edits: cdi_spec.VfEdits, field: str) -> None:
    with pytest.raises(errors.ContractViolation) as info:
        cdi_spec.container_edits(edits)
    assert info.value.errors[0].path == field


def test_claim_spec_names_devices_by_claim_uid_and_needs_v050_for_digit_start() -> None:
    spec = cdi_spec.claim_spec(CLAIM, [cdi_spec.VfEdits(device="0000-3b-02-0", pci_address="0000:3b:02.0")])
    assert spec["kind"] == KIND
    assert [d["name"] for d in spec["devices"]] == [f"{CLAIM}-0000-3b-02-0"]  # type: ignore[attr-defined]
    assert spec["cdiVersion"] == "0.5.0"
    assert cdi_spec.spec_problems(spec) == []


def test_claim_spec_with_letter_start_and_no_host_path_uses_earliest_version() -> None:
    spec = cdi_spec.claim_spec("abc", [cdi_spec.VfEdits(device="0000-3b-02-0", pci_address="0000:3b:02.0")])
    assert spec["cdiVersion"] == "0.3.0"
    assert cdi_spec.spec_problems(spec) == []


def test_host_path_requires_v050_even_with_letter_start() -> None:
    vf = cdi_spec.VfEdits(device="0000-3b-02-0", pci_address="0000:3b:02.0", vfio_group="3")
    assert cdi_spec.claim_spec("abc", [vf])["cdiVersion"] == "0.5.0"


@pytest.mark.parametrize(
    "vfs",
    [
        [],
        [cdi_spec.VfEdits("0000-3b-02-0", "0000:3b:02.0"), cdi_spec.VfEdits("0000-3b-02-0", "0000:3b:02.0")],
    ],
    ids=["no-vfs", "repeated-device"],
)
def test_claim_spec_rejects_empty_or_repeated_devices(vfs: list[cdi_spec.VfEdits]) -> None:
    with pytest.raises(errors.ContractViolation):
        cdi_spec.claim_spec(CLAIM, vfs)


def test_pod_spec_lists_sorted_unique_pci_addresses() -> None:
    spec = cdi_spec.pod_spec(POD, ["0000:3b:02.1", "0000:3b:02.0", "0000:3b:02.1"])
    assert spec["devices"] == [
        {"name": POD, "containerEdits": {"env": ["SRIOVNETWORK_PCI_ADDRESSES=0000:3b:02.0,0000:3b:02.1"]}}
    ]
    assert cdi_spec.spec_problems(spec) == []


@pytest.mark.parametrize(
    "addresses", [[], ["0000:3b:02.9"], ["pci:0000:3b:02.0"]], ids=["empty", "bad-function", "pci-prefix"]
)
def test_pod_spec_rejects_no_or_malformed_addresses(addresses: list[str]) -> None:
    with pytest.raises(errors.ContractViolation):
        cdi_spec.pod_spec(POD, addresses)


def _valid() -> dict[str, Any]:
    return {
        "cdiVersion": "0.5.0",
        "kind": KIND,
        "devices": [
            {"name": "0abc", "containerEdits": {"env": ["A=1"], "deviceNodes": [{"path": "/dev/x"}]}}
        ],
    }


def _mutate(change: str) -> dict[str, Any]:
    spec = _valid()
    dev = spec["devices"][0]
    if change == "unknown-top-field":
        spec["extra"] = 1
    elif change == "version-below-minimum":
        spec["cdiVersion"] = "0.4.0"
    elif change == "unknown-version":
        spec["cdiVersion"] = "9.9.9"
    elif change == "bad-kind":
        spec["kind"] = "no-class"
    elif change == "no-devices":
        spec["devices"] = []
    elif change == "duplicate-device":
        spec["devices"].append(json.loads(json.dumps(dev)))
    elif change == "unknown-device-field":
        dev["extra"] = 1
    elif change == "bad-device-name":
        dev["name"] = "-x"
    elif change == "env-without-equals":
        dev["containerEdits"]["env"] = ["NOEQUALS"]
    elif change == "relative-node-path":
        dev["containerEdits"]["deviceNodes"] = [{"path": "dev/x"}]
    elif change == "bad-node-type":
        dev["containerEdits"]["deviceNodes"] = [{"path": "/dev/x", "type": "z"}]
    elif change == "unknown-node-field":
        dev["containerEdits"]["deviceNodes"] = [{"path": "/dev/x", "color": "red"}]
    elif change == "device-without-edits":
        dev["containerEdits"] = {}
    return spec


REJECTIONS = [
    "unknown-top-field",
    "version-below-minimum",
    "unknown-version",
    "bad-kind",
    "no-devices",
    "duplicate-device",
    "unknown-device-field",
    "bad-device-name",
    "env-without-equals",
    "relative-node-path",
    "bad-node-type",
    "unknown-node-field",
    "device-without-edits",
]


def test_spec_problems_accepts_the_valid_base_spec() -> None:
    assert cdi_spec.spec_problems(_valid()) == []


@pytest.mark.parametrize("change", REJECTIONS, ids=REJECTIONS)
def test_spec_problems_rejects_what_a_cdi_loader_rejects(change: str) -> None:
    assert cdi_spec.spec_problems(_mutate(change)) != []


@pytest.mark.parametrize("change", REJECTIONS, ids=REJECTIONS)
def test_encode_spec_refuses_to_encode_an_unloadable_spec(change: str) -> None:
    with pytest.raises(errors.ContractViolation, match="refusing to write a CDI spec"):
        cdi_spec.encode_spec(_mutate(change))


device_names = st.integers(min_value=0, max_value=255).map(lambda n: f"0000-3b-{n // 8:02x}-{n % 8}")
vf_edits = device_names.flatmap(
    lambda dev: st.builds(
        cdi_spec.VfEdits,
        device=st.just(dev),
        pci_address=st.just("0000:3b:" + dev[8:10] + "." + dev[-1]),
        net_attach_def_name=st.from_regex(r"[a-z0-9-]{0,20}", fullmatch=True),
        vfio_group=st.one_of(st.just(""), st.integers(0, 999).map(str)),
        vfio_noiommu=st.booleans(),
        vhost=st.booleans(),
        rdma_device=st.one_of(st.just(""), st.just("mlx5_0")),
        rdma_char_devices=st.lists(
            st.sampled_from(["/dev/infiniband/uverbs0", "/dev/infiniband/umad0", "/dev/infiniband/rdma_cm"]),
            unique=True,
        ).map(tuple),
    )
)
claim_uids = st.one_of(st.uuids().map(str), st.from_regex(r"[a-z][a-z0-9]{0,10}", fullmatch=True))


@given(claim_uids, st.lists(vf_edits, min_size=1, max_size=6, unique_by=lambda v: v.device))
def test_every_claim_spec_is_loadable_deterministic_and_minimal(
    claim_uid: str, vfs: list[cdi_spec.VfEdits]
) -> None:
    spec = cdi_spec.claim_spec(claim_uid, vfs)
    assert cdi_spec.spec_problems(spec) == []
    assert cdi_spec.encode_spec(spec) == cdi_spec.encode_spec(json.loads(cdi_spec.encode_spec(spec)))
    needs_050 = claim_uid[0].isdigit() or any(v.vfio_group for v in vfs)
    assert spec["cdiVersion"] == ("0.5.0" if needs_050 else "0.3.0")
    for vf in vfs:
        assert (
            cdi_spec.qualified_name_problem(cdi_spec.prepared_device_ids(claim_uid, POD, vf.device)[0])
            is None
        )
