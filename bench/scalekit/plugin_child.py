"""The plugin process of ``bench/scale.py``: the real ``driver.main.Plugin``, measured from inside.

Run as ``python -m bench.scalekit.plugin_child <plugin flags...>`` (the same flags as
``python -m sriov_dra.driver``). It starts the product's ``Plugin`` exactly as the entrypoint
does (checkpoint, publisher with discovery, auto-attach wiring, repair worker with its first
pass and Pod watch, the DRA and registration sockets, the metrics server), with two bench-only
differences, both outside the product:

- the plugin's API client is wrapped so that every HTTP request it sends is counted (method,
  resource, watch or not); a window of counts is taken around each measured step;
- the repair worker's period and orphan interval are a day, so the passes measured here are the
  only ones (the production worker runs the same ``run_once``/``scan_orphans`` every 30 s/300 s).

``SRIOV_DRA_BENCH_TRACEMALLOC=<frames>`` (read here, not by the product) starts ``tracemalloc``
before anything of the product is imported, so ``tracemalloc`` answers say where the plugin's
memory goes; RSS figures are then inflated by tracemalloc's own bookkeeping (reported with them).

Protocol: one JSON object per line. The child writes ``{"ready": ...}`` once the plugin serves
its sockets, then answers each command read from stdin (``status``, ``repair``, ``orphans``,
``tracemalloc``, ``tracemalloc-stop``, ``stop``) with one line. Product logs go to stderr.
"""

from __future__ import annotations

import os
import tracemalloc

_FRAMES = os.environ.get("SRIOV_DRA_BENCH_TRACEMALLOC", "")
if _FRAMES:
    tracemalloc.start(int(_FRAMES))

import collections  # noqa: E402 - tracemalloc must start before the product is imported
import json  # noqa: E402
import re  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from sriov_dra.driver import main as driver_main  # noqa: E402
from sriov_dra.driver import managed_wiring, settings  # noqa: E402
from sriov_dra.driver.managed import repair  # noqa: E402
from sriov_dra.servicekit import logs  # noqa: E402
from sriov_dra_lab import launch_plugin  # noqa: E402

WRITE_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
_VERSIONED = re.compile(r"^/(?:api/v1|apis/[^/]+/[^/]+)(/.*)?$")


def classify(method: str, url: str, query: Any) -> str:
    """``"<verb> <resource>[/<subresource>]"`` of one request (``list``, ``watch``, ``get``, ``create`` ...)."""
    path = url.split("://", 1)[-1]
    path = "/" + path.split("/", 1)[1] if "/" in path else "/"
    path = path.split("?", 1)[0]
    watching = "watch=true" in url.lower() or any(
        isinstance(q, (tuple, list)) and len(q) == 2 and q[0] == "watch" and str(q[1]).lower() == "true"
        for q in (query or [])
    )
    match = _VERSIONED.match(path)
    parts = [p for p in (match.group(1) or "").split("/") if p] if match else [path]
    if len(parts) >= 2 and parts[0] == "namespaces" and len(parts) > 2:
        parts = parts[2:]
    resource = parts[0] if parts else path
    named = len(parts) > 1
    sub = f"/{parts[2]}" if len(parts) > 2 else ""
    verb = {
        "GET": "get" if named else ("watch" if watching else "list"),
        "POST": "create",
        "PUT": "update",
        "PATCH": "patch",
        "DELETE": "delete",
    }.get(method.upper(), method.lower())
    return f"{verb} {resource}{sub}"


class RequestCounter:
    """Counts every request of the wrapped client by :func:`classify` label (thread-safe)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.counts: collections.Counter[str] = collections.Counter()
        self.writes = 0

    def install(self, api: Any) -> None:
        """Wrap ``api.rest_client.request`` (every call of the official client goes through it)."""
        rest = api.rest_client
        inner = rest.request

        def request(method: str, url: str, query_params: Any = None, *args: Any, **kwargs: Any) -> Any:
            label = classify(method, url, query_params)
            with self.lock:
                self.counts[label] += 1
                self.writes += method.upper() in WRITE_METHODS
            return inner(method, url, query_params, *args, **kwargs)

        rest.request = request

    def window(self) -> tuple[collections.Counter[str], int]:
        with self.lock:
            return collections.Counter(self.counts), self.writes


COUNTER = RequestCounter()


class BenchPlugin(driver_main.Plugin):
    """The product's Plugin with a counted API client and a repair worker that waits a day."""

    def _api_client(self) -> Any:
        api = super()._api_client()
        COUNTER.install(api)
        return api

    def _start_repair(self, attach: Any, context: Any) -> repair.RepairWorker:
        return managed_wiring.start_worker(
            attach,
            context,
            settings=repair.RepairSettings(interval_s=86400.0, orphan_interval_s=86400.0),
            first_pass_timeout_s=self.settings.repair_first_pass_timeout_s,
            stop=self.stop_event,
            watch_api=self._api,
        )


