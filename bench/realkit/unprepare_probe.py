"""Run the plugin (``python -m sriov_dra.driver``) with the steps of its NodeUnprepare timed.

Bench-only launcher (bench/unprepare_upstream.py): ``python bench/realkit/unprepare_probe.py <plugin
arguments>``. Before the plugin's entrypoint runs, the methods the unprepare path calls (the claim
handler, its host steps, the status write's GET and PUT, the checkpoint write) are wrapped so each
call appends ``{"step": ..., "ms": ...}`` as one JSON line to the file named by
``SRIOV_DRA_BENCH_STEPS``. The wrappers cost microseconds and change nothing else; the plugin is
the product code as shipped.
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
_LOCK = threading.Lock()


def _record(path: str, step: str, ms: float) -> None:
    with _LOCK, open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"step": step, "ms": round(ms, 3)}) + "\n")


def _timed(path: str, step: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        started = time.perf_counter()
        try:
            return fn(*args, **kwargs)
        finally:
            _record(path, step, (time.perf_counter() - started) * 1000.0)

    return wrapper


def install(path: str) -> None:
    """Wrap the unprepare path's steps (see the module docstring) to record into ``path``."""
    from sriov_dra.driver import claim_metadata, prepare, unprepare
    from sriov_dra.host import cdi, checkpoint, vf_driver_binding
    from sriov_dra.kube import claims
    from sriov_dra.kubeletapi import dra_service

    targets: list[tuple[Any, str, str]] = [
        (dra_service.ClaimDispatcher, "unprepare", "dispatch (whole call)"),
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
    for owner, name, step in targets:
        setattr(owner, name, _timed(path, step, getattr(owner, name)))


if __name__ == "__main__":
    install(os.environ[STEPS_ENV])
    sys.argv = ["sriov_dra.driver", *sys.argv[1:]]
    runpy.run_module("sriov_dra.driver", run_name="__main__", alter_sys=True)
