"""One guarded way to start a background thread.

Every service thread starts through :func:`start`, as a daemon (each owner stops its own loop
with an Event). If its target raises, the exception is logged once (``worker crashed``) and, for
an essential worker, recorded in the service's :class:`~.health.Health`, so ``/healthz`` turns
503 and the container restarts instead of running on with dead work; then ``on_crash`` runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from sriov_dra.servicekit import probes

LOG = logging.getLogger("sriov_dra.servicekit.threads")


def start(
    name: str,
    target: Callable[..., Any],
    *args: Any,
    health: probes.Health | None = None,
    on_crash: Callable[[BaseException], None] | None = None,
    log: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None,
) -> threading.Thread:
    """Start ``target(*args)`` on a daemon thread named ``name`` and return the started thread.

    A raised exception is logged with ``log`` (default: this module's logger), recorded as a crash
    of worker ``name`` in ``health`` when given (the worker is then essential), and handed to
    ``on_crash``. A normal return is silent. An exception from ``on_crash`` is logged, not raised.
    """
    logger = log or LOG

    def guarded() -> None:
        try:
            target(*args)
        except BaseException as exc:
            logger.error("worker crashed", exc_info=True, extra={"worker": name, "op": "thread"})
            if health is not None:
                health.worker_crashed(name, exc)
            if on_crash is not None:
                try:
                    on_crash(exc)
                except Exception:
                    logger.exception("worker crash handler failed", extra={"worker": name, "op": "thread"})

    thread = threading.Thread(target=guarded, name=name, daemon=True)
    thread.start()
    return thread
