"""realvf tier: real kernel SR-IOV VFs of emulated igb NICs in a QEMU guest (tests/realvf/vm.py).

On the host, ``guest/`` is not collected: ``test_guest.py`` holds one host test per guest test
function, and the session fixture :func:`realvf_results` boots one guest for the whole session,
runs pytest on ``tests/realvf/guest`` inside it and hands back each guest test's result. Inside
the guest (``SRIOV_DRA_REALVF_GUEST=1``) only ``guest/`` runs. The terminal summary names the guest
kernel, the QEMU version, the accelerator (KVM only where ``/dev/kvm`` can boot the guest, TCG
otherwise), the pinned sriov-cni release the guest runs and the measured boot and session times.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tests import tiers
from tests.realvf import kubeapi

IN_GUEST = os.environ.get("SRIOV_DRA_REALVF_GUEST") == "1"
collect_ignore = ["test_guest.py"] if IN_GUEST else ["guest"]

GUEST_PYTEST_ARGS = (
    "tests/realvf/guest",
    "-p",
    "no:cacheprovider",
    "-p",
    "pytest_timeout",
    "-o",
    "timeout=480",
    "--color=no",
    "-rA",
    "-q",
    "--durations=8",
)
"""pytest inside the guest: plugin autoload is off (PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 costs 50 s of
collection under TCG otherwise), so the timeout plugin the project's ini options need is named."""

_SUMMARY: list[str] = []


def selected_guest_tests(items: list[pytest.Item]) -> list[str]:
    """The guest's pytest arguments for the guest tests this run selected: the whole folder when all
    are (or none of test_guest.py's per-test reports is), else their node IDs, in folder order."""
    from tests.realvf import vm

    chosen = set()
    for item in items:
        callspec = getattr(item, "callspec", None)
        if callspec is not None and "guest_test" in callspec.params:
            chosen.add(callspec.params["guest_test"])
    every = vm.guest_test_ids()
    if not chosen or chosen >= set(every):
        return [GUEST_PYTEST_ARGS[0]]
    return [f"{GUEST_PYTEST_ARGS[0]}/{test}" for test in every if test in chosen]


@pytest.fixture(scope="session")
def realvf_results(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> object:
    """``{<file>::<function>: vm.GuestResult}`` of one guest session (booted once per pytest run).

    The guest runs the guest tests whose host tests this run selected (``-k``, node IDs), all of
    them when nothing narrowed the selection.

    Skips (fails when required) only when a part that ``make setup`` or ``make realvf-setup``
    provides is missing; a boot that fails twice, a hung or crashed guest pytest fail every realvf
    test with the serial log tail.
    """
    from tests.realvf import vm

    from sriov_dra_lab import processes

    try:
        parts = vm.locate()
    except vm.Unavailable as exc:
        tiers.unavailable("realvf", str(exc))
    workdir = tmp_path_factory.mktemp("realvf")
    accel = vm.choose_accelerator(parts, workdir)
    host_api = _start_host_api(workdir)
    header = (
        f"realvf: guest kernel {parts.kernel_abi}, {parts.qemu_version}, "
        f"accelerator {accel.name} ({accel.reason}); {vm.pinned_binaries_note()}"
    )
    _SUMMARY.append(header)
    print(header)
    try:
        run = vm.run_guest(
            parts,
            accel,
            workdir,
            pytest_args=[*selected_guest_tests(request.session.items), *GUEST_PYTEST_ARGS[1:]],
            kubeconfig=host_api.kubeconfig if host_api is not None else None,
            api_host=kubeapi.API_HOST,
            kubelet=host_api.kubelet if host_api is not None else None,
        )
    except processes.ProcessFailed as exc:
        _SUMMARY.append(f"realvf: guest session failed; logs in {workdir}")
        pytest.fail(f"realvf guest session failed: {exc}", pytrace=False)
    finally:
        if host_api is not None:
            host_api.stop()
    timing = (
        f"realvf: boot to the guest's pytest {run.boot_s:.1f}s ({run.boots} boot(s)), whole guest "
        f"session {run.total_s:.1f}s (QEMU CPU {run.qemu_cpu_s:.1f}s), guest pytest exit "
        f"{run.pytest_exit}; serial log {run.console}"
    )
    _SUMMARY.extend([*run.notes, timing])
    print(timing)
    if run.pytest_exit not in (0, 1):
        pytest.fail(
            f"pytest in the guest exited {run.pytest_exit} (not a test failure: usage, collection or "
            f"internal error); serial log tail:\n{processes.tail(run.console, 60)}",
            pytrace=False,
        )
    return vm.parse_junit(run.junit)


def _start_host_api(workdir: Path) -> kubeapi.HostApi | None:
    """The session's control plane for the guest (``kubeapi.start``), or None when it cannot start.

    Without it the guest gets no kubeconfig and its API tests skip, naming the reason (which fails
    them where ``SRIOV_DRA_REQUIRE_TIERS`` requires the tier).
    """
    import time

    from sriov_dra_lab import binaries, processes

    started = time.monotonic()
    try:
        host_api = kubeapi.start(workdir)
    except (binaries.BinaryMissing, processes.ProcessFailed, TimeoutError, OSError) as exc:
        _SUMMARY.append(f"realvf: no control plane for the guest ({exc}); its API tests skip")
        return None
    _SUMMARY.append(
        f"realvf: control plane on the host for the guest ({host_api.control_plane.server}, "
        f"reached as https://{kubeapi.API_HOST}:* from the guest) started in {time.monotonic() - started:.1f}s"
    )
    return host_api


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the guest kernel, QEMU version, accelerator and timings of the realvf session."""
    if _SUMMARY:
        terminalreporter.section("realvf")
        for line in _SUMMARY:
            terminalreporter.write_line(line)
