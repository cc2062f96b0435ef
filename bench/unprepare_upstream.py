"""Benchmark: NodeUnprepare of a one-VF claim, this plugin (manual mode) against upstream dra-driver-sriov.

Boots the realvf tier's QEMU guest once (tests/realvf/vm.py, the control plane on the host as the tier
starts it) and runs bench/realkit/guest_unprepare.py in it: on the same real igbvf VF and in the same
boot, each driver gets a fresh claim per round, prepared and then unprepared over its DRA socket as
the kubelet calls them. Prints both drivers' NodeUnprepare and NodePrepare medians, the ratio of this
plugin's unprepare to upstream's against :data:`GOAL` and this plugin's unprepare split by step (the
plugin's own methods, timed in its process by bench/realkit/unprepare_probe.py). Absolute times are
the guest's (TCG is many times slower than a node); only the ratio is the target.

Needs ``make setup`` (control plane binaries, upstream's driver) and ``make realvf-setup`` (QEMU, the
guest kernel); without them it prints why and exits 0. Takes a few minutes under TCG; run it under
``flock /tmp/sriov-dra-heavy.lock`` on a shared machine. ``.venv/bin/python bench/unprepare_upstream.py``
"""

from __future__ import annotations

import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.realvf import conftest as realvf_conftest
from tests.realvf import kubeapi, vm

from sriov_dra_lab import binaries, processes

GOAL: Final = 1.0
"""This plugin's NodeUnprepare median at most upstream's, on the same VF in the same boot."""
GUEST_MODULE: Final = "bench/realkit/guest_unprepare.py"
MARK: Final = "UNPREPARE-BENCH "


def guest_run(workdir: Path) -> tuple[dict[str, Any], str]:
    """Boot the guest, run the guest half, return its results and the accelerator's description."""
    parts = vm.locate()
    accel = vm.choose_accelerator(parts, workdir)
    host_api = kubeapi.start(workdir)
    try:
        run = vm.run_guest(
            parts,
            accel,
            workdir,
            pytest_args=[
                GUEST_MODULE,
                "-p",
                "tests.realvf.guest.conftest",
                *realvf_conftest.GUEST_PYTEST_ARGS[1:],
            ],
            kubeconfig=host_api.kubeconfig,
            api_host=kubeapi.API_HOST,
        )
    finally:
        host_api.stop()
    text = run.console.read_text(errors="replace")
    lines = [line for line in text.splitlines() if line.startswith(MARK)]
    if run.pytest_exit != 0 or not lines:
        raise SystemExit(
            f"the guest half failed (pytest exit {run.pytest_exit}); serial log {run.console}:\n"
            + processes.tail(run.console, 80)
        )
    return json.loads(lines[-1][len(MARK) :]), f"{accel.name}, guest kernel {parts.kernel_abi}"


def median(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


def report(result: dict[str, Any], accel: str) -> None:
    ours, theirs = result["ours_unprepare_ms"], result["upstream_unprepare_ms"]
    ratio = median(ours) / median(theirs)
    print(
        f"NodeUnprepare of a one-VF claim ({result['device']}), same VF and guest boot ({accel}), "
        f"{result['rounds']} rounds each, over each driver's DRA socket:"
    )
    for who, label in (
        ("upstream", "upstream dra-driver-sriov (MULTUS)"),
        ("ours", "this plugin (manual mode)"),
    ):
        un, pre, absent = (result[f"{who}_{op}_ms"] for op in ("unprepare", "prepare", "unprepare_absent"))
        print(
            f"  {label:36} unprepare median {median(un):6.1f} ms (min {min(un):5.1f}, max {max(un):5.1f}); "
            f"of a claim never prepared (the call's floor) {median(absent):5.1f} ms; "
            f"prepare {median(pre):6.1f} ms"
        )
    verdict = "PASS" if ratio <= GOAL else "MISS"
    print(f"  ratio this plugin / upstream: {ratio:.2f} (goal <= {GOAL:.2f}): {verdict}")
    what_if = result.get("without_status_clear")
    if what_if:
        bare, theirs_then = median(what_if["ours_unprepare_ms"]), median(what_if["upstream_unprepare_ms"])
        print(
            f"  what-if, same boot, {what_if['rounds']} rounds (bench-only: this plugin with its status clear "
            f"skipped, which docs/design.md#release requires before the record goes): {bare:.1f} ms against "
            f"upstream's {theirs_then:.1f} ms, ratio {bare / theirs_then:.2f}"
        )
    steps: list[dict[str, float]] = result["ours_steps_ms"]
    names = list(dict.fromkeys(name for call in steps for name in call))
    print(
        "  this plugin's unprepare by step, median ms per call (inner steps indented; steps 4 and 5 run "
        "side by side on one guest CPU, so their times overlap and include waits for each other):"
    )
    for name in names:
        print(f"    {name:44} {median([call.get(name, 0.0) for call in steps]):7.2f}")


def main() -> int:
    try:
        vm.locate()
    except vm.Unavailable as exc:
        print(f"skipped: the realvf guest is not available ({exc})")
        return 0
    workdir = Path(tempfile.mkdtemp(prefix="bench-unprepare-"))
    started = time.monotonic()
    try:
        result, accel = guest_run(workdir)
    except binaries.BinaryMissing as exc:
        print(f"skipped: {exc}")
        return 0
    report(result, accel)
    print(f"  (guest session {time.monotonic() - started:.0f} s; logs in {workdir})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
