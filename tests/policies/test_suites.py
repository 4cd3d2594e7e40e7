"""The policy test suites kept in the repository: the default bundle's own suite passes and
leaves no rule uncovered, and `kaipolicy test examples/policies` passes every showcase test."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from kaipolicy.cli.main import main
from kaipolicy.workflow.runner import run_suites

REPO = Path(__file__).resolve().parents[2]


def test_the_default_bundles_suite_passes_and_every_rule_decides_something() -> None:
    run = run_suites([str(REPO / "tests" / "policies" / "default_test.yaml")], with_coverage=True)
    failures = [f"{r.test.name}: {r.failures}" for _, results in run.results for r in results if not r.passed]
    assert not failures
    (coverage,) = run.coverage.values()
    assert len(coverage.rules) >= 35 and coverage.uncovered == []


def test_kaipolicy_test_examples_policies_passes_every_test(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["test", str(REPO / "examples" / "policies"), "--coverage"]) == 0
    out = capsys.readouterr().out
    assert re.search(r" (\d+) passed, 0 failed in ", out) and "never decided" not in out
