"""sriov_dra_rules.extended_resources: the DeviceClass serving a device plugin's extended resource.

The server-side check of the same rule (the API server accepts what it builds and refuses what it
refuses) is ``tests/cluster/test_extended_resource_classes.py``.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra_rules import extended_resources, names

LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
prefixes = st.from_regex(rf"{LABEL}(\.{LABEL}){{0,2}}", fullmatch=True).filter(
    lambda p: len(p) <= 60 and not p.endswith(("kubernetes.io", "k8s.io"))
)
resource_names = st.from_regex(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,40}[A-Za-z0-9])?", fullmatch=True)


@pytest.mark.parametrize(
    ("rn", "pool"),
    [
        ("intel_nic", "intel-nic"),
        ("Intel-NIC", "intel-nic"),
        ("__", "sriov"),
        ("a.b", "ab"),
        ("sriov_vfs", "sriov-vfs"),
        ("x--y", "x--y"),
    ],
    ids=["underscore", "upper-case", "nothing-left", "dot-dropped", "spec-example", "dashes-not-collapsed"],
)
def test_device_class_names_follow_upstreams_pool_normalisation(rn: str, pool: str) -> None:
    assert extended_resources.device_class_name(rn) == pool


@given(st.text(max_size=40))
def test_device_class_names_are_lowercase_dashes_and_digits(rn: str) -> None:
    assert re.fullmatch(LABEL, extended_resources.device_class_name(rn))


@given(prefix=prefixes, rn=resource_names)
def test_every_valid_name_gets_one_class_selecting_its_attribute_value(prefix: str, rn: str) -> None:
    assert extended_resources.extended_resource_problem(prefix, rn) is None
    obj = extended_resources.device_class(prefix, rn, labels={"b": "2", "a": "1"})
    meta, spec = obj["metadata"], obj["spec"]
    assert isinstance(meta, dict) and isinstance(spec, dict)
    assert meta == {"name": extended_resources.device_class_name(rn), "labels": {"a": "1", "b": "2"}}
    assert names.dns1123_subdomain_problem(meta["name"]) is None
    assert spec["extendedResourceName"] == f"{prefix}/{rn}"
    (selector,) = spec["selectors"]
    expression = selector["cel"]["expression"]
    assert expression.startswith(f'device.driver == "{names.DRIVER_NAME}" && ')
    assert expression.endswith(f'.resourceName == "{prefix}/{rn}"')


@pytest.mark.parametrize(
    ("prefix", "rn", "fragment"),
    [
        ("", "rail_a", "no prefix"),
        ("openshift.io", "", "no resource name"),
        ("OpenShift.io", "rail_a", "the prefix"),
        ("kubernetes.io", "rail_a", "Kubernetes domain"),
        ("x.k8s.io", "rail_a", "Kubernetes domain"),
        ("openshift.io", "rail_a-", "alphanumeric at both ends"),
        ("openshift.io", "rail/a", "alphanumeric at both ends"),
        ("openshift.io", "r" * 64, "at most 63"),
        ("a" * 63 + "." + "b" * 63 + "." + "c" * 63 + "." + "d" * 60, "rail", "longer than 244"),
    ],
)
def test_names_kubernetes_refuses_are_refused_with_the_reason(prefix: str, rn: str, fragment: str) -> None:
    problem = extended_resources.extended_resource_problem(prefix, rn)
    assert problem is not None and fragment in problem
    with pytest.raises(ValueError, match="extendedResourceName"):
        extended_resources.device_class(prefix, rn)


def test_a_quote_in_the_driver_name_stays_inside_the_cel_string() -> None:
    obj = extended_resources.device_class("example.com", "rail", driver='a"b\\c')
    spec = obj["spec"]
    assert isinstance(spec, dict)
    assert spec["selectors"][0]["cel"]["expression"].startswith('device.driver == "a\\"b\\\\c" && ')


def test_the_examples_device_classes_are_what_the_rule_generates() -> None:
    import pathlib

    import yaml

    path = pathlib.Path(__file__).resolve().parents[3] / "examples" / "device-plugin-resources" / "rails.yaml"
    classes = [d for d in yaml.safe_load_all(path.read_text()) if d and d["kind"] == "DeviceClass"]
    want = [extended_resources.device_class("openshift.io", rn) for rn in ("rail_a", "rail_b")]
    assert [(c["metadata"]["name"], c["spec"]) for c in classes] == [
        (w["metadata"]["name"], w["spec"])
        for w in want  # type: ignore[index]
    ]
