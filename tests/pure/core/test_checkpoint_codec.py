"""Tests for sriov_dra.core.plugin.checkpoint_codec: round trip, determinism, strict rejections
(docs/design.md#checkpoint)."""

from __future__ import annotations

import hashlib
import json
import string
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import checkpoint_records as fx

from sriov_dra.core import binding_annotation, identities
from sriov_dra.core.plugin import cdi_spec
from sriov_dra.core.plugin import checkpoint_codec as codec
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra_rules import checkpoint_doc, errors

FIXTURE = Path(__file__).parents[2] / "fixtures" / "checkpoint" / "v1-no-managed.json"
INDENTED_FIXTURE = FIXTURE.with_name("v1-indented-managed.json")
SOURCE = "/var/lib/kubelet/plugins/sriovnetwork.k8snetworkplumbingwg.io/checkpoint.json"

# --- strategies ----------------------------------------------------------------------------------

uuids = st.uuids().map(str)
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=40)
json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False, allow_infinity=False), texts
)
json_values = st.recursive(
    json_scalars,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(texts, inner, max_size=4)),
    max_leaves=8,
)
vf_configs = st.dictionaries(texts, json_values, max_size=4)
_alnum = string.ascii_lowercase + string.digits
ifnames = st.builds(lambda a, b: a + b, st.sampled_from("abcdx"), st.text(_alnum + "_.-", max_size=14))
dns_labels = st.builds(
    lambda a, b: a + ("-" + b if b else ""),
    st.text(_alnum, min_size=1, max_size=8),
    st.text(_alnum, max_size=6),
)


@st.composite
def devices(
    draw: st.DrawFn, claim_uid: str, pod_uid: str, namespace: str, index: int
) -> model.PreparedDevice:
    pool = draw(dns_labels)
    name = fx.device_name(index)
    ifname = draw(ifnames)
    managed = None
    if draw(st.booleans()):
        node_uid = draw(uuids)
        aid = identities.attachment_id(
            identities.build_binding_identity(
                node_uid=node_uid, pod_uid=pod_uid, claim_uid=claim_uid, pool=pool, device=name
            )
        )
        rendered = draw(st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=40))
        managed = model.ManagedBinding(
            phase=draw(st.sampled_from(list(model.Phase))),
            attachment_id=aid,
            shadow_namespace=namespace,
            shadow_name=identities.shadow_name(aid),
            shadow_uid=draw(st.one_of(st.just(""), uuids)),
            source=model.SourceRef(
                namespace=draw(dns_labels),
                name=draw(dns_labels),
                uid=identities.ObjectUid(draw(uuids)),
                resource_version=draw(st.from_regex(r"[0-9]{1,12}", fullmatch=True)),
            ),
            rendered_config=rendered,
            config_sha256=binding_annotation.config_sha256(rendered),
            interface=ifname,
            node_name=draw(dns_labels),
            node_uid=identities.NodeUid(node_uid),
        )
    return model.PreparedDevice(
        request_names=tuple(draw(st.lists(dns_labels, min_size=1, max_size=3, unique=True))),
        pool=pool,
        device=name,
        pci_address=identities.PciAddress(fx.pci(index)),
        original_driver=draw(st.sampled_from(["", "iavf", "mlx5_core", "vfio-pci"])),
        vf_config=draw(vf_configs),
        interface_name=ifname if managed is not None else draw(st.one_of(st.just(""), ifnames)),
        cdi_device_ids=cdi_spec.prepared_device_ids(claim_uid, pod_uid, name),
        net_attach_def_config=draw(texts),
        managed=managed,
    )


@st.composite
def records(draw: st.DrawFn, claim_uid: str) -> model.ClaimRecord:
    pod_uid = draw(uuids)
    namespace = draw(dns_labels)
    indexes = draw(st.lists(st.integers(0, 63), min_size=1, max_size=3, unique=True))
    return model.ClaimRecord(
        claim_uid=identities.ClaimUid(claim_uid),
        namespace=namespace,
        name=draw(dns_labels),
        pod_uid=identities.PodUid(pod_uid),
        devices=tuple(draw(devices(claim_uid, pod_uid, namespace, i)) for i in indexes),
    )


