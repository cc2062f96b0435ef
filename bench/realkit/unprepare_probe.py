"""Run the plugin (``python -m sriov_dra.driver``) with the steps of its NodeUnprepare timed.

Bench-only launcher (bench/unprepare_upstream.py): ``python bench/realkit/unprepare_probe.py <plugin
arguments>``. Before the plugin's entrypoint runs, the methods the unprepare path calls (the claim
handler, its host steps, the status write's GET and PUT, the checkpoint write) are wrapped so each
call's duration is kept in memory; :data:`FLUSH_DELAY_S` after a kubelet call returned, a thread
appends them as JSON lines ``{"step": ..., "ms": ...}`` to the file named by
``SRIOV_DRA_BENCH_STEPS`` (off the measured calls: a file write costs a TCG guest a few hundred
microseconds). The wrappers cost microseconds and change nothing else; the plugin is the product
code as shipped, except that with ``SRIOV_DRA_BENCH_NO_STATUS_CLEAR=1`` its unprepare skips the
claim status clear (the bench's what-if measurement of that step's share).
"""

from __future__ import annotations

import functools
import json
import os
import runpy
import sys
import threading
import time
from collections.abc import Callable
from typing import Any, Final

STEPS_ENV: Final = "SRIOV_DRA_BENCH_STEPS"
NO_STATUS_CLEAR_ENV: Final = "SRIOV_DRA_BENCH_NO_STATUS_CLEAR"
"""Set to ``1``: the unprepare skips its status clear (a what-if the bench measures, never the product)."""
FLUSH_DELAY_S: Final = 0.3
"""How long after a kubelet call the recorded steps are written (the guest half waits for them)."""
OUTER_STEP: Final = "dispatch (whole call)"
_PENDING: list[tuple[str, float]] = []
_LOCK = threading.Lock()
_CALL_DONE = threading.Event()


def _flusher(path: str) -> None:
    while True:
        _CALL_DONE.wait()
        time.sleep(FLUSH_DELAY_S)
        _CALL_DONE.clear()
        with _LOCK:
            pending = list(_PENDING)
            _PENDING.clear()
        with open(path, "a", encoding="utf-8") as out:
            out.writelines(json.dumps({"step": step, "ms": round(ms, 3)}) + "\n" for step, ms in pending)


def _timed(step: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            with _LOCK:
                _PENDING.append((step, (time.perf_counter() - started) * 1000.0))
            if step == OUTER_STEP:
                _CALL_DONE.set()

    return wrapper


def install(path: str) -> None:
    """Wrap the unprepare path's steps (see the module docstring) to record into ``path``."""
    from sriov_dra.driver import claim_metadata, prepare, unprepare
    from sriov_dra.host import cdi, checkpoint, vf_driver_binding
    from sriov_dra.kube import claims
    from sriov_dra.kubeletapi import dra_service

    targets: list[tuple[Any, str, str]] = [
        (dra_service.ClaimDispatcher, "unprepare", OUTER_STEP),
        (dra_service.ClaimDispatcher, "prepare", OUTER_STEP),
        (prepare.DraHandler, "unprepare_resources", "handler"),
        (unprepare, "unprepare_claim", "unprepare_claim"),
        (unprepare, "release_host", "  host release (steps 4)"),
        (vf_driver_binding.DriverBinder, "restore", "    driver restore"),
        (cdi.CdiSpecs, "remove_claim_spec", "    claim CDI spec removed"),
        (claim_metadata, "remove_claim_metadata", "    device metadata removed"),
        (cdi.CdiSpecs, "sync_pod_spec", "    Pod CDI spec rebuilt/removed"),
        (unprepare, "clear_status", "  status clear (step 5)"),
        (claims.ClaimClient, "get", "    claim GET"),
        (claims, "replace_status_devices", "    claim status PUT"),
        (checkpoint.CheckpointStore, "delete_claim", "  record deleted (step 9, durable)"),
        (checkpoint.CheckpointStore, "snapshot_claim", "  record read"),
        (checkpoint.CheckpointStore, "all_claims", "prepared-claims gauge read"),
    ]
    if os.environ.get(NO_STATUS_CLEAR_ENV) == "1":
        unprepare.clear_status = lambda ctx, record: None
    for owner, name, step in targets:
        setattr(owner, name, _timed(step, getattr(owner, name)))
    threading.Thread(target=_flusher, args=(path,), name="bench-steps", daemon=True).start()


if __name__ == "__main__":
    install(os.environ[STEPS_ENV])
    sys.argv = ["sriov_dra.driver", *sys.argv[1:]]
    runpy.run_module("sriov_dra.driver", run_name="__main__", alter_sys=True)
