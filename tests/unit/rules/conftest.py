"""Fixtures for the rule compiler tests; the vocabulary itself lives in rules_fixtures.py."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from rules_fixtures import make_vocabulary

from kaipolicy.rules.vocabulary import Vocabulary


@pytest.fixture
def vocabulary() -> Vocabulary:
    return make_vocabulary()


@pytest.fixture
def write(tmp_path: Path) -> Callable[[str, str], Path]:
    """write(name, text) puts a rule file in a fresh directory and returns its path."""
    def _write(name: str, text: str) -> Path:
        path = tmp_path / name
        path.write_text(text, encoding="utf-8")
        return path
    return _write
