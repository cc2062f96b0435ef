"""Structured logs: constant messages with fields, as text (``key=value``) or one JSON object per line.

Fields come from ``extra=`` (or a ``LoggerAdapter``) and keep the project's names (``op``,
``outcome``, ``duration_ms``, ``nad``, ...) plus the operator's ``network``, ``policy``,
``object``, ``watch``, ``controller``. Exceptions are rendered in a ``error``/``traceback`` field.

It must never log a response body longer than the API layer already truncated (256 characters).
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import sys
from typing import Any, TextIO

from sriov_dra.operator import settings

_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime", "taskName"}


def fields(record: logging.LogRecord) -> dict[str, Any]:
    """The ``extra`` fields of ``record`` (everything that is not a standard LogRecord attribute)."""
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


def _time(record: logging.LogRecord) -> str:
    return dt.datetime.fromtimestamp(record.created, dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")[:-4] + "Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: ``ts``, ``level``, ``logger``, ``msg`` and the fields."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": _time(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update(fields(record))
        if record.exc_info:
            doc["traceback"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str, ensure_ascii=False, separators=(",", ":"))


class TextFormatter(logging.Formatter):
    """``<ts> <LEVEL> <logger>: <msg> key=value ...`` with values quoted when they contain spaces."""

    def format(self, record: logging.LogRecord) -> str:
        parts = [f"{_time(record)} {record.levelname:<7} {record.name}: {record.getMessage()}"]
        for key, value in sorted(fields(record).items()):
            text = str(value)
            parts.append(f"{key}={json.dumps(text) if (' ' in text or not text) else text}")
        line = " ".join(parts)
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        return line


def configure(fmt: settings.LogFormat, level: str, *, stream: TextIO | None = None) -> logging.Handler:
    """Route the root logger to ``stream`` (stderr) in ``fmt``; returns the installed handler."""
    handler = logging.StreamHandler(stream or sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt is settings.LogFormat.JSON else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.getLogger("kubernetes").setLevel(max(root.level, logging.WARNING))
    logging.getLogger("urllib3").setLevel(max(root.level, logging.WARNING))
    return handler
