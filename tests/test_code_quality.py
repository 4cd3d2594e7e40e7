"""The quality gates run as tests: ruff, `mypy --strict` and import-linter pass on the tree.

Each tool runs in a subprocess of this interpreter from the repository root, so CI's
`pip install -e '.[test]'` is all they need; a failure shows the tool's own output.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _passes(*args: str) -> None:
    proc = subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          check=False)
    if proc.returncode != 0:
        pytest.fail(f"python {' '.join(args)} exited {proc.returncode}:\n{proc.stdout}{proc.stderr}", pytrace=False)


def test_ruff_finds_nothing_in_the_package_tests_and_benchmarks() -> None:
    _passes("-m", "ruff", "check", "kaipolicy", "tests", "bench")


def test_mypy_strict_finds_nothing_in_the_package() -> None:
    # The default cache, .mypy_cache (git-ignored), makes repeat runs take well under a second.
    _passes("-m", "mypy", "--strict", "kaipolicy")


def test_imports_keep_to_the_layers_in_pyproject() -> None:
    # import-linter has no `python -m` entry point; this is what its `lint-imports` script runs.
    _passes("-c", "import sys; from importlinter.cli import lint_imports_command; sys.exit(lint_imports_command())")
