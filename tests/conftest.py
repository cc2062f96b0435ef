"""Root test configuration: tier markers by folder, hypothesis profiles, leak checks.

Every test is marked with the tier of the folder it lives in, named for the real part it needs
(CONTRIBUTING.md lists them), so ``pytest -m pure`` selects the tests that need nothing but Python.
Warnings are errors (pyproject). A test that leaves a non-daemon thread running fails.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from tests import ordering

DEV_EXAMPLES = 20

# Property tests: CI (.ci/run sets HYPOTHESIS_PROFILE=ci) runs 500 examples per property; anywhere
# else the light "dev" profile is the default, so that `make check` stays a quick inner loop.
settings.register_profile("ci", max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=DEV_EXAMPLES, deadline=None)
HYPOTHESIS_PROFILE = os.environ.get("HYPOTHESIS_PROFILE", "dev")
settings.load_profile(HYPOTHESIS_PROFILE)

TIERS = ("pure", "host", "cluster", "cni", "e2e", "ansible", "realvf")
TESTS_ROOT = Path(__file__).parent


def _tier_of(item: pytest.Item) -> str:
    """The tier named by the item's first folder under ``tests/`` ("" outside a tier folder)."""
    try:
        rel = Path(str(item.fspath)).relative_to(TESTS_ROOT)
    except ValueError:
        return ""
    tier = rel.parts[0] if rel.parts else ""
    return tier if tier in TIERS else ""


def pytest_report_header(config: pytest.Config) -> list[str]:
    examples = f"hypothesis profile {HYPOTHESIS_PROFILE!r}: {settings().max_examples} examples per property"
    order_seed = ordering.seed()
    if order_seed is None:
        return [examples, "test order: file order (SRIOV_DRA_TEST_ORDER=file)"]
    return [
        examples,
        f"test order: shuffled, replay with SRIOV_DRA_TEST_ORDER_SEED={order_seed} (tests/ordering.py)",
    ]


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark each test with the tier named by its first folder under ``tests/``; order them (``tests/ordering.py``)."""
    for item in items:
        tier = _tier_of(item)
        if tier:
            item.add_marker(getattr(pytest.mark, tier))
    order_seed = ordering.seed()
    if order_seed is not None:
        ordering.shuffle(items, _tier_of, order_seed)
    ordering.last_in_tier(items, _tier_of)


@pytest.fixture(autouse=True)
def _no_leaked_threads() -> Iterator[None]:
    """Fail a test that leaves a non-daemon thread alive."""
    before = set(threading.enumerate())
    yield
    leaked = [t for t in threading.enumerate() if t not in before and t.is_alive() and not t.daemon]
    if leaked:
        for t in leaked:
            t.join(timeout=2.0)
        still = [t.name for t in leaked if t.is_alive()]
        if still:
            pytest.fail(f"test leaked non-daemon threads: {still}")


# --------------------------------------------------------------------------- cluster tier
@pytest.fixture(scope="session")
def control_plane() -> Iterator[object]:
    """A real control plane for the whole session (etcd, apiserver, controller-manager, scheduler).

    Skips with the reason when the pinned binaries are not built or a component cannot start
    (fails instead when ``SRIOV_DRA_REQUIRE_TIERS`` requires the cluster tier).
    """
    from sriov_dra_lab import binaries, control_plane, processes
    from tests import tiers

    settings = control_plane.ControlPlaneSettings(audit=True)
    cp = control_plane.ControlPlane(settings)
    try:
        cp.start()
    except binaries.BinaryMissing as exc:
        tiers.unavailable("cluster", str(exc))
    except (processes.ProcessFailed, TimeoutError, OSError) as exc:
        tiers.unavailable("cluster", f"control plane did not start: {exc}")
    try:
        yield cp
    finally:
        cp.stop()


@pytest.fixture(scope="session")
def api(control_plane: object) -> Iterator[object]:
    """An admin ApiClient for the session control plane."""
    from sriov_dra_lab.control_plane import ControlPlane

    assert isinstance(control_plane, ControlPlane)
    client = control_plane.api()
    try:
        yield client
    finally:
        client.close()


@pytest.fixture
def namespace(api: object, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace per test (name derived from the test), deleted afterwards.

    Waits for the ``default`` ServiceAccount so Pods can be admitted.
    """
    import re
    import uuid

    from kubernetes import client as k8s

    core = k8s.CoreV1Api(api)
    base = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-")
    name = f"{base}-{uuid.uuid4().hex[:6]}"
    core.create_namespace(k8s.V1Namespace(metadata=k8s.V1ObjectMeta(name=name)))
    waiter = threading.Event()
    for _ in range(300):
        if any(sa.metadata.name == "default" for sa in core.list_namespaced_service_account(name).items):
            break
        waiter.wait(0.1)
    else:
        pytest.fail(f"ServiceAccount default/{name} never appeared (is the controller-manager running?)")
    try:
        yield name
    finally:
        core.delete_namespace(name, propagation_policy="Background")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Fail the run if any process started by the tests (in any process group) survived them."""
    from sriov_dra_lab import processes

    left = processes.survivors()
    if left:
        print("\nprocesses started by the tests are still running:\n  " + "\n  ".join(left))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