def memory() -> dict[str, float]:
    """VmRSS and VmHWM (peak RSS since start or the last :func:`reset_peak`) in MiB."""
    out = {}
    for line in Path("/proc/self/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM"):
            out[key] = int(value.split()[0]) / 1024
    if tracemalloc.is_tracing():
        out["tracemalloc_overhead"] = tracemalloc.get_tracemalloc_memory() / 2**20
    return out


def reset_peak() -> None:
    """Reset VmHWM to the current RSS (Linux ``clear_refs`` value 5)."""
    Path("/proc/self/clear_refs").write_text("5")


def measured(fn: Any) -> dict[str, Any]:
    """Run ``fn``; the requests it sent, its wall time, the peak RSS while it ran."""
    before, writes_before = COUNTER.window()
    reset_peak()
    start = time.perf_counter()
    result = fn()
    elapsed = time.perf_counter() - start
    after, writes_after = COUNTER.window()
    delta = {k: v - before.get(k, 0) for k, v in after.items() if v - before.get(k, 0)}
    return {
        "seconds": elapsed,
        "requests": delta,
        "writes": writes_after - writes_before,
        "memory": memory(),
        **result,
    }


def handle(plugin: BenchPlugin, command: str, top: int) -> dict[str, Any]:
    """Answer one command (see the module docstring)."""
    worker = plugin.repair
    assert worker is not None and plugin.store is not None
    if command == "status":
        return {
            "memory": memory(),
            "claims": len(plugin.store.all_claims()),
            "requests": dict(COUNTER.window()[0]),
        }
    if command == "repair":

        def one_pass() -> dict[str, Any]:
            report = worker.run_once()
            return {
                "ensured": len(report.ensured_pods),
                "stopped": report.stopped,
                "failed": report.failed,
                "deferred": len(report.deferred),
                "claims": len(plugin.store.all_claims()) if plugin.store else 0,
            }

        return measured(one_pass)
    if command == "orphans":

        def scan() -> dict[str, Any]:
            found = worker.scan_orphans()
            return {"shadows": len(found), "by_status": collections.Counter(r.status.value for r in found)}

        return measured(scan)
    if command == "tracemalloc":
        if not tracemalloc.is_tracing():
            return {"error": "tracemalloc is off (set SRIOV_DRA_BENCH_TRACEMALLOC)"}
        snap = tracemalloc.take_snapshot().filter_traces([tracemalloc.Filter(False, tracemalloc.__file__)])
        lines = [
            {"where": str(s.traceback[0]), "mib": s.size / 2**20, "blocks": s.count}
            for s in snap.statistics("lineno")[:top]
        ]
        files = [
            {"where": str(s.traceback[0].filename), "mib": s.size / 2**20}
            for s in snap.statistics("filename")[:top]
        ]
        current, peak = tracemalloc.get_traced_memory()
        return {
            "top_lines": lines,
            "top_files": files,
            "traced_mib": current / 2**20,
            "traced_peak_mib": peak / 2**20,
            "memory": memory(),
        }
    if command == "tracemalloc-stop":
        tracemalloc.stop()
        return {"memory": memory()}
    return {"error": f"unknown command {command!r}"}


def main() -> int:
    """Start the plugin, answer commands until ``stop`` or end of input, stop the plugin."""
    config = settings.parse(sys.argv[1:], dict(os.environ))
    logs.configure(config.log_format, config.log_level)
    plugin = BenchPlugin(config, seams=launch_plugin.seams())  # the fake tree's kernel and eswitch
    started = time.perf_counter()
    try:
        plugin.start()
    except driver_main.StartupError as exc:
        print(json.dumps({"ready": False, "error": str(exc)}), flush=True)
        plugin.stop()
        return 1
    print(
        json.dumps({"ready": True, "start_s": time.perf_counter() - started, "memory": memory()}), flush=True
    )
    try:
        for line in sys.stdin:
            request = json.loads(line)
            if request["cmd"] == "stop":
                break
            print(json.dumps(handle(plugin, request["cmd"], int(request.get("top", 10)))), flush=True)
    finally:
        plugin.stop()
    print(json.dumps({"stopped": True}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
