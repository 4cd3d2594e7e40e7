"""Structured logs: one JSON object per line, with the call's own fields; the level from
$KAIPOLICY_LOG_LEVEL, a wrong one refused."""

from __future__ import annotations

import json
import logging
import sys
from collections.abc import Iterator

import pytest

from kaipolicy.daemon.logs import JsonFormatter, configure
from kaipolicy.errors import ConfigError


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
        record = logging.LogRecord("kaipolicy.loop", logging.ERROR, "x.py", 1, "failed", (), sys.exc_info())
    text = JsonFormatter().format(record)
    assert "\n" not in text and "ValueError: boom" in json.loads(text)["exception"]


@pytest.fixture
def root_logger() -> Iterator[logging.Logger]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield root
    root.handlers[:], root.level = handlers, level


def test_the_level_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, root_logger: logging.Logger) -> None:
    monkeypatch.setenv("KAIPOLICY_LOG_LEVEL", "debug")
    configure("json")
    assert root_logger.level == logging.DEBUG and isinstance(root_logger.handlers[0].formatter, JsonFormatter)
    monkeypatch.setenv("KAIPOLICY_LOG_LEVEL", "loud")
    with pytest.raises(ConfigError, match="KAIPOLICY_LOG_LEVEL='LOUD'"):
        configure("text")
