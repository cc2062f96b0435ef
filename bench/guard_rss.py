"""Benchmark: the guard daemon's RSS (goal <= 80 MiB) and what its imports cost.

Starts a real control plane and ``sriov-dra-guard serve`` through its entrypoint, waits until it
is ready and idle, and reads its ``VmRSS``/``VmHWM`` (the same measurement as ``bench/scale.py``'s
"guard daemon RSS at idle", without the shadows). Then a fresh interpreter per import shows where
the memory is: a bare interpreter, the ``kubernetes`` client alone, and the guard's modules. The
daemon runs with the product image's Python environment (``PYTHONOPTIMIZE=2``, bytecode compiled
at that level as the image's build does), and once more without it, so the docstrings' share shows.

Run as a script: ``.venv/bin/python bench/guard_rss.py [idle seconds]`` (default 2).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Final

from sriov_dra_lab import binaries, control_plane, guard, image_env

GOAL_GUARD_RSS_MIB: Final = 80.0
ROOT: Final = Path(__file__).resolve().parents[1]
IMPORTS: Final = (
    ("a bare interpreter", "pass"),
    ("kubernetes.client", "import kubernetes.client"),
    ("the guard's modules", "import sriov_dra.guard.main"),
)
PROBE: Final = (
    "import sys; exec(sys.argv[1]); "
    "print(open('/proc/self/status').read().split('VmRSS:')[1].split()[0], 'kubernetes' in sys.modules)"
)


def idle_rss(
    cp: control_plane.ControlPlane, work: Path, idle_s: float, env: dict[str, str]
) -> dict[str, float]:
    """Start ``sriov-dra-guard serve`` with ``env`` added, wait ``idle_s`` once ready, read its memory."""
    run = work / f"guard-{len(list(work.iterdir()))}"
    run.mkdir(mode=0o700)
    daemon = guard.GuardDaemon(run / "guard.sock", cp.kubeconfig, run / "guard.log", env=env)
    daemon.start()
    try:
        time.sleep(idle_s)
        assert daemon.process is not None and daemon.process.pid is not None
        return status_mib(daemon.process.pid)
    finally:
        daemon.stop()


def status_mib(pid: int) -> dict[str, float]:
    """``VmRSS``/``VmHWM`` of process ``pid`` in MiB."""
    out = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    return out


def import_costs() -> list[tuple[str, float, bool]]:
    """``(what, RSS MiB, kubernetes loaded)`` of a fresh interpreter after each of :data:`IMPORTS`."""
    out = []
    for what, statement in IMPORTS:
        done = subprocess.run(
            [sys.executable, "-c", PROBE, statement], capture_output=True, text=True, check=True, cwd=ROOT
        )
        rss, loaded = done.stdout.split()[-2:]
        out.append((what, int(rss) / 1024, loaded == "True"))
    return out


def main() -> None:
    """Print the guard daemon's idle RSS against its goal (as the image runs it, then without its
    Python environment), then the import costs."""
    idle_s = float(sys.argv[1]) if len(sys.argv) > 1 else 2.0
    env = image_env.python_env()
    image_env.compile_like_the_image(env)
    with tempfile.TemporaryDirectory(prefix="sriov-dra-bench-guard-") as tmp:
        work = Path(tmp)
        try:
            with control_plane.running() as cp:
                shipped = idle_rss(cp, work, idle_s, env)
                plain = idle_rss(cp, work, idle_s, {})
        except binaries.BinaryMissing as exc:
            print(f"not measured: the control plane binaries are missing ({exc})")
            return
    verdict = "ok" if shipped["VmRSS"] <= GOAL_GUARD_RSS_MIB else "OVER"
    shown = " ".join(f"{k}={v}" for k, v in sorted(env.items())) or "none"
    print(
        f"guard daemon RSS at idle as the image runs it ({shown}): {shipped['VmRSS']:.1f} MiB "
        f"(peak {shipped['VmHWM']:.1f} MiB), goal <= {GOAL_GUARD_RSS_MIB:.0f} MiB: {verdict}"
    )
    print(
        f"  without the image's Python environment: {plain['VmRSS']:.1f} MiB (peak {plain['VmHWM']:.1f} MiB); "
        f"ratio {shipped['VmRSS'] / plain['VmRSS']:.2f}"
    )
    for what, rss, loaded in import_costs():
        print(f"  fresh interpreter after {what}: {rss:.1f} MiB (kubernetes package loaded: {loaded})")


if __name__ == "__main__":
    main()
