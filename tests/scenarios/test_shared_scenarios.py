"""Every scenario of ../shared/scenarios must come out as its `expect` block says, except the
cases listed in KNOWN_FAILURES with a reason. A listed case that passes fails the test too:
shrink the list when behaviour improves."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.scenarios.shared import problems, run, scenario_files, scenario_id

# scenario (relative to ../shared/scenarios) -> why it does not match the reference yet
KNOWN_FAILURES: dict[str, str] = {
}


@pytest.mark.parametrize("path", scenario_files(), ids=scenario_id)
def test_scenario_matches_its_expect_block(path: Path) -> None:
    report = run(path)
    assert not report.get("ruleErrors"), f"rules failed at run time: {report['ruleErrors']}"
    found = problems(path, report)
    known = KNOWN_FAILURES.get(scenario_id(path))
    if known is None:
        assert not found, "; ".join(found)
    else:
        assert found, f"listed as failing ({known}) but it passes now: remove it from KNOWN_FAILURES"


def test_the_known_failures_list_names_only_existing_scenarios() -> None:
    ids = {scenario_id(p) for p in scenario_files()}
    assert set(KNOWN_FAILURES) <= ids


def test_the_shared_scenarios_are_there() -> None:
    # without ../shared the parametrised test above would silently run zero cases
    assert len(scenario_files()) >= 150
