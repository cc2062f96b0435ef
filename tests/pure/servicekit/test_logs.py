"""One log schema for every service (servicekit/logs.py)."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest
from hypothesis import given
from hypothesis import strategies as st

from sriov_dra.servicekit import logs


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


def record(
    msg: str = "shadow created", *, created: float = 1764624045.1234, **extra: object
) -> logging.LogRecord:
    rec = logging.makeLogRecord(
        {"name": "sriov_dra.driver", "levelno": logging.INFO, "levelname": "INFO", "msg": msg}
    )
    rec.created = created
    rec.__dict__.update(extra)
    return rec


def test_json_record_has_utc_millisecond_timestamp_lowercase_level_and_the_fields() -> None:
    doc = json.loads(logs.JsonFormatter().format(record(claim_uid="c-1", op="prepare", duration_ms=12)))
    assert doc == {
        "ts": "2025-12-01T21:20:45.123Z",
        "level": "info",
        "logger": "sriov_dra.driver",
        "msg": "shadow created",
        "claim_uid": "c-1",
        "op": "prepare",
        "duration_ms": 12,
    }


def test_json_record_carries_the_traceback_as_exc() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        rec = logging.makeLogRecord(
            {"name": "x", "levelname": "ERROR", "msg": "worker crashed", "exc_info": True}
        )
        import sys

        rec.exc_info = sys.exc_info()
    doc = json.loads(logs.JsonFormatter().format(rec))
    assert "ValueError: boom" in doc["exc"]
    assert "traceback" not in doc and "exception" not in doc


def test_text_record_quotes_values_with_white_space_and_keeps_field_order() -> None:
    line = logs.TextFormatter().format(record(pod="ns/p", reason="two words", empty=""))
    assert (
        line
        == '2025-12-01T21:20:45.123Z INFO sriov_dra.driver: shadow created pod=ns/p reason="two words" empty=""'
    )


@given(
    st.dictionaries(
        st.from_regex(r"[a-z][a-z_]{0,10}", fullmatch=True), st.text() | st.integers(), max_size=5
    )
)
def test_any_fields_give_one_json_line_that_decodes_to_them(extra: dict[str, object]) -> None:
    extra = {
        k: v
        for k, v in extra.items()
        if k not in vars(record()) and k not in {"ts", "level", "logger", "msg"}
    }
    line = logs.JsonFormatter().format(record(**extra))
    assert "\n" not in line
    doc = json.loads(line)
    assert {k: doc[k] for k in extra} == extra


def test_configure_installs_one_handler_and_quiets_the_http_libraries(restore_root: None) -> None:
    out = io.StringIO()
    logs.configure("json", "debug", stream=out)
    logging.getLogger("sriov_dra.guard").debug("guard ready", extra={"socket": "/run/g.sock"})
    logging.getLogger("urllib3.connectionpool").info("connection")
    (line,) = out.getvalue().splitlines()
    assert json.loads(line)["socket"] == "/run/g.sock"
    assert len(logging.getLogger().handlers) == 1


@pytest.mark.parametrize(("fmt", "level"), [("yaml", "info"), ("json", "verbose"), ("json", "notset")])
def test_configure_refuses_an_unknown_format_or_level(fmt: str, level: str, restore_root: None) -> None:
    with pytest.raises(ValueError):
        logs.configure(fmt, level, stream=io.StringIO())
