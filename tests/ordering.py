"""Shuffled test order, so every run proves that no test depends on the ones before it.

A test that passes only because an earlier one created what it needs (a
namespace, a CRD) hides a missing fixture. Each run therefore reorders the collected tests:

- tiers keep their collected order (one tier's session fixtures are set up once);
- within a tier, test modules run in a shuffled order;
- within a module of the ``pure`` and ``host`` tiers, groups (a class, or a module-level test
  function with all its parameter cases) run in a shuffled order; the slower tiers keep their
  in-module order, which their module-scoped fixtures are written for.

A test marked ``leaves_lab_node_dead`` (it kills a node of the e2e tier's session lab) runs after
every other test of its tier, in either order.

The seed comes from ``SRIOV_DRA_TEST_ORDER_SEED`` (an integer) or is drawn at random; it is printed
in the report header, so a failure is replayed with the same seed. ``SRIOV_DRA_TEST_ORDER=file``
keeps the plain file order (e.g. to bisect).
"""

from __future__ import annotations

import os
import random
from collections.abc import Callable, Sequence

import pytest

SHUFFLE_WITHIN_MODULE = frozenset({"pure", "host"})


def seed() -> int | None:
    """The order seed of this run, or None when ``SRIOV_DRA_TEST_ORDER=file`` asks for file order.

    Raises: pytest.UsageError when ``SRIOV_DRA_TEST_ORDER_SEED`` is set but is not an integer.
    """
    if os.environ.get("SRIOV_DRA_TEST_ORDER", "") == "file":
        return None
    raw = os.environ.get("SRIOV_DRA_TEST_ORDER_SEED", "")
    if not raw:
        value = random.SystemRandom().randrange(1 << 32)
        os.environ["SRIOV_DRA_TEST_ORDER_SEED"] = str(value)  # one seed for the whole run
        return value
    try:
        return int(raw)
    except ValueError:
        raise pytest.UsageError(
            f"SRIOV_DRA_TEST_ORDER_SEED={raw!r} is not an integer; unset it or give one"
        ) from None


def _runs(items: Sequence[pytest.Item], key: Callable[[pytest.Item], object]) -> list[list[pytest.Item]]:
    """Split ``items`` into maximal consecutive runs with the same ``key``, keeping their order."""
    out: list[list[pytest.Item]] = []
    for item in items:
        if out and key(out[-1][0]) == key(item):
            out[-1].append(item)
        else:
            out.append([item])
    return out


def _group(item: pytest.Item) -> object:
    """A class, or a test function with all its parametrized cases."""
    cls = getattr(item, "cls", None)
    return cls if cls is not None else getattr(item, "originalname", item.name)


def shuffle(items: list[pytest.Item], tier_of: Callable[[pytest.Item], str], order_seed: int) -> None:
    """Reorder ``items`` in place as the module docstring says; a pure function of the seed."""
    rng = random.Random(order_seed)
    out: list[pytest.Item] = []
    for tier_items in _runs(items, tier_of):
        modules = _runs(tier_items, lambda i: i.path)
        rng.shuffle(modules)
        for module in modules:
            if tier_of(module[0]) in SHUFFLE_WITHIN_MODULE:
                groups = _runs(module, _group)
                rng.shuffle(groups)
                module = [i for g in groups for i in g]
            out.extend(module)
    assert sorted(map(id, out)) == sorted(map(id, items)), "reordering lost or duplicated a test"
    items[:] = out


LAST_IN_TIER = "leaves_lab_node_dead"
"""The marker of tests that run after the rest of their tier (module docstring)."""


def last_in_tier(items: list[pytest.Item], tier_of: Callable[[pytest.Item], str]) -> None:
    """Move the :data:`LAST_IN_TIER` tests to the end of their tier's run, keeping every other order."""
    out: list[pytest.Item] = []
    for tier_items in _runs(items, tier_of):
        marked = [i for i in tier_items if i.get_closest_marker(LAST_IN_TIER) is not None]
        out.extend([i for i in tier_items if i.get_closest_marker(LAST_IN_TIER) is None] + marked)
    items[:] = out
