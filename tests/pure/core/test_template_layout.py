"""Tests of sriov_dra.core.template_layout: where the sriov entry is and which plugins may follow (docs/design.md#render)."""

from __future__ import annotations

import pytest
from tests.fakes.render_sources import INVALID, PCI, UNSUPPORTED, nad, paths, reject, rendered_doc

from sriov_dra.core import render, template_layout
from sriov_dra_rules import errors
from sriov_dra_rules.strict_json import JsonValue

# --- layout ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ({"cniVersion": "1.0.0", "type": "sriov", "plugins": [{"type": "sriov"}]},
         [("spec.config", INVALID, "both type and plugins")]),
        ({"cniVersion": "1.0.0", "type": "", "plugins": []}, [("spec.config", INVALID, "both type and plugins")]),
        ({"cniVersion": "1.0.0", "name": "x"}, [("spec.config", INVALID, "neither type")]),
        ({"cniVersion": "1.0.0", "type": "macvlan"}, [("spec.config.type", UNSUPPORTED, "requires type \"sriov\"")]),
        ({"cniVersion": "1.0.0", "type": 1}, [("spec.config.type", INVALID, "must be a string")]),
        ({"cniVersion": "1.0.0", "type": "multus", "delegates": [{"type": "sriov"}]},
         [("spec.config.delegates", UNSUPPORTED, "nested Multus"), ("spec.config.type", UNSUPPORTED, "nested Multus")]),
        ({"cniVersion": "1.0.0", "plugins": []}, [("spec.config.plugins", INVALID, "got an empty array")]),
        ({"cniVersion": "1.0.0", "plugins": {"type": "sriov"}}, [("spec.config.plugins", INVALID, "got an object")]),
        ({"cniVersion": "1.0.0", "plugins": [{"type": "sriov"}, "tuning"]},
         [("spec.config.plugins[1]", INVALID, "must be a plugin object")]),
        ({"cniVersion": "1.0.0", "plugins": [{"type": "sriov"}, {"mtu": 9000}]},
         [("spec.config.plugins[1].type", INVALID, "nonempty string")]),
        ({"cniVersion": "1.0.0", "plugins": [{"type": "sriov"}, {"type": "sriov"}]},
         [("spec.config.plugins[1].type", UNSUPPORTED, "second sriov entry")]),
        ({"cniVersion": "1.0.0", "plugins": [{"type": "sriov"}, {"type": "multus-shim"}]},
         [("spec.config.plugins[1].type", UNSUPPORTED, "nested Multus")]),
        ({"cniVersion": "1.0.0", "plugins": [{"type": "sriov"}, {"type": "portmap"}]},
         [("spec.config.plugins[1].type", UNSUPPORTED, "followed only by the metaplugins tuning")]),
        ({"cniVersion": "1.0.0", "plugins": [{"type": "sriov"}, {"type": "bond", "links": []}]},
         [("spec.config.plugins[1].type", UNSUPPORTED, "another binding model")]),
        ({"cniVersion": "1.0.0", "plugins": [{"type": "tuning"}]}, [("spec.config.plugins", UNSUPPORTED, "no sriov entry")]),
        ({"cniVersion": "1.0.0", "plugins": [{"type": "sriov", "delegates": []}]},
         [("spec.config.plugins[0]", UNSUPPORTED, "nested plugin lists")]),
        ({"cniVersion": "1.0.0", "plugins": [{"type": "SRIOV"}]},
         [("spec.config.plugins[0].type", UNSUPPORTED, "'SRIOV' is not supported"),
          ("spec.config.plugins", UNSUPPORTED, "no sriov entry")]),
    ],
    ids=[
        "ambiguous-type-and-plugins", "ambiguous-even-when-empty", "neither-type-nor-plugins",
        "single-plugin-not-sriov", "single-plugin-type-not-string", "nested-multus-delegates",
        "empty-plugins", "plugins-not-array", "plugin-entry-not-object", "plugin-entry-without-type",
        "two-sriov-entries", "nested-multus-in-chain", "non-allowlisted-metaplugin",
        "bond-graph", "conflist-without-sriov", "nested-list-in-entry", "type-is-case-sensitive",
    ],
)  # fmt: skip
def test_layout_rules(config: dict[str, JsonValue], expected: list[tuple[str, errors.Reason, str]]) -> None:
    exc = reject(nad(config))
    assert paths(exc) == [p for p, _, _ in expected]
    assert exc.reason == (INVALID if any(r == INVALID for _, r, _ in expected) else UNSUPPORTED)
    for error, (_, _, mentions) in zip(exc.errors, expected, strict=True):
        assert mentions in error.message


@pytest.mark.parametrize(
    "device_type", sorted(template_layout.DEVICE_CREATING_TYPES), ids=lambda t: f"device-creating-{t}"
)
def test_every_device_creating_type_is_rejected_after_sriov(device_type: str) -> None:
    exc = reject(nad({"cniVersion": "1.0.0", "plugins": [{"type": "sriov"}, {"type": device_type}]}))
    assert exc.reason == UNSUPPORTED
    assert paths(exc) == ["spec.config.plugins[1].type"]


def test_several_allowlisted_metaplugins_may_follow_sriov() -> None:
    config = {
        "cniVersion": "1.0.0",
        "plugins": [{"type": "sriov"}, {"type": "tuning", "mtu": 9000}, {"type": "tuning", "sysctl": {}}],
    }
    out = rendered_doc(render.render_shadow_config(nad(config), PCI))
    assert out["plugins"] == [
        {"type": "sriov", "deviceID": PCI},
        {"type": "tuning", "mtu": 9000},
        {"type": "tuning", "sysctl": {}},
    ]
