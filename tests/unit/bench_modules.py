"""The bench scripts imported as modules, for the tests of their measured parts."""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def bench_module(monkeypatch: pytest.MonkeyPatch, name: str) -> Any:
    """bench/<name>.py, imported afresh with the bench folder on the path (for this test only)."""
    monkeypatch.syspath_prepend(str(BENCH))
    sys.modules.pop(name, None)
    return importlib.import_module(name)
