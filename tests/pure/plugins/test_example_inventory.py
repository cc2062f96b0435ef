"""The example inventory and the examples agree on where the plugin's policies live.

``playbooks/inventory/example.yml`` is a direct-policy install: the plugin watches
``plugin_policy_namespace``, and the direct examples (``gpu-nic-pairs``, ``one-network-deviceclass``) put
their SriovResourcePolicies and DeviceAttributes exactly there. The operator-managed example puts its
node policies in the inventory's ``operator_namespace``. A mismatch publishes no device while every
check passes, so it is held here.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[3]
INVENTORY = REPO / "playbooks" / "inventory" / "example.yml"
DIRECT = ("gpu-nic-pairs", "one-network-deviceclass")
POLICY_KINDS = ("SriovResourcePolicy", "DeviceAttributes")


def _vars() -> dict[str, Any]:
    return yaml.safe_load(INVENTORY.read_text())["all"]["vars"]


def _namespaces(folder: str, kinds: tuple[str, ...]) -> set[str]:
    docs = [
        d
        for f in sorted((REPO / "examples" / folder).glob("*.yaml"))
        for d in yaml.safe_load_all(f.read_text())
    ]
    return {d["metadata"]["namespace"] for d in docs if isinstance(d, dict) and d.get("kind") in kinds}


@pytest.mark.parametrize("folder", DIRECT)
def test_direct_examples_put_their_policies_where_the_example_inventory_makes_the_plugin_watch(
    folder: str,
) -> None:
    assert _namespaces(folder, POLICY_KINDS) == {_vars()["plugin_policy_namespace"]}


def test_the_operator_example_puts_its_node_policies_in_the_example_inventorys_operator_namespace() -> None:
    kinds = ("SriovNetworkNodePolicy", "SriovNetwork")
    assert _namespaces("operator-two-rails", kinds) == {_vars()["operator_namespace"]}


def test_the_operator_managed_variant_in_the_example_inventory_watches_the_operator_namespace() -> None:
    """The commented variant, once uncommented, is what operator-two-rails needs."""
    variant = [
        line.strip().removeprefix("# ")
        for line in INVENTORY.read_text().splitlines()
        if line.strip().startswith("# plugin_policy_namespace:")
    ]
    assert variant == [f"plugin_policy_namespace: {_vars()['operator_namespace']}"]
