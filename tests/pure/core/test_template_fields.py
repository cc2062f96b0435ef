"""Tests of sriov_dra.core.template_fields: the effective CNI name and the CNI versions (docs/design.md#render)."""

from __future__ import annotations

import pytest
from tests.fakes.render_sources import INVALID, OTHER_PCI, PCI, UNSUPPORTED, nad, paths, reject, rendered_doc

from sriov_dra.core import render, template_fields
from sriov_dra_rules import errors
from sriov_dra_rules.strict_json import JsonValue

# --- effective CNI name (kept for IPAM, docs/design.md#ipam) -------------------------------------


@pytest.mark.parametrize(
    ("config", "expected_name", "expected_keys"),
    [
        ({"cniVersion": "0.4.0", "plugins": [{"type": "sriov"}]}, "net-a", ["cniVersion", "name", "plugins"]),
        ({"cniVersion": "0.4.0", "name": "", "plugins": [{"type": "sriov"}]}, "net-a", ["cniVersion", "name", "plugins"]),
        ({"plugins": [{"type": "sriov"}], "cniVersion": "0.4.0"}, "net-a", ["plugins", "cniVersion", "name"]),
        ({"cniVersion": "1.0.0", "type": "sriov"}, "net-a", ["cniVersion", "name", "type", "deviceID"]),
        ({"name": "ai-workloads-rail-a", "cniVersion": "1.0.0", "type": "sriov"}, "ai-workloads-rail-a",
         ["name", "cniVersion", "type", "deviceID"]),
        ({"cniVersion": "1.0.0", "name": "Rail_A.v2-x", "type": "sriov"}, "Rail_A.v2-x", ["cniVersion", "name", "type", "deviceID"]),
    ],
    ids=[
        "conflist-without-name-gets-template-metadata-name", "empty-name-replaced-in-place",
        "missing-name-inserted-after-cniVersion", "single-plugin-without-name",
        "explicit-name-preserved-exactly-in-place", "explicit-name-with-cni-punctuation-preserved",
    ],
)  # fmt: skip
def test_effective_cni_name(
    config: dict[str, JsonValue], expected_name: str, expected_keys: list[str]
) -> None:
    result = render.render_shadow_config(nad(config), PCI)
    out = rendered_doc(result)
    assert result.cni_name == expected_name
    assert out["name"] == expected_name
    assert list(out) == expected_keys


def test_literal_macvlan_input_is_rejected_as_device_creating() -> None:
    config = {"cniVersion": "0.4.0", "plugins": [{"type": "macvlan", "master": "eth1", "mode": "bridge"}]}
    exc = reject(nad(config))
    assert exc.reason == UNSUPPORTED
    assert paths(exc) == ["spec.config.plugins[0].type", "spec.config.plugins"]
    assert "'macvlan' creates or moves its own network device" in exc.errors[0].message
    assert "ns-a/net-a" in str(exc)


def test_cni_name_never_comes_from_the_pci_or_shadow() -> None:
    a = render.render_shadow_config(nad({"cniVersion": "1.0.0", "type": "sriov"}), PCI)
    b = render.render_shadow_config(nad({"cniVersion": "1.0.0", "type": "sriov"}), OTHER_PCI)
    assert a.cni_name == b.cni_name == "net-a"


@pytest.mark.parametrize(
    ("config", "path", "mentions"),
    [
        ({"cniVersion": "1.0.0", "name": "-bad", "type": "sriov"}, "spec.config.name", "is not valid"),
        ({"cniVersion": "1.0.0", "name": "has space", "type": "sriov"}, "spec.config.name", "is not valid"),
        ({"cniVersion": "1.0.0", "name": "a/b", "type": "sriov"}, "spec.config.name", "is not valid"),
        ({"cniVersion": "1.0.0", "name": 7, "type": "sriov"}, "spec.config.name", "must be a string"),
        ({"cniVersion": "1.0.0", "name": None, "type": "sriov"}, "spec.config.name", "must be a string"),
    ],
    ids=["leading-dash", "space", "slash", "number", "null"],
)
def test_invalid_explicit_cni_name_is_rejected_not_replaced(
    config: dict[str, JsonValue], path: str, mentions: str
) -> None:
    exc = reject(nad(config))
    assert exc.reason == INVALID
    assert paths(exc) == [path]
    assert mentions in exc.errors[0].message


def test_source_without_metadata_name_is_invalid() -> None:
    source = nad({"cniVersion": "1.0.0", "name": "x", "type": "sriov"})
    source["metadata"] = {"namespace": "ns-a"}
    exc = reject(source)
    assert exc.reason == INVALID
    assert paths(exc) == ["metadata.name"]
    assert "ns-a/<no name>" in str(exc)


# --- CNI version ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("version", template_fields.SUPPORTED_CNI_VERSIONS)
def test_supported_cni_versions_are_accepted_and_kept(version: str) -> None:
    result = render.render_shadow_config(nad({"cniVersion": version, "type": "sriov"}), PCI)
    assert result.cni_version == version
    assert rendered_doc(result)["cniVersion"] == version


@pytest.mark.parametrize(
    ("config", "path", "reason"),
    [
        ({"type": "sriov"}, "spec.config.cniVersion", INVALID),
        ({"cniVersion": 1.0, "type": "sriov"}, "spec.config.cniVersion", INVALID),
        ({"cniVersion": "0.2.0", "type": "sriov"}, "spec.config.cniVersion", UNSUPPORTED),
        ({"cniVersion": "0.1.0", "type": "sriov"}, "spec.config.cniVersion", UNSUPPORTED),
        ({"cniVersion": "2.0.0", "type": "sriov"}, "spec.config.cniVersion", UNSUPPORTED),
        ({"cniVersion": "1.0", "type": "sriov"}, "spec.config.cniVersion", UNSUPPORTED),
        ({"cniVersion": "1.1.0", "cniVersions": ["1.0.0", "9.9.9"], "plugins": [{"type": "sriov"}]},
         "spec.config.cniVersions", UNSUPPORTED),
        ({"cniVersion": "1.1.0", "cniVersions": "1.1.0", "plugins": [{"type": "sriov"}]}, "spec.config.cniVersions", INVALID),
    ],
    ids=["missing", "number", "legacy-0.2.0", "legacy-0.1.0", "future-2.0.0", "not-semver",
         "cni-versions-with-unsupported", "cni-versions-not-array"],
)  # fmt: skip
def test_cni_version_validation(config: dict[str, JsonValue], path: str, reason: errors.Reason) -> None:
    exc = reject(nad(config))
    assert exc.reason == reason
    assert paths(exc) == [path]


def test_cni_versions_list_of_supported_versions_is_kept() -> None:
    config = {"cniVersion": "1.1.0", "cniVersions": ["1.0.0", "1.1.0"], "plugins": [{"type": "sriov"}]}
    assert rendered_doc(render.render_shadow_config(nad(config), PCI))["cniVersions"] == ["1.0.0", "1.1.0"]
