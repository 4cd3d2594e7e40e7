"""The official CEL conformance suite through kaipolicy's pipeline (see tests/conformance/run.py).

Every case of the documented subset must pass, except the known failures (strict xfails);
no case at all, inside the subset or not, may crash the pipeline. Without the suite the tests
skip, saying how to get it; under CI=true they fail instead.
"""

from __future__ import annotations

import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conformance.run import run_case
from tests.conformance.subset import exclusion
from tests.conformance.suite import Case, describe, load_cases, locate

FOLDER, MISSING = locate()
SUITE = describe(FOLDER) if FOLDER is not None else ""
CASES = load_cases(FOLDER) if FOLDER is not None else []
INSIDE = [case for case in CASES if exclusion(case) is None]
KNOWN = {case_id: entry["class"] for entry in yaml.safe_load(
    (Path(__file__).parent / "known_failures.yaml").read_text(encoding="utf-8")) for case_id in entry["cases"]}
TARGET = 0.97


def _params(cases: list[Case]) -> list[Any]:
    seen: Counter[str] = Counter()
    params = []
    for case in cases:
        seen[case.id] += 1
        case_id = case.id if seen[case.id] == 1 else f"{case.id}#{seen[case.id]}"
        marks = [pytest.mark.xfail(strict=True, reason=KNOWN[case.id])] if case.id in KNOWN else []
        params.append(pytest.param(case, id=case_id, marks=marks))
    return params


@pytest.fixture(autouse=True)
def _suite_is_there() -> None:
    if FOLDER is None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"CI needs the CEL conformance suite: {MISSING}", pytrace=False)
        pytest.skip(MISSING)


def test_the_subset_holds_most_of_the_suites_core_files() -> None:
    per_file = Counter(case.file for case in INSIDE)
    assert len(INSIDE) >= 700, f"{SUITE}: only {len(INSIDE)} cases inside the subset: {dict(per_file)}"
    for core in ("basic", "comparisons", "conversions", "integer_math", "fp_math", "lists", "logic", "macros",
                 "parse", "string"):
        assert per_file[core] > 0, f"no case of {core}.textproto is inside the subset"


@pytest.mark.parametrize("case", _params(INSIDE) or [pytest.param(None, id="no-suite")])
def test_a_case_inside_the_documented_subset_passes(case: Case) -> None:
    outcome = run_case(case)
    assert outcome.passed, f"{case.expr!r}: {outcome.detail}" + (f" (vector {outcome.vector})" if outcome.vector else "")


def test_at_least_97_percent_of_the_subset_passes() -> None:
    passed = sum(run_case(case).passed for case in INSIDE)
    assert passed >= TARGET * len(INSIDE), f"{SUITE}: {passed} of {len(INSIDE)} pass"


def test_a_case_that_its_file_puts_outside_is_outside_by_its_own_needs_too() -> None:
    """So the cases of a file a later suite adds, which no rule names, are classified one by one."""
    inside = [case.id for case in CASES if exclusion(case) is not None and exclusion(case, by_file=False) is None]
    assert not inside, f"{SUITE}: only their file's name puts these outside: {inside}"


def test_no_case_of_the_whole_suite_crashes_the_pipeline() -> None:
    crashes = {case.id: outcome.detail for case in CASES if (outcome := run_case(case)).crashed}
    assert not crashes, "\n".join(f"{case_id}: {detail}" for case_id, detail in sorted(crashes.items()))


def test_every_known_failure_names_a_case_of_the_subset() -> None:
    inside = {case.id for case in INSIDE}
    stale = sorted(set(KNOWN) - inside)
    # The PyPI copy of the suite is older than cel-spec's head: a case may be absent, never outside.
    present = {case.id for case in CASES}
    assert not [case_id for case_id in stale if case_id in present], stale
