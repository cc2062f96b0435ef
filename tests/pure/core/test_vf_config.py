"""Tests for sriov_dra.core.vf_config: strict decode, ConfigForResult matching, layering, ifName."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.core import vf_config
from sriov_dra_rules import errors

DRIVER = "sriovnetwork.k8snetworkplumbingwg.io"
API = f"{DRIVER}/v1alpha1"


def params(**fields: object) -> dict[str, object]:
    return {"apiVersion": API, "kind": "VfConfig", **fields}


def entry(source: str, requests: list[object], driver: str = DRIVER, **fields: object) -> dict[str, object]:
    return {
        "source": source,
        "requests": requests,
        "opaque": {"driver": driver, "parameters": params(**fields)},
    }


def test_decode_full_object() -> None:
    cfg = vf_config.decode_vf_config(
        params(
            driver="vfio-pci",
            addVhostMount=True,
            ifName="net1",
            netAttachDefName="a.b",
            netAttachDefNamespace="x",
        )
    )
    assert cfg == vf_config.VfConfig("vfio-pci", True, "net1", "a.b", "x")


def test_decode_accepts_json_text_and_null_as_absent() -> None:
    cfg = vf_config.decode_vf_config(json.dumps(params(ifName=None, netAttachDefName="n")).encode())
    assert cfg == vf_config.VfConfig(net_attach_def_name="n")


@pytest.mark.parametrize(
    ("raw", "path_fragment"),
    [
        (params(netAttachDefname="x"), "parameters.netAttachDefname"),
        (params(metadata={"name": "x"}), "parameters.metadata"),
        ({"kind": "VfConfig", "netAttachDefName": "x"}, "parameters.apiVersion"),
        (params() | {"apiVersion": f"{DRIVER}/v1beta1"}, "parameters.apiVersion"),
        (params() | {"apiVersion": f"vf.{DRIVER}/v1alpha1"}, "parameters.apiVersion"),
        (params() | {"kind": "GpuConfig"}, "parameters.kind"),
        (params(addVhostMount="true"), "parameters.addVhostMount"),
        (params(ifName=7), "parameters.ifName"),
        (params(ifName="averyveryverylongif"), "parameters.ifName"),
        (params(ifName="net/1"), "parameters.ifName"),
        (params(netAttachDefName="Rail_A"), "parameters.netAttachDefName"),
        (params(netAttachDefNamespace="in.fra"), "parameters.netAttachDefNamespace"),
        (params(driver="../../evil"), "parameters.driver"),
        ('{"apiVersion":"' + API + '","kind":"VfConfig","ifName":"a","ifName":"b"}', "parameters.ifName"),
        ("{not json", "parameters"),
        (None, "parameters"),
        (["VfConfig"], "parameters"),
    ],
    ids=[
        "unknown-field-case-mismatch",
        "unknown-field-metadata",
        "missing-api-version",
        "other-version",
        "stale-doc-group",
        "wrong-kind",
        "bool-given-string",
        "string-given-int",
        "ifname-over-15-bytes",
        "ifname-with-slash",
        "nad-name-not-dns1123",
        "namespace-not-dns-label",
        "driver-path-traversal",
        "duplicate-field",
        "malformed-json",
        "missing-parameters",
        "not-an-object",
    ],
)
def test_strict_decode_refuses(raw: object, path_fragment: str) -> None:
    with pytest.raises(errors.InvalidSpec) as exc:
        vf_config.decode_vf_config(raw)
    assert exc.value.reason is errors.Reason.INVALID_VF_CONFIG
    assert any(e.path.startswith(path_fragment) for e in exc.value.errors), exc.value.errors


def test_decode_reports_every_problem_at_once() -> None:
    with pytest.raises(errors.InvalidSpec) as exc:
        vf_config.decode_vf_config(params(ifName=1, bogus=2) | {"kind": "X"})
    assert {e.path for e in exc.value.errors} == {"parameters.ifName", "parameters.bogus", "parameters.kind"}


@pytest.mark.parametrize(
    ("requests", "result", "applies"),
    [
        ([], "nic", True),
        ([], "nic/large", True),
        (["nic"], "nic", True),
        (["nic"], "nic/large", True),
        (["nic/large"], "nic/large", True),
        (["nic/large"], "nic", False),
        (["nic/large"], "nic/small", False),
        (["gpu"], "nic", False),
        (["ni"], "nic", False),
    ],
    ids=[
        "empty-means-all",
        "empty-covers-subrequest",
        "exact-request",
        "parent-covers-subrequest",
        "exact-subrequest",
        "subrequest-does-not-cover-parent",
        "subrequest-does-not-cover-sibling",
        "other-request",
        "no-prefix-match",
    ],
)
def test_config_for_result_matching(requests: list[str], result: str, applies: bool) -> None:
    assert vf_config.config_applies(requests, result) is applies


def test_class_configs_precede_claim_configs_and_list_order_is_kept() -> None:
    configs = [
        entry("FromClaim", [], ifName="c1"),
        entry("FromClass", [], ifName="k1"),
        entry("FromClaim", [], ifName="c2"),
        entry("FromClass", [], ifName="k2"),
    ]
    scoped = vf_config.decode_allocation_configs(configs)
    assert [s.config.if_name for s in scoped] == ["k1", "k2", "c1", "c2"]
    assert vf_config.effective_vf_config(scoped, "nic").if_name == "c2"


def test_other_drivers_configs_are_skipped_undecoded() -> None:
    configs = [
        {
            "source": "FromClaim",
            "requests": [],
            "opaque": {"driver": "gpu.nvidia.com", "parameters": {"x": 1}},
        },
        entry("FromClaim", ["nic"], netAttachDefName="n"),
    ]
    scoped = vf_config.decode_allocation_configs(configs)
    assert [s.index for s in scoped] == [1]


@pytest.mark.parametrize(
    ("config", "path"),
    [
        ({"source": "FromClaim", "requests": []}, "status.allocation.devices.config[0].opaque"),
        (entry("FromSomewhere", []), "status.allocation.devices.config[0].source"),
        (entry("FromClaim", ["nic", 3]), "status.allocation.devices.config[0].requests"),
        (entry("FromClaim", [], bogus=1), "status.allocation.devices.config[0].opaque.parameters.bogus"),
    ],
    ids=["non-opaque-config", "unknown-source", "bad-request-names", "bad-vfconfig-anywhere"],
)
def test_allocation_config_errors_name_the_entry(config: dict[str, object], path: str) -> None:
    with pytest.raises(errors.InvalidSpec) as exc:
        vf_config.decode_allocation_configs([config])
    assert [e.path for e in exc.value.errors] == [path]


def test_class_infra_reference_replaced_by_claim_name_resets_namespace() -> None:
    scoped = vf_config.decode_allocation_configs(
        [
            entry("FromClass", [], netAttachDefName="a", netAttachDefNamespace="infra"),
            entry("FromClaim", ["nic"], netAttachDefName="b"),
        ]
    )
    cfg = vf_config.effective_vf_config(scoped, "nic")
    assert (cfg.net_attach_def_name, cfg.net_attach_def_namespace) == ("b", "")
    ref = cfg.reference()
    assert ref is not None and ref.resolve("pod-ns") == ("pod-ns", "b")


def test_later_namespace_without_name_overrides_only_the_namespace() -> None:
    cfg = vf_config.VfConfig(net_attach_def_name="a").layer(
        vf_config.VfConfig(net_attach_def_namespace="infra")
    )
    assert (cfg.net_attach_def_name, cfg.net_attach_def_namespace) == ("a", "infra")


def test_later_set_fields_win_and_unset_fields_keep_earlier_values() -> None:
    base = vf_config.VfConfig(driver="vfio-pci", add_vhost_mount=True, if_name="net1")
    cfg = base.layer(vf_config.VfConfig(if_name="net2"))
    assert cfg == vf_config.VfConfig(driver="vfio-pci", add_vhost_mount=True, if_name="net2")


def test_add_vhost_mount_and_namespace_survive_layering_unlike_upstream_override() -> None:
    scoped = vf_config.decode_allocation_configs(
        [entry("FromClaim", [], addVhostMount=True, netAttachDefName="n", netAttachDefNamespace="infra")]
    )
    cfg = vf_config.effective_vf_config(scoped, "nic")
    assert cfg.add_vhost_mount is True
    assert cfg.net_attach_def_namespace == "infra"


def test_result_without_matching_config_gets_the_default() -> None:
    scoped = vf_config.decode_allocation_configs([entry("FromClaim", ["gpu"], ifName="x")])
    assert vf_config.effective_vf_config(scoped, "nic") == vf_config.VfConfig()


_text = st.sampled_from(["", "", "a", "b", "infra"])
_configs = st.builds(vf_config.VfConfig, _text, st.booleans(), _text, _text, _text)


@given(_configs, _configs, _configs)
def test_layering_is_associative(a: vf_config.VfConfig, b: vf_config.VfConfig, c: vf_config.VfConfig) -> None:
    assert a.layer(b).layer(c) == a.layer(b.layer(c))


@given(_configs)
def test_default_config_is_the_layering_identity(a: vf_config.VfConfig) -> None:
    assert vf_config.VfConfig().layer(a) == a
    assert a.layer(vf_config.VfConfig()) == a


@given(st.lists(_configs, max_size=6))
def test_layering_a_list_equals_folding_any_grouping(configs: list[vf_config.VfConfig]) -> None:
    left = vf_config.VfConfig()
    for c in configs:
        left = left.layer(c)
    right = vf_config.VfConfig()
    for c in reversed(configs):
        right = c.layer(right)
    assert left == right


@given(_configs)
def test_to_json_round_trips_through_strict_decode(cfg: vf_config.VfConfig) -> None:
    assert vf_config.decode_vf_config(cfg.to_json()) == cfg


def allocation(results: list[tuple[str, str]], configs: list[dict[str, object]]) -> dict[str, object]:
    return {
        "devices": {
            "results": [
                {"request": req, "driver": DRIVER, "pool": "node-a", "device": dev} for req, dev in results
            ]
            + [{"request": "gpu-0", "driver": "gpu.nvidia.com", "pool": "node-a", "device": "gpu-0"}],
            "config": configs,
        }
    }


def test_resolve_results_filters_by_driver_and_keeps_result_order() -> None:
    alloc = allocation(
        [("nic-0", "0000-3b-02-0"), ("nic-1", "0000-5e-02-0")],
        [entry("FromClass", [], netAttachDefName="a"), entry("FromClaim", ["nic-1"], netAttachDefName="b")],
    )
    results = vf_config.resolve_results(alloc)
    assert [(r.request, r.device, r.config.net_attach_def_name) for r in results] == [
        ("nic-0", "0000-3b-02-0", "a"),
        ("nic-1", "0000-5e-02-0", "b"),
    ]


def test_common_explicit_ifname_on_two_devices_is_refused() -> None:
    alloc = allocation(
        [("nic", "0000-3b-02-0"), ("nic", "0000-3b-02-1")], [entry("FromClaim", ["nic"], ifName="net1")]
    )
    with pytest.raises(errors.InvalidSpec) as exc:
        vf_config.check_interface_names(vf_config.resolve_results(alloc))
    assert exc.value.reason is errors.Reason.DUPLICATE_INTERFACE_NAME
    assert "net1" in str(exc.value)


@pytest.mark.parametrize(
    "request_spec",
    [
        {"name": "nic", "exactly": {"deviceClassName": "vf", "count": 2}},
        {"name": "nic", "exactly": {"deviceClassName": "vf", "allocationMode": "All"}},
    ],
    ids=["count-two", "allocation-mode-all"],
)
def test_explicit_ifname_on_multi_device_request_is_refused_even_with_one_result(
    request_spec: dict[str, object],
) -> None:
    alloc = allocation([("nic", "0000-3b-02-0")], [entry("FromClaim", ["nic"], ifName="net1")])
    with pytest.raises(errors.InvalidSpec) as exc:
        vf_config.check_interface_names(vf_config.resolve_results(alloc), [request_spec])
    assert exc.value.reason is errors.Reason.DUPLICATE_INTERFACE_NAME


def test_explicit_ifname_on_count_two_subrequest_is_refused() -> None:
    spec = [{"name": "nic", "firstAvailable": [{"name": "big", "deviceClassName": "vf", "count": 2}]}]
    alloc = allocation([("nic/big", "0000-3b-02-0")], [entry("FromClaim", ["nic"], ifName="net1")])
    with pytest.raises(errors.InvalidSpec):
        vf_config.check_interface_names(vf_config.resolve_results(alloc), spec)


def test_distinct_explicit_ifnames_per_count_one_request_are_accepted() -> None:
    spec = [
        {"name": "nic-0", "exactly": {"deviceClassName": "vf"}},
        {"name": "nic-1", "exactly": {"deviceClassName": "vf", "count": 1}},
    ]
    alloc = allocation(
        [("nic-0", "0000-3b-02-0"), ("nic-1", "0000-5e-02-0")],
        [entry("FromClaim", ["nic-0"], ifName="net1"), entry("FromClaim", ["nic-1"], ifName="net2")],
    )
    vf_config.check_interface_names(vf_config.resolve_results(alloc), spec)
    assert [r.config.if_name for r in vf_config.resolve_results(alloc)] == ["net1", "net2"]


def test_unallocated_claim_is_refused() -> None:
    with pytest.raises(errors.InvalidSpec, match="not allocated"):
        vf_config.resolve_results({})


_VALID_TEXT = json.dumps(params(ifName="net1"))


@pytest.mark.parametrize(
    ("raw", "mentions"),
    [
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
        (
            '{"apiVersion":"' + API + '","kind":"VfConfig","x":' + '{"a":' * 100_000 + "1" + "}" * 100_001,
            "nested",
        ),
        (b"\xef\xbb\xbf" + _VALID_TEXT.encode(), "BOM"),
        (_VALID_TEXT.encode("utf-16"), "utf-8"),
        (_VALID_TEXT.encode("utf-32-le"), "malformed JSON"),
    ],
    ids=["deep-arrays", "deep-objects-in-unknown-field", "utf8-bom-bytes", "utf16-bytes", "utf32-bytes"],
)
def test_json_text_that_a_strict_decoder_refuses_is_invalid_vf_config(raw: object, mentions: str) -> None:
    with pytest.raises(errors.InvalidSpec) as exc:
        vf_config.decode_vf_config(raw)
    assert exc.value.reason is errors.Reason.INVALID_VF_CONFIG
    assert [e.path for e in exc.value.errors] == ["parameters"]
    assert mentions in str(exc.value)


@pytest.mark.parametrize("source", [["FromClaim"], {"FromClaim": 1}, 1, None], ids=repr)
def test_allocation_config_source_that_is_not_a_string_is_an_invalid_vf_config_naming_the_field(
    source: object,
) -> None:
    """Found by the totality property: a list or object ``source`` raised ``TypeError: unhashable``."""
    bad = entry("FromClaim", ["nic"], netAttachDefName="a") | {"source": source}
    with pytest.raises(errors.InvalidSpec) as info:
        vf_config.decode_allocation_configs([bad])
    assert info.value.reason is errors.Reason.INVALID_VF_CONFIG
    assert [e.path for e in info.value.errors] == ["status.allocation.devices.config[0].source"]


@pytest.mark.parametrize(
    ("raw", "path"),
    [
        ('{"apiVersion":"' + API + '","kind":"VfConfig","ifName":"a","ifName":"b"}', "parameters.ifName"),
        (('{"apiVersion":"' + API + '","kind":"VfConfig","kind":"VfConfig"}').encode(), "parameters.kind"),
    ],
    ids=["text", "bytes"],
)
def test_repeated_field_is_refused_with_its_path(raw: object, path: str) -> None:
    with pytest.raises(errors.InvalidSpec) as exc:
        vf_config.decode_vf_config(raw)
    assert exc.value.reason is errors.Reason.INVALID_VF_CONFIG
    assert [(e.path, e.message.split(" with the values ")[0]) for e in exc.value.errors] == [
        (path, f'duplicate key "{path[11:]}" in one object')
    ]


def test_disable_nccl_hints_decodes_as_a_boolean_and_once_set_by_the_class_stays_set() -> None:
    off = vf_config.decode_vf_config(params(disableNcclHints=True))
    assert off.disable_nccl_hints and off.to_json()["disableNcclHints"] is True
    assert not vf_config.decode_vf_config(params()).disable_nccl_hints
    assert off.layer(vf_config.VfConfig(if_name="dra0")).disable_nccl_hints
    with pytest.raises(errors.InvalidSpec) as info:
        vf_config.decode_vf_config(params(disableNcclHints="yes"))
    assert "disableNcclHints" in str(info.value.errors)
