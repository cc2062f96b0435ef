"""``sriov_dra_rules.checkpoint_doc``: what the collection reads of the plugin's checkpoint.

The bindings it lists must be exactly the managed bindings the plugin's codec wrote, and no byte
of a document may change without the reader refusing it or reading the same bindings: the drain
and cleanup roles act on this answer (docs/design.md#rollout), so a damaged checkpoint must never read as
"no binding left".
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from tests.fakes import checkpoint_records as fx

from sriov_dra.core.plugin import checkpoint_codec as codec
from sriov_dra.core.plugin import checkpoint_model as model
from sriov_dra_rules import checkpoint_doc, errors

CLAIMS = (fx.CLAIM_1, fx.CLAIM_2, fx.CLAIM_3)
PODS = (fx.POD_A, fx.POD_B)


@st.composite
def checkpoints(draw: st.DrawFn) -> model.Checkpoint:
    """Checkpoints of up to three claims, each with 1-3 VFs, managed or not, in any phase."""
    records = []
    used: set[int] = set()
    for claim_uid in draw(st.lists(st.sampled_from(CLAIMS), unique=True, max_size=3)):
        indexes = draw(
            st.lists(st.integers(0, 15).filter(lambda i: i not in used), min_size=1, max_size=3, unique=True)
        )
        used.update(indexes)
        records.append(
            fx.record(
                claim_uid,
                draw(st.sampled_from(PODS)),
                indexes=tuple(indexes),
                managed=draw(st.booleans()),
                phase=draw(st.sampled_from(list(model.Phase))),
                name=f"claim-{claim_uid[-1]}",
            )
        )
    return fx.checkpoint(*records)


def _expected(cp: model.Checkpoint) -> list[dict[str, object]]:
    return [
        {
            "claim_uid": str(uid),
            "namespace": rec.namespace,
            "name": rec.name,
            "pod_uid": str(rec.pod_uid),
            "device": dev.device,
            "phase": str(dev.managed.phase),
            "shadow": f"{dev.managed.shadow_namespace}/{dev.managed.shadow_name}",
        }
        for uid, rec in sorted(cp.claims.items())
        for dev in rec.devices
        if dev.managed is not None
    ]


@given(checkpoints())
def test_the_bindings_read_are_exactly_the_managed_bindings_the_codec_wrote(cp: model.Checkpoint) -> None:
    assert checkpoint_doc.managed_bindings(codec.encode_checkpoint(cp), source="c") == _expected(cp)


@given(checkpoints(), st.data())
def test_no_changed_byte_reads_as_other_bindings(cp: model.Checkpoint, data: st.DataObject) -> None:
    raw = bytearray(codec.encode_checkpoint(cp))
    at = data.draw(st.integers(0, len(raw) - 1))
    raw[at] = data.draw(st.integers(0, 255).filter(lambda b: b != raw[at]))
    try:
        found = checkpoint_doc.managed_bindings(bytes(raw), source="c")
    except errors.SriovDraError:
        return
    assert found == _expected(cp)


def test_the_codec_checksums_with_the_shared_rule() -> None:
    """One checksum: the plugin's codec and the collection's reader cannot drift apart."""
    assert checkpoint_doc.checksum is checkpoint_doc.checksum
    assert checkpoint_doc.canonical_json is checkpoint_doc.canonical_json


@pytest.mark.parametrize(
    ("document", "message"),
    [
        ([], "is corrupt: the document is a list, not an object"),
        ({"version": True, "data": {}}, "has version True; this reader understands version 1"),
        (
            {"version": 1, "data": {"claims": []}},
            "is corrupt: 'data.claims' is not an object keyed by claim UID",
        ),
        ({"version": 1, "data": {"claims": {"u": {}}}}, "is corrupt: claim u has no 'devices' list"),
        (
            {"version": 1, "data": {"claims": {"u": {"devices": [{"managedBinding": "Ready"}]}}}},
            "is corrupt: claim u device 0: 'managedBinding' is not an object",
        ),
    ],
    ids=["list", "bool-version", "claims-list", "no-devices", "binding-text"],
)
def test_a_document_of_another_shape_is_refused_naming_what_is_wrong(document: object, message: str) -> None:
    with pytest.raises(errors.ContractViolation) as refused:
        checkpoint_doc.bindings_of(document, source="/x/checkpoint.json")
    assert f"checkpoint /x/checkpoint.json {message}" in str(refused.value)
