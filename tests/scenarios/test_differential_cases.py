"""Our own scenarios for the cases where kaipolicy and the reference once decided differently
(../shared/cases/differential, rewritten with an `expect` block each, plus their counterparts):
each must come out as its `expect` says, with the vectorised and the node-by-node evaluators."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scenarios.shared import problems, run

CASES = sorted((Path(__file__).resolve().parent / "differential").glob("*.yaml"))


@pytest.mark.parametrize("vectorize", [True, False], ids=["vector", "scalar"])
@pytest.mark.parametrize("path", CASES, ids=lambda p: p.stem)
def test_a_differential_case_decides_as_its_expect_block_says(path: Path, vectorize: bool) -> None:
    report = run(path, vectorize=vectorize)
    assert "error" not in report, report.get("error")
    assert not report["ruleErrors"], report["ruleErrors"]
    assert problems(path, report) == []


def test_the_differential_cases_are_there() -> None:
    assert len(CASES) >= 3
