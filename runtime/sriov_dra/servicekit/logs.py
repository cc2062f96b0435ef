"""One structured log schema for every service: constant messages with fields, as JSON or text.

Code logs a short constant phrase ("shadow created") and puts the variable parts in ``extra=``
under the shared field names: ``claim``, ``claim_uid``, ``pod``, ``pod_uid``, ``node``,
``device``, ``pci``, ``pf``, ``vf_id``, ``ifname``, ``netns``, ``nad``, ``phase``, ``op``,
``outcome``, ``duration_ms``, ``attempt`` (plus a service's own). Both formats carry the same
record (:class:`JsonFormatter`, :class:`TextFormatter`). Only entrypoints call :func:`configure`;
the kubernetes client and urllib3 loggers stay at WARNING or above.
"""

from __future__ import annotations

import datetime as dt
import enum
import json
import logging
import sys
from typing import Any, Final, TextIO

_STANDARD: Final = frozenset(
    vars(logging.LogRecord("x", logging.INFO, "x", 0, "x", None, None)).keys() | {"message", "asctime"}
)
NOISY_LIBRARIES: Final = ("kubernetes", "urllib3")
"""Loggers kept at WARNING or above whatever ``--log-level`` says."""


class LogFormat(enum.StrEnum):
    """``--log-format`` values."""

    JSON = "json"
    TEXT = "text"


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra`` fields of ``record``: every attribute that a plain LogRecord does not have."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


def timestamp(record: logging.LogRecord) -> str:
    """``record.created`` as RFC 3339 UTC with milliseconds (``2026-12-01T21:20:45.123Z``)."""
    stamp = dt.datetime.fromtimestamp(record.created, tz=dt.UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``{"ts", "level", "logger", "msg", <fields...>, "exc"}``.

    ``ts`` is :func:`timestamp` of the record's own creation time; ``level`` lowercase; ``exc``
    the formatted traceback, present only with an exception. Values that are not JSON are written
    with ``str()``; non-ASCII text stays UTF-8.
    """

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update(fields(record))
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str, ensure_ascii=False)


def _text_value(value: object) -> str:
    text = str(value)
    return json.dumps(text, ensure_ascii=False) if (not text or any(c.isspace() for c in text)) else text


class TextFormatter(logging.Formatter):
    """``<ts> <LEVEL> <logger>: <msg> key=value ...`` on one line (a traceback follows).

    Fields come in the order given; a value is JSON-quoted when it is empty or holds white space.
    """

    def format(self, record: logging.LogRecord) -> str:
        line = f"{timestamp(record)} {record.levelname} {record.name}: {record.getMessage()}"
        extras = " ".join(f"{k}={_text_value(v)}" for k, v in fields(record).items())
        if extras:
            line = f"{line} {extras}"
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


def parse_level(level: str) -> int:
    """The numeric level of ``debug``/``info``/``warning``/``error`` (any letter case).

    Raises: ValueError naming the accepted values for anything else.
    """
    numeric = (
        logging.getLevelName(level.upper())
        if level.lower() in {"debug", "info", "warning", "error"}
        else None
    )
    if not isinstance(numeric, int):
        raise ValueError(f"log level {level!r} is not one of debug, info, warning, error")
    return numeric


def configure(fmt: LogFormat | str, level: str = "info", *, stream: TextIO | None = None) -> logging.Handler:
    """Route every record to ``stream`` (stderr) in ``fmt`` at ``level`` and above; return the handler.

    Replaces any handler already on the root logger, and holds :data:`NOISY_LIBRARIES` at WARNING
    or above. Raises: ValueError for an unknown format or level.
    """
    chosen = LogFormat(fmt)
    numeric = parse_level(level)
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if chosen is LogFormat.JSON else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
    for name in NOISY_LIBRARIES:
        logging.getLogger(name).setLevel(max(numeric, logging.WARNING))
    return handler
