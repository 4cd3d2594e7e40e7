"""Test-wide settings: the repository root on sys.path so `tests.*` helpers import; the closing
summary says which copy of the CEL conformance suite the run used (tests/conformance/), and
prints the figures tests recorded (`record_property("figures", ...)`: the binder's fault runs).
Here, not in a sub-folder's conftest: under xdist the controlling process loads only this one."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.conformance.suite import describe, locate  # after the sys.path line above


def pytest_terminal_summary(terminalreporter: Any) -> None:
    folder, missing = locate()
    terminalreporter.write_line(f"CEL conformance suite: {describe(folder) if folder is not None else missing}")
    for outcome in ("passed", "failed"):
        for report in terminalreporter.stats.get(outcome, []):
            for name, value in getattr(report, "user_properties", []):
                if name == "figures":
                    terminalreporter.write_line(str(value))
