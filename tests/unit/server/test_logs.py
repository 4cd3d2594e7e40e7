"""Structured logs: one JSON object per line, with the call's own fields."""

from __future__ import annotations

import json
import logging

from kaipolicy.server.logs import JsonFormatter


def test_a_log_line_is_one_json_object_with_the_calls_fields() -> None:
    record = logging.LogRecord("kaipolicy.loop", logging.INFO, "x.py", 1, "cycle %d: %d bound", (7, 3), None)
    record.cycle, record.bundle = 7, "abc"
    line = json.loads(JsonFormatter().format(record))
    assert {k: line[k] for k in ("level", "logger", "message", "cycle", "bundle")} == {
        "level": "info", "logger": "kaipolicy.loop", "message": "cycle 7: 3 bound", "cycle": 7, "bundle": "abc"}
    assert line["time"].endswith("Z")


def test_an_exception_is_one_field_of_the_line() -> None:
    try:
        raise ValueError("boom")
    except ValueError:
        import sys
        record = logging.LogRecord("kaipolicy.loop", logging.ERROR, "x.py", 1, "failed", (), sys.exc_info())
    text = JsonFormatter().format(record)
    assert "\n" not in text and "ValueError: boom" in json.loads(text)["exception"]
