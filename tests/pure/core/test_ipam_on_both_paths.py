"""A template's IPAM is checked with one rule on the plugin's template path and the operator's path
(docs/design.md#ipam): a pool host-local or whereabouts would refuse at every ADD (whereabouts written
with host-local's keys, a ``/33`` prefix, an address outside its range) is refused at render, before
a shadow freezes it, with the same words on both paths; the claim's networkData reads only the keys
the IPAM type allocates from.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from tests.fakes import render_sources, sriov_networks

from sriov_dra.core import render
from sriov_dra.core.operator import network_config
from sriov_dra.core.plugin import claim_network_data
from sriov_dra_rules import errors

# (case id, ipam, the path under the ipam object, words every path's message carries)
REFUSED: list[tuple[str, dict[str, Any], str, str]] = [
    ("whereabouts-with-host-local-subnet", {"type": "whereabouts", "subnet": "192.168.1.224/28"}, "subnet",
     "write 'range' instead"),
    ("whereabouts-with-host-local-range-start", {"type": "whereabouts", "range": "192.0.2.0/24",
     "rangeStart": "192.0.2.9"}, "rangeStart", "write 'range_start' instead"),
    ("whereabouts-without-range", {"type": "whereabouts", "network_name": "rail-a"}, "range",
     "fails every ADD without one"),
    ("whereabouts-range-prefix-33", {"type": "whereabouts", "range": "10.0.0.0/33"}, "range",
     "longer than the 32 bits"),
    ("whereabouts-range-unparsable", {"type": "whereabouts", "range": "10.0.0.0"}, "range",
     "is not address/prefix"),
    ("whereabouts-range-start-outside", {"type": "whereabouts", "range": "10.0.0.0/24",
     "range_start": "10.0.1.5"}, "range_start", "is not in the range 10.0.0.0/24"),
    ("whereabouts-range-end-before-start", {"type": "whereabouts", "range": "10.0.0.0/24",
     "range_start": "10.0.0.50", "range_end": "10.0.0.10"}, "range", "after its end"),
    ("whereabouts-ip-ranges-entry-prefix-33", {"type": "whereabouts", "ipRanges": [{"range": "fd00::/129"}]},
     "ipRanges[0].range", "longer than the 128 bits"),
    ("whereabouts-exclude-not-cidr", {"type": "whereabouts", "range": "10.0.0.0/24", "exclude": ["10.0.0.1"]},
     "exclude[0]", "is not address/prefix"),
    ("whereabouts-gateway-not-ip", {"type": "whereabouts", "range": "10.0.0.0/24", "gateway": "10.0.0"},
     "gateway", "must be an IP address"),
    ("host-local-subnet-prefix-33", {"type": "host-local", "subnet": "10.0.0.0/33"}, "subnet",
     "longer than the 32 bits"),
    ("host-local-range-start-outside", {"type": "host-local", "subnet": "10.0.0.0/24",
     "rangeStart": "10.0.1.5"}, "rangeStart", "is not in the subnet"),
    ("host-local-gateway-not-ip", {"type": "host-local", "subnet": "10.0.0.0/24", "gateway": "gw"},
     "gateway", "must be an IP address"),
    ("host-local-with-whereabouts-range", {"type": "host-local", "range": "10.0.0.0/24"}, "range",
     "write 'subnet' instead"),
]  # fmt: skip

ACCEPTED: list[tuple[str, dict[str, Any]]] = [
    ("whereabouts-cidr", {"type": "whereabouts", "range": "192.168.1.224/28"}),
    ("whereabouts-first-last-prefix", {"type": "whereabouts", "range": "192.0.2.225-192.0.2.230/28"}),
    ("whereabouts-start-end-inside", {"type": "whereabouts", "range": "10.0.0.0/24", "range_start": "10.0.0.10",
                                      "range_end": "10.0.0.20", "exclude": ["10.0.0.16/30"], "gateway": "10.0.0.1"}),
    ("whereabouts-ip-ranges", {"type": "whereabouts", "ipRanges": [{"range": "fd00::/64"}, {"range": "10.0.0.0/24"}]}),
    ("host-local-subnet", {"type": "host-local", "subnet": "10.0.0.0/24", "gateway": "10.0.0.1"}),
    ("host-local-without-range", {"type": "host-local"}),
    ("other-type-unchecked", {"type": "dhcp", "subnet": "not-checked"}),
]  # fmt: skip


def _template(ipam: dict[str, Any]) -> dict[str, object]:
    return render_sources.nad({"cniVersion": "1.0.0", "name": "net-a", "type": "sriov", "ipam": ipam})


def _cut(message: str) -> str:
    return " ".join(w for w in message.split() if not w.startswith("spec."))


@pytest.mark.parametrize(("ipam", "field", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_template_whose_ipam_pool_fails_every_add_is_refused_before_a_shadow_freezes_it(
    ipam: dict[str, Any], field: str, words: str
) -> None:
    exc = render_sources.reject(_template(ipam))
    assert exc.reason is errors.Reason.INVALID_NETWORK_TEMPLATE
    assert any(e.path == f"spec.config.ipam.{field}" and words in e.message for e in exc.errors), exc.errors


@pytest.mark.parametrize(("ipam", "field", "words"), [c[1:] for c in REFUSED], ids=[c[0] for c in REFUSED])
def test_a_sriov_network_whose_ipam_pool_fails_every_add_is_an_invalid_network_spec(
    ipam: dict[str, Any], field: str, words: str
) -> None:
    with pytest.raises(errors.InvalidSpec) as caught:
        network_config.render_config(sriov_networks.simple(ipam=json.dumps(ipam)))
    assert caught.value.reason is errors.Reason.INVALID_NETWORK_SPEC
    assert any(e.path == f"spec.ipam.{field}" and words in e.message for e in caught.value.errors)


@pytest.mark.parametrize("case", REFUSED, ids=[c[0] for c in REFUSED])
def test_the_template_and_the_operator_paths_refuse_an_ipam_pool_with_the_same_words(case: Any) -> None:
    _, ipam, _, _ = case
    template = {_cut(e.message) for e in render_sources.reject(_template(ipam)).errors}
    with pytest.raises(errors.InvalidSpec) as caught:
        network_config.render_config(sriov_networks.simple(ipam=json.dumps(ipam)))
    assert {_cut(e.message) for e in caught.value.errors} == template


@pytest.mark.parametrize("ipam", [c[1] for c in ACCEPTED], ids=[c[0] for c in ACCEPTED])
def test_a_pool_the_ipam_plugin_allocates_from_is_copied_untouched_on_both_paths(
    ipam: dict[str, Any],
) -> None:
    out = json.loads(render.render_shadow_config(_template(ipam), render_sources.PCI).config_text)
    assert out["ipam"] == ipam
    doc = json.loads(network_config.render_config(sriov_networks.simple(ipam=json.dumps(ipam))))
    assert doc["ipam"] == ipam


@pytest.mark.parametrize(
    ("ipam", "subnets"),
    [
        ({"type": "whereabouts", "range": "192.0.2.0/24", "subnet": "10.0.0.0/8"}, ["192.0.2.0/24"]),
        ({"type": "host-local", "subnet": "10.0.0.0/24", "range": "192.0.2.0/24"}, ["10.0.0.0/24"]),
        ({"type": "dhcp", "subnet": "10.0.0.0/24"}, []),
        (
            {"type": "static", "addresses": [{"address": "10.0.0.5/24"}], "subnet": "10.9.0.0/16"},
            ["10.0.0.0/24"],
        ),
    ],
    ids=[
        "whereabouts-ignores-subnet",
        "host-local-ignores-range",
        "dhcp-names-none",
        "static-reads-addresses",
    ],
)
def test_claim_network_data_reads_only_the_keys_the_ipam_type_allocates_from(
    ipam: dict[str, Any], subnets: list[str]
) -> None:
    config = json.dumps({"cniVersion": "1.0.0", "name": "n", "type": "sriov", "ipam": ipam})
    assert [str(n) for n in claim_network_data.ipam_subnets(config)] == subnets
