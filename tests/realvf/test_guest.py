"""Host side of the realvf tier: each guest test's result, as one host test per guest test function.

The parameters are read from the guest folder's source (``vm.guest_test_ids``); the results come
from the junit XML of the one guest session of this pytest run (conftest ``realvf_results``).
"""

from __future__ import annotations

import pytest
from tests import tiers
from tests.realvf import vm

GUEST_TESTS = vm.guest_test_ids()


# The first test's setup holds the whole guest session (vm.RUN_WALL_S bounds it).
@pytest.mark.timeout(1800)
@pytest.mark.parametrize("guest_test", GUEST_TESTS, ids=GUEST_TESTS)
def test_guest_test_passed_on_real_vfs(guest_test: str, realvf_results: dict[str, vm.GuestResult]) -> None:
    result = realvf_results.get(guest_test)
    if result is None:
        pytest.fail(
            f"the guest's pytest reported no result for {guest_test}; it reported {sorted(realvf_results)}",
            pytrace=False,
        )
    if result.outcome == "skipped":
        tiers.unavailable("realvf", f"{guest_test} skipped in the guest: {result.message}")
    if result.outcome != "passed":
        pytest.fail(f"{guest_test} failed in the guest:\n{result.message}", pytrace=False)


@pytest.mark.timeout(1800)
def test_guest_ran_only_tests_the_host_reports(realvf_results: dict[str, vm.GuestResult]) -> None:
    unknown = sorted(set(realvf_results) - set(GUEST_TESTS))
    assert not unknown, (
        f"the guest reported results no host test stands for (a class-based or generated test?): "
        f"{ {k: realvf_results[k].message[:300] for k in unknown} }"
    )


def test_guest_folder_has_tests() -> None:
    assert GUEST_TESTS, f"no test_* functions found in {vm.GUEST_TESTS}"
