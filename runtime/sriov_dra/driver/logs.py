"""Structured logs for the plugin process: one JSON object (or one key=value line) per record.

Owns the root logger setup of ``sriov-dra-plugin``. Code everywhere logs a short constant message
and puts the variable parts in ``extra`` (``claim``, ``pod``, ``pci``, ``op``, ``outcome``,
``reason``, ...), so a record is searchable by field. The JSON form has ``ts`` (RFC 3339, UTC,
from the record's own timestamp), ``level``, ``logger``, ``msg``, every extra field, and
``exc`` with the traceback when there is one. The text form prints the same fields as
``key=value`` after the message. Only entrypoints call :func:`configure`.
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


class LogFormat(enum.StrEnum):
    """``--log-format`` values."""

    JSON = "json"
    TEXT = "text"


def _fields(record: logging.LogRecord) -> dict[str, Any]:
    return {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}


def _timestamp(record: logging.LogRecord) -> str:
    stamp = dt.datetime.fromtimestamp(record.created, tz=dt.UTC)
    return stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class JsonFormatter(logging.Formatter):
    """One JSON object per line; non-JSON values are written with ``str()``."""

    def format(self, record: logging.LogRecord) -> str:
        doc: dict[str, Any] = {
            "ts": _timestamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        doc.update(_fields(record))
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        return json.dumps(doc, default=str, sort_keys=False)


class TextFormatter(logging.Formatter):
    """``<ts> <LEVEL> <logger>: <msg> key=value ...`` on one line (tracebacks follow)."""

    def format(self, record: logging.LogRecord) -> str:
        extras = " ".join(
            f"{k}={v!r}" if isinstance(v, str) and " " in v else f"{k}={v}"
            for k, v in _fields(record).items()
        )
        line = f"{_timestamp(record)} {record.levelname} {record.name}: {record.getMessage()}"
        if extras:
            line = f"{line} {extras}"
        if record.exc_info:
            line = f"{line}\n{self.formatException(record.exc_info)}"
        return line


def configure(fmt: LogFormat, level: str = "info", *, stream: TextIO | None = None) -> None:
    """Send every log record to ``stream`` (stderr) in ``fmt`` at ``level`` and above.

    Replaces any handler already on the root logger. Raises: ``ValueError`` for an unknown level.
    """
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        raise ValueError(f"log level {level!r} is not one of debug, info, warning, error")
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt is LogFormat.JSON else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(numeric)
