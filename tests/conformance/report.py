"""Conformance figures as JSON: `python -m tests.conformance.report` (the suite found as the tests find it).

Prints the pass rate overall and inside the documented subset, why cases are outside, the
failing cases by class, crashes, how vector mode fared, and how Google's runtime
(cel-expr-python) fares on the same subset, for docs/policy-language.md.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import yaml

from tests.conformance.run import run_case, run_with_cel_cpp
from tests.conformance.subset import exclusion
from tests.conformance.suite import describe, load_cases, locate


def report(folder: Path) -> dict[str, Any]:
    cases = load_cases(folder)
    outcomes = [(case, exclusion(case), run_case(case)) for case in cases]
    inside = [(case, outcome) for case, reason, outcome in outcomes if reason is None]
    passed_inside = sum(outcome.passed for _, outcome in inside)
    known = yaml.safe_load((Path(__file__).parent / "known_failures.yaml").read_text(encoding="utf-8"))
    classes = {case_id: entry["class"] for entry in known for case_id in entry["cases"]}
    failing: dict[str, list[str]] = {}
    for case, outcome in inside:
        if not outcome.passed:
            failing.setdefault(classes.get(case.id, "not classified yet"), []).append(case.id)
    return {
        "suite": describe(folder),
        "cases": len(cases),
        "passed": sum(outcome.passed for _, _, outcome in outcomes),
        "subset": {"cases": len(inside), "passed": passed_inside,
                   "rate": round(passed_inside / len(inside), 4) if inside else None,
                   "failing": failing},
        "outside": dict(Counter(reason for _, reason, _ in outcomes if reason is not None).most_common()),
        "crashes": [case.id for case, _, outcome in outcomes if outcome.crashed],
        "vector": dict(Counter(outcome.vector for _, outcome in inside if outcome.vector)),
        "cel_expr_python": {"subset_passed": sum(run_with_cel_cpp(case) for case, _ in inside),
                            "note": "checked types are not compared for it"},
    }


def main() -> int:
    folder, missing = locate()
    if folder is None:
        print(missing, file=sys.stderr)
        return 1
    print(json.dumps(report(folder), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
