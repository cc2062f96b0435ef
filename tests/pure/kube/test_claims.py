"""kube.claims: the claim body of a status write re-creates opaque parameters byte for byte."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.kube import claims, errors

PARAMS = {
    "apiVersion": "sriovnetwork.k8snetworkplumbingwg.io/v1alpha1",
    "kind": "VfConfig",
    "driver": "a<b&c>",
}


def claim_with(*params: dict[str, Any]) -> dict[str, Any]:
    configs = [
        {"source": "FromClaim", "requests": ["vf"], "opaque": {"driver": "d", "parameters": p}}
        for p in params
    ]
    return {
        "metadata": {"name": "c", "namespace": "ns", "uid": "u", "resourceVersion": "7"},
        "status": {"allocation": {"devices": {"results": [], "config": configs}}, "devices": []},
    }


def raw_parameters(body: bytes, index: int) -> str:
    """The exact text of parameters object ``index`` inside encoded ``body``."""
    text = body.decode()
    start = -1
    for _ in range(index + 1):
        start = text.index('"parameters":', start + 1)
    depth, begin = 0, text.index("{", start)
    for pos in range(begin, len(text)):
        depth += {"{": 1, "}": -1}.get(text[pos], 0)
        if depth == 0:
            return text[begin : pos + 1]
    raise AssertionError("unterminated parameters object")


@pytest.mark.parametrize(
    ("style", "expected"),
    [
        (
            "python",
            '{"apiVersion": "sriovnetwork.k8snetworkplumbingwg.io/v1alpha1", "kind": "VfConfig", "driver": "a<b&c>"}',
        ),
        (
            "go",
            '{"apiVersion":"sriovnetwork.k8snetworkplumbingwg.io/v1alpha1","kind":"VfConfig","driver":"a\\u003cb\\u0026c\\u003e"}',
        ),
    ],
    ids=["python-client-format-has-spaces", "go-format-is-compact-and-html-escaped"],
)
def test_parameters_are_encoded_in_the_creators_format(style: str, expected: str) -> None:
    body = claims.encode_claim(claim_with(PARAMS), [style])
    assert raw_parameters(body, 0) == expected
    assert json.loads(body)["status"]["allocation"]["devices"]["config"][0]["opaque"]["parameters"] == PARAMS


def test_each_config_gets_its_own_format() -> None:
    body = claims.encode_claim(claim_with({"a": 1}, {"b": 2}), ["python", "go"])
    assert (raw_parameters(body, 0), raw_parameters(body, 1)) == ('{"a": 1}', '{"b":2}')


def test_encoding_leaves_the_input_claim_unchanged() -> None:
    claim = claim_with(PARAMS)
    before = json.dumps(claim)
    claims.encode_claim(claim, ["go"])
    assert json.dumps(claim) == before


@pytest.mark.parametrize(
    ("count", "expected"),
    [
        (0, [()]),
        (1, [("go",), ("python",)]),
        (2, [("go", "go"), ("python", "python"), ("go", "python"), ("python", "go")]),
        (4, [("go",) * 4, ("python",) * 4]),
    ],
    ids=[
        "no-configs-one-attempt",
        "one-config-two-formats",
        "two-configs-uniform-first-then-mixed",
        "many-configs-uniform-only",
    ],
)
def test_formats_are_tried_uniform_first_and_bounded(count: int, expected: list[tuple[str, ...]]) -> None:
    assert claims._style_choices(count) == expected


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (
            errors.Invalid(
                'update: HTTP 422 Invalid: ResourceClaim "c" is invalid: status.allocation: Invalid value: {'
            ),
            True,
        ),
        (errors.Invalid("update: HTTP 422 Invalid: status.devices[0].device: Invalid value"), False),
        (errors.Conflict("update: HTTP 409 Conflict: status.allocation: Invalid value"), False),
    ],
    ids=["allocation-bytes-differ", "other-invalid-field", "conflict-is-not-a-format-problem"],
)
def test_only_an_allocation_mismatch_triggers_the_next_format(exc: errors.ApiError, expected: bool) -> None:
    assert claims._allocation_bytes_differ(exc) is expected


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner, max_size=3),
    max_leaves=10,
)


@given(st.lists(st.dictionaries(st.text(max_size=6), _json, max_size=4), min_size=1, max_size=3), st.data())
def test_encoding_property_decodes_to_the_same_claim_with_each_parameters_object_in_its_format(
    params: list[dict[str, Any]], data: st.DataObject
) -> None:
    styles = data.draw(st.lists(st.sampled_from(claims.STYLES), min_size=len(params), max_size=len(params)))
    claim = claim_with(*params)
    body = claims.encode_claim(claim, styles)
    assert json.loads(body) == claim
    text = body.decode()
    for param, style in zip(params, styles, strict=True):
        expected = json.dumps(param) if style == "python" else claims._styled(param, "go")
        assert f'"parameters":{expected}' in text


def test_a_status_write_sends_the_new_devices_and_leaves_the_read_claim_unchanged(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    claim = claim_with(PARAMS)
    before = json.dumps(claim)
    sent: list[bytes] = []

    def put_json(api: object, path: str, data: bytes, *, action: str, timeout_s: float) -> dict[str, Any]:
        sent.append(data)
        return {}

    monkeypatch.setattr(claims, "_put_json", put_json)
    claims.replace_status_devices(object(), claim, [{"driver": "d", "pool": "p", "device": "v"}], timeout_s=1)  # type: ignore[arg-type]
    assert json.dumps(claim) == before
    body = json.loads(sent[0])
    assert body["status"]["devices"] == [{"driver": "d", "pool": "p", "device": "v"}]
    assert body["status"]["allocation"] == claim["status"]["allocation"]
    assert raw_parameters(sent[0], 0) == claims._styled(PARAMS, "go")


class FakeServer:
    """FAKE API server for one claim: GETs and status PUTs (``claims.get_claim``/``_put_json``)
    under the resourceVersion precondition, counted by verb."""

    def __init__(self, claim: dict[str, Any]) -> None:
        self.claim = json.loads(json.dumps(claim))
        self.calls: list[str] = []

    def get(self, api: object, namespace: str, name: str, *, timeout_s: float) -> dict[str, Any]:
        self.calls.append("GET")
        return json.loads(json.dumps(self.claim))

    def put(self, api: object, path: str, data: bytes, *, action: str, timeout_s: float) -> dict[str, Any]:
        self.calls.append("PUT")
        body = json.loads(data)
        if body["metadata"]["resourceVersion"] != self.claim["metadata"]["resourceVersion"]:
            raise errors.Conflict(f"{action}: HTTP 409 Conflict", status=409)
        self.bump(devices=body["status"]["devices"])
        return json.loads(json.dumps(self.claim))

    def bump(self, **status: Any) -> None:
        """Another write of the claim: a new resourceVersion (and the given status fields)."""
        self.claim["status"].update(status)
        meta = self.claim["metadata"]
        meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1)


OURS = {"driver": "d", "pool": "p", "device": "v"}


def set_ours(devices: object) -> list[dict[str, object]] | None:
    return None if devices == [OURS] else [OURS]


def clear_ours(devices: object) -> list[dict[str, object]] | None:
    return [] if devices else None


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> FakeServer:
    fake = FakeServer(claim_with(PARAMS))
    monkeypatch.setattr(claims, "get_claim", fake.get)
    monkeypatch.setattr(claims, "_put_json", fake.put)
    return fake


def test_a_status_clear_after_this_clients_write_starts_from_the_written_claim_without_a_get(
    server: FakeServer,
) -> None:
    client = claims.ClaimClient(object())  # type: ignore[arg-type]
    assert client.update_device_status("ns", "c", uid="u", compute=set_ours, current=server.claim)
    assert client.update_device_status("ns", "c", uid="u", compute=clear_ours)
    assert server.calls == ["PUT", "PUT"]
    assert server.claim["status"]["devices"] == []


def test_a_written_claim_changed_since_costs_a_refused_put_then_a_fresh_read(server: FakeServer) -> None:
    client = claims.ClaimClient(object(), attempts=1)  # type: ignore[arg-type]
    assert client.update_device_status("ns", "c", uid="u", compute=set_ours, current=server.claim)
    other = {"driver": "gpu", "pool": "p", "device": "g"}
    server.bump(devices=[OURS, other])  # another driver wrote its entry meanwhile
    assert client.update_device_status("ns", "c", uid="u", compute=lambda d: [e for e in d if e != OURS])
    assert server.calls == ["PUT", "PUT", "GET", "PUT"]
    assert server.claim["status"]["devices"] == [other]


def test_a_written_claim_with_nothing_to_change_is_read_again_before_anything_is_decided(
    server: FakeServer,
) -> None:
    client = claims.ClaimClient(object())  # type: ignore[arg-type]
    assert client.update_device_status("ns", "c", uid="u", compute=set_ours, current=server.claim)
    assert client.update_device_status("ns", "c", uid="u", compute=clear_ours)
    server.bump(devices=[OURS])  # written again by someone else (e.g. another instance's prepare)
    assert client.update_device_status("ns", "c", uid="u", compute=clear_ours)
    assert server.calls == ["PUT", "PUT", "GET", "PUT"]
    assert server.claim["status"]["devices"] == []
