"""The shuffled test order keeps what fixtures rely on and replays from its seed (tests/ordering.py)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tests import ordering


@dataclass
class FakeItem:
    """Only the attributes tests/ordering.py reads of a pytest.Item (a labelled test double)."""

    path: Path
    name: str
    originalname: str
    cls: type | None = None
    markers: tuple[str, ...] = ()

    def get_closest_marker(self, name: str) -> str | None:
        return name if name in self.markers else None


def items() -> list[FakeItem]:
    out = []
    for tier in ("cluster", "pure"):
        for module in ("a", "b", "c", "d"):
            for fn in ("f", "g", "h"):
                for case in ("1", "2"):
                    out.append(FakeItem(Path(f"tests/{tier}/test_{module}.py"), f"{fn}[{case}]", fn))
    return out


def tier_of(item: FakeItem) -> str:
    return item.path.parts[1]


def order(seed: int) -> list[tuple[str, str]]:
    got = items()
    ordering.shuffle(got, tier_of, seed)  # type: ignore[arg-type]
    return [(str(i.path), i.name) for i in got]


def test_shuffled_order_is_a_permutation_replayed_by_its_seed() -> None:
    assert sorted(order(7)) == sorted((str(i.path), i.name) for i in items())
    assert order(7) == order(7)
    assert any(order(s) != order(7) for s in range(8, 20))


def test_shuffled_order_keeps_tiers_modules_and_parametrized_cases_together() -> None:
    for seed in range(20):
        got = order(seed)
        tiers = [p.split("/")[1] for p, _ in got]
        assert tiers == sorted(tiers, key=["cluster", "pure"].index), "tiers keep their order"
        modules = [p for p, _ in got]
        assert len({m for m in modules}) == len(
            [m for i, m in enumerate(modules) if i == 0 or modules[i - 1] != m]
        )
        names = [(p, n.split("[")[0]) for p, n in got]
        runs = [k for i, k in enumerate(names) if i == 0 or names[i - 1] != k]
        assert len(runs) == len(set(runs)), "a function's parameter cases stay together"


def test_slow_tiers_keep_their_in_module_order() -> None:
    for seed in range(20):
        cluster = [(p, n) for p, n in order(seed) if "/cluster/" in p]
        for module in {p for p, _ in cluster}:
            names = [n for p, n in cluster if p == module]
            assert names == [f"{fn}[{c}]" for fn in "fgh" for c in "12"]


def test_a_test_that_leaves_a_lab_node_dead_runs_after_the_rest_of_its_tier_in_either_order() -> None:
    for seed in (None, *range(10)):
        got = items()
        got.insert(
            3, FakeItem(Path("tests/cluster/test_a.py"), "kill", "kill", markers=(ordering.LAST_IN_TIER,))
        )
        if seed is not None:
            ordering.shuffle(got, tier_of, seed)  # type: ignore[arg-type]
        ordering.last_in_tier(got, tier_of)  # type: ignore[arg-type]
        names = [(tier_of(i), i.name) for i in got]
        assert names.index(("cluster", "kill")) == len([n for n in names if n[0] == "cluster"]) - 1
        assert [n for n in names if n[0] == "pure"] == names[-24:]
