"""Structured logs: one JSON object per line on stderr (time, level, logger, message, and the
fields a call passes in `extra`), or plain text for a person at a terminal.

A formatter of our own: the standard library's logging is all it needs, and a JSON-logging
package would be a dependency for twenty lines.
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

#: LogRecord attributes that are not a call's own fields
_STANDARD = set(vars(logging.LogRecord("", 0, "", 0, "", None, None))) | {"message", "asctime"}


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        entry: dict[str, Any] = {
            "time": datetime.fromtimestamp(record.created, UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ"),
            "level": record.levelname.lower(), "logger": record.name, "message": record.getMessage()}
        entry |= {k: v for k, v in vars(record).items() if k not in _STANDARD and not k.startswith("_")}
        if record.exc_info:
            entry["exception"] = self.formatException(record.exc_info)
        return json.dumps(entry, default=str, ensure_ascii=False)


def configure(fmt: str = "json", level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else
                         logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    # the HTTP client logs every retried connection at WARNING; the informers say it better
    logging.getLogger("urllib3").setLevel(logging.ERROR)