checkpoints = st.lists(uuids, max_size=3, unique=True).flatmap(
    lambda uids: st.tuples(*(records(u) for u in uids)).map(lambda rs: fx.checkpoint(*rs))
)

# --- properties ----------------------------------------------------------------------------------


@given(checkpoints)
def test_codec_round_trips_deterministically_with_the_documented_checksum(cp: model.Checkpoint) -> None:
    raw = codec.encode_checkpoint(cp)
    assert codec.decode_checkpoint(raw) == cp
    assert codec.encode_checkpoint(codec.decode_checkpoint(raw)) == raw
    reordered = model.Checkpoint(claims=dict(reversed(list(cp.claims.items()))))
    assert codec.encode_checkpoint(reordered) == raw
    doc = json.loads(raw)
    canonical = json.dumps(doc["data"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert doc["checksum"] == hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    assert doc["version"] == 1
    compact = json.dumps(doc, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
    assert raw == (compact + "\n").encode("utf-8")  # the documented layout: compact sorted keys + newline


@given(checkpoints)
def test_an_indented_file_of_an_earlier_build_decodes_to_the_same_checkpoint(cp: model.Checkpoint) -> None:
    doc = json.loads(codec.encode_checkpoint(cp))
    indented = json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False, allow_nan=False) + "\n"
    assert codec.decode_checkpoint(indented.encode("utf-8")) == cp


def test_device_without_binding_has_no_managed_binding_key() -> None:
    doc = json.loads(codec.encode_checkpoint(fx.checkpoint(fx.record(managed=False))))
    device = doc["data"]["claims"][fx.CLAIM_1]["devices"][0]
    assert "managedBinding" not in device


def test_binding_record_uses_the_contract_field_names() -> None:
    doc = json.loads(codec.encode_checkpoint(fx.checkpoint(fx.record(shadow_uid=""))))
    binding = doc["data"]["claims"][fx.CLAIM_1]["devices"][0]["managedBinding"]
    assert sorted(binding) == sorted(
        [
            "bindingVersion",
            "phase",
            "attachmentID",
            "shadowNamespace",
            "shadowName",
            "shadowUID",
            "source",
            "renderedConfig",
            "configSHA256",
            "interface",
            "nodeName",
            "nodeUID",
        ]
    )
    assert binding["bindingVersion"] == 1
    assert binding["phase"] == "Ready"
    assert binding["shadowUID"] == ""
    assert sorted(binding["source"]) == ["name", "namespace", "resourceVersion", "uid"]


def test_pre_change_fixture_loads_and_re_encodes_to_the_same_checksum_and_data() -> None:
    raw = FIXTURE.read_bytes()
    cp = codec.decode_checkpoint(raw, source=str(FIXTURE))
    (rec,) = cp.claims.values()
    assert rec.namespace == "vf-test1"
    assert [d.managed for d in rec.devices] == [None, None]
    assert rec.devices[1].original_driver == "iavf"
    old, new = json.loads(raw), json.loads(codec.encode_checkpoint(cp))
    assert new == old  # same checksum (the checksum serialization is unchanged), same data, same version
    assert codec.decode_checkpoint(codec.encode_checkpoint(cp)) == cp


def test_an_indented_managed_checkpoint_written_before_the_compact_layout_still_loads() -> None:
    raw = INDENTED_FIXTURE.read_bytes()
    assert raw.startswith(b'{\n  "checksum": "')  # frozen: sorted-key 2-space JSON of the earlier encoder
    cp = codec.decode_checkpoint(raw, source=str(INDENTED_FIXTURE))
    assert {
        uid: [(b.phase.value, b.shadow_uid) for b in r.managed_bindings()] for uid, r in cp.claims.items()
    } == {
        fx.CLAIM_1: [("Ready", fx.SHADOW_UID), ("Ready", fx.SHADOW_UID)],
        fx.CLAIM_2: [("Pending", "")],
    }
    compact = codec.encode_checkpoint(cp)
    assert b"\n" not in compact[:-1] and compact.endswith(b"}\n")
    assert json.loads(compact)["checksum"] == json.loads(raw)["checksum"]
    assert codec.decode_checkpoint(compact) == cp


def test_encode_refuses_an_invalid_record() -> None:
    bad = fx.checkpoint(fx.record(namespace="Bad_NS"))
    with pytest.raises(errors.ContractViolation, match="refusing to write a checkpoint"):
        codec.encode_checkpoint(bad)


def _two_claims(bad: str) -> model.Checkpoint:
    """CLAIM_1 and CLAIM_2, the one named ``bad`` with an invalid namespace."""
    return fx.checkpoint(
        fx.record(fx.CLAIM_1, namespace="Bad_NS" if bad == fx.CLAIM_1 else "ns-a"),
        fx.record(fx.CLAIM_2, indexes=(1,), namespace="Bad_NS" if bad == fx.CLAIM_2 else "ns-a"),
    )


@pytest.mark.parametrize(
    "changed",
    [None, (fx.CLAIM_2,), (fx.CLAIM_1, fx.CLAIM_2)],
    ids=["all-claims-by-default", "the-changed-bad-claim", "every-changed-claim"],
)
def test_encode_refuses_a_validated_bad_claim_with_the_same_errors(changed: tuple[str, ...] | None) -> None:
    with pytest.raises(errors.ContractViolation) as full:
        codec.encode_checkpoint(_two_claims(fx.CLAIM_2))
    with pytest.raises(errors.ContractViolation) as only:
        codec.encode_checkpoint(_two_claims(fx.CLAIM_2), changed=changed)
    assert str(only.value) == str(full.value) and fx.CLAIM_2 in str(only.value)


@pytest.mark.parametrize(
    ("changed", "validated"),
    [((fx.CLAIM_1,), [fx.CLAIM_1]), ((fx.CLAIM_3,), []), ((), [])],
    ids=["only-the-changed-claim", "a-removed-claim-needs-none", "nothing-changed"],
)
def test_encode_validates_only_the_changed_claims(
    monkeypatch: pytest.MonkeyPatch, changed: tuple[str, ...], validated: list[str]
) -> None:
    seen = fx.count_validations(monkeypatch)
    cp = _two_claims(bad="")
    full = codec.encode_checkpoint(cp)
    assert seen == [fx.CLAIM_1, fx.CLAIM_2]
    seen.clear()
    assert codec.encode_checkpoint(cp, changed=changed) == full
    assert seen == validated


# --- strict rejections ---------------------------------------------------------------------------


def _doc() -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(codec.encode_checkpoint(fx.checkpoint(fx.record(indexes=(0, 1)))))
    return doc


def _resigned(change: Callable[[dict[str, Any]], None]) -> bytes:
    """Apply ``change`` to the data of a valid document and recompute its checksum."""
    doc = _doc()
    change(doc)
    canonical = json.dumps(doc["data"], sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    doc["checksum"] = hashlib.sha256(canonical.encode("utf-8")).hexdigest()
    return json.dumps(doc).encode("utf-8")


def _unsigned(change: Callable[[dict[str, Any]], None]) -> bytes:
    doc = _doc()
    change(doc)
    return json.dumps(doc).encode("utf-8")


def _dev(doc: dict[str, Any], i: int = 0) -> dict[str, Any]:
    dev: dict[str, Any] = doc["data"]["claims"][fx.CLAIM_1]["devices"][i]
    return dev


def _set(
    path: Callable[[dict[str, Any]], dict[str, Any]], key: str, value: object
) -> Callable[[dict[str, Any]], None]:
    def change(doc: dict[str, Any]) -> None:
        path(doc)[key] = value

    return change


def _drop(path: Callable[[dict[str, Any]], dict[str, Any]], key: str) -> Callable[[dict[str, Any]], None]:
    return lambda doc: path(doc).pop(key) and None


def _binding(doc: dict[str, Any]) -> dict[str, Any]:
    binding: dict[str, Any] = _dev(doc)["managedBinding"]
    return binding


_top: Callable[[dict[str, Any]], dict[str, Any]] = lambda doc: doc  # noqa: E731
_claim: Callable[[dict[str, Any]], dict[str, Any]] = lambda doc: doc["data"]["claims"][fx.CLAIM_1]  # noqa: E731

VALID = json.dumps(_doc()).encode("utf-8")
UNSUPPORTED = errors.Reason.UNSUPPORTED_VERSION
CORRUPT = errors.Reason.CONTRACT_VIOLATION

REJECTIONS: list[tuple[str, bytes, errors.Reason, str]] = [
    ("not-utf8", b"\xff\xfe{}", CORRUPT, "not valid UTF-8 JSON"),
    ("truncated-json", VALID[: len(VALID) // 2], CORRUPT, "not valid UTF-8 JSON"),
    ("empty-file", b"", CORRUPT, "not valid UTF-8 JSON"),
    ("not-an-object", b"[]", CORRUPT, "not a JSON object"),
    ("duplicate-top-level-key", b'{"version": 1, "version": 1}', CORRUPT, "duplicate key"),
    ("nan-literal", VALID.replace(b'"kind": "VfConfig"', b'"kind": NaN'), CORRUPT, "non-finite"),
    ("huge-float", VALID.replace(b'"kind": "VfConfig"', b'"kind": 1e999'), CORRUPT, "out of range"),
    ("version-missing", _unsigned(_drop(_top, "version")), CORRUPT, "'version' must be an integer"),
    ("version-string", _unsigned(_set(_top, "version", "1")), CORRUPT, "'version' must be an integer"),
    ("version-bool", _unsigned(_set(_top, "version", True)), CORRUPT, "'version' must be an integer"),
    ("version-newer", _unsigned(_set(_top, "version", 2)), UNSUPPORTED, "drain the node and clean up first"),
    ("version-older", _unsigned(_set(_top, "version", 0)), UNSUPPORTED, "drain the node and clean up first"),
    ("unknown-top-field", _unsigned(_set(_top, "v1", {})), CORRUPT, "$.v1"),
    ("checksum-missing", _unsigned(_drop(_top, "checksum")), CORRUPT, "$.checksum"),
    ("checksum-malformed", _unsigned(_set(_top, "checksum", 12345)), CORRUPT, "64 lowercase hex"),
    ("checksum-mismatch", _unsigned(_set(_dev, "originalDriver", "ixgbevf")), CORRUPT, "checksum mismatch"),
    ("unknown-device-field", _resigned(_set(_dev, "Device", {})), CORRUPT, "devices[0].Device"),
    ("missing-device-field", _resigned(_drop(_dev, "pciAddress")), CORRUPT, "devices[0].pciAddress"),
    ("wrong-type-field", _resigned(_set(_dev, "requestNames", "vf")), CORRUPT, "devices[0].requestNames"),
    ("vf-config-not-object", _resigned(_set(_dev, "vfConfig", [])), CORRUPT, "devices[0].vfConfig"),
    ("claims-not-object", _resigned(_set(lambda d: d["data"], "claims", [])), CORRUPT, "data.claims"),
    ("devices-empty", _resigned(_set(_claim, "devices", [])), CORRUPT, "devices"),
    ("binding-null", _resigned(_set(_dev, "managedBinding", None)), CORRUPT, "managedBinding"),
    ("binding-version-newer", _resigned(_set(_binding, "bindingVersion", 2)), UNSUPPORTED, "bindingVersion"),
    ("binding-version-string", _resigned(_set(_binding, "bindingVersion", "1")), CORRUPT, "bindingVersion"),
    ("binding-version-missing", _resigned(_drop(_binding, "bindingVersion")), CORRUPT, "bindingVersion"),
    ("phase-unknown", _resigned(_set(_binding, "phase", "Released")), CORRUPT, "not one of Pending"),
    ("phase-lowercase", _resigned(_set(_binding, "phase", "ready")), CORRUPT, "not one of Pending"),
    (
        "unknown-binding-field",
        _resigned(_set(_binding, "podUID", fx.POD_A)),
        CORRUPT,
        "managedBinding.podUID",
    ),
    (
        "unknown-source-field",
        _resigned(lambda d: _binding(d)["source"].update(kind="NAD")),
        CORRUPT,
        "source.kind",
    ),
    ("attachment-id-mismatch", _resigned(_set(_binding, "attachmentID", "f" * 64)), CORRUPT, "attachmentID"),
    ("shadow-name-mismatch", _resigned(_set(_binding, "shadowName", "dra-sriov-x")), CORRUPT, "shadowName"),
    ("config-hash-mismatch", _resigned(_set(_binding, "renderedConfig", "{}")), CORRUPT, "configSHA256"),
    (
        "shadow-namespace-differs",
        _resigned(_set(_binding, "shadowNamespace", "ns-b")),
        CORRUPT,
        "shadowNamespace",
    ),
    (
        "interface-differs",
        _resigned(_set(_binding, "interface", "dra7")),
        CORRUPT,
        "managedBinding.interface",
    ),
    ("lone-surrogate", VALID.replace(b'"kind": "VfConfig"', b'"kind": "\\ud800"', 1), CORRUPT, "corrupt"),
]


@pytest.mark.parametrize(
    ("raw", "reason", "fragment"),
    [(r, why, f) for _, r, why, f in REJECTIONS],
    ids=[i for i, *_ in REJECTIONS],
)
def test_decode_rejects_with_an_actionable_message(raw: bytes, reason: errors.Reason, fragment: str) -> None:
    with pytest.raises(errors.ContractViolation) as info:
        codec.decode_checkpoint(raw, source=SOURCE)
    err = info.value
    assert err.reason is reason
    assert SOURCE in str(err)
    assert fragment in str(err)
    assert "left untouched" in str(err)


def test_valid_base_document_of_the_rejection_table_decodes() -> None:
    assert list(codec.decode_checkpoint(VALID).claims) == [fx.CLAIM_1]


def test_decode_reports_every_malformed_field_at_once() -> None:
    def change(doc: dict[str, Any]) -> None:
        _dev(doc, 0)["pciAddress"] = 3
        _dev(doc, 1)["pool"] = 4

    with pytest.raises(errors.ContractViolation) as info:
        codec.decode_checkpoint(_resigned(change))
    paths = [e.path for e in info.value.errors]
    assert f'data.claims["{fx.CLAIM_1}"].devices[0].pciAddress' in paths
    assert f'data.claims["{fx.CLAIM_1}"].devices[1].pool' in paths


def test_checksummed_file_nested_near_the_recursion_limit_is_corrupt_not_a_crash() -> None:
    # Depths around the interpreter's limit: some decode, and then the checksum's re-encoding of
    # ``data`` must not be the step that overflows with a raw RecursionError.
    for depth in range(800, 1001):
        data = '{"claims":{"x":{"vf":' + "[" * depth + "]" * depth + "}}}"
        digest = hashlib.sha256(data.encode()).hexdigest()
        raw = f'{{"version":1,"checksum":"{digest}","data":{data}}}'.encode()
        with pytest.raises(errors.ContractViolation) as info:
            codec.decode_checkpoint(raw, source=SOURCE)
        assert "left untouched" in str(info.value), depth


def test_canonical_json_of_data_nested_too_deeply_is_a_contract_violation() -> None:
    value: list[Any] = []
    for _ in range(100_000):
        value = [value]
    with pytest.raises(errors.ContractViolation, match="not canonical JSON"):
        checkpoint_doc.canonical_json(value)
