"""Running policy test suites: each test's scenario through the simulator with a detailed audit
log, its expectations checked, and (on request) which rules of each bundle decided nothing.

`run_suites` returns a `Run`; `render` prints it the way pytest does: a progress line per suite,
the failures with what explains them, the rules never exercised, `N passed, M failed`.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kaipolicy.errors import KaipolicyError
from kaipolicy.framework.audit import Audit
from kaipolicy.framework.coverage import Coverage
from kaipolicy.simulate import simulate
from kaipolicy.workflow.bundles import build
from kaipolicy.workflow.expect import check
from kaipolicy.workflow.suite import PolicyTest, Suite, load_suite


@dataclass
class TestResult:
    test: PolicyTest
    failures: list[str]
    context: list[str]
    seconds: float
    records: list[dict[str, Any]] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return not self.failures


@dataclass
class BundleCoverage:
    """Which rules of one bundle (by content hash) decided something across the suites using it."""

    suites: list[str]
    rules: list[str]
    coverage: Coverage = field(default_factory=Coverage)

    @property
    def uncovered(self) -> list[str]:
        return [r for r in self.rules if r not in self.coverage.decided]


@dataclass
class Run:
    results: list[tuple[Suite, list[TestResult]]] = field(default_factory=list)
    coverage: dict[str, BundleCoverage] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def passed(self) -> int:
        return sum(r.passed for _, rs in self.results for r in rs)

    @property
    def failed(self) -> int:
        return sum(not r.passed for _, rs in self.results for r in rs)


def run_test(test: PolicyTest, coverage: Coverage | None = None) -> TestResult:
    start = time.perf_counter()
    audit = Audit(enabled=True, detail=True)
    try:
        bundle = build(test.bundle)
        result = simulate(test.scenario(), bundle, audit=audit, coverage=coverage)
    except KaipolicyError as e:
        return TestResult(test, [f"the test could not run: {e}"], [], time.perf_counter() - start)
    failures, context = check(test.expect, result, audit.records)
    return TestResult(test, failures, context, time.perf_counter() - start, audit.records)


def run_suites(paths: list[str], keyword: str = "", with_coverage: bool = False) -> Run:
    """Every test of every suite file given (all load first: one bad file stops the run)."""
    start = time.perf_counter()
    suites = [load_suite(p) for p in paths]
    run = Run()
    for suite in suites:
        cov = _coverage_for(run, suite) if with_coverage else None
        tests = [t for t in suite.tests if keyword.lower() in t.name.lower()]
        run.results.append((suite, [run_test(t, cov.coverage if cov else None) for t in tests]))
    run.seconds = time.perf_counter() - start
    return run


def _coverage_for(run: Run, suite: Suite) -> BundleCoverage:
    """Coverage is counted per bundle: suites with the same rules share one count (a test's own
    arguments or modes change the bundle's hash, not its rules, so the suite's bundle is the key).
    It covers the suite's own rule files (`bundle.policies`), or the whole bundle without them."""
    bundle = build(suite.bundle)
    own = [Path(p) for p in suite.bundle.policies]
    rules = [f"{p.name}/{r.name}" for p in bundle.plugins.values() for r in p.rules
             if not own or any(Path(p.file).resolve().is_relative_to(o) for o in own)]
    key = f"{bundle.hash}:{','.join(map(str, own))}"
    cov = run.coverage.get(key)
    if cov is None:
        cov = run.coverage[key] = BundleCoverage([], rules)
    cov.suites.append(suite.path)
    return cov


def render(run: Run, verbose: bool = False) -> str:
    lines: list[str] = []
    for suite, results in run.results:
        if verbose:
            lines += [f"{suite.path}::{r.test.name} {'PASSED' if r.passed else 'FAILED'}" for r in results]
        else:
            lines.append(f"{suite.path} " + "".join("." if r.passed else "F" for r in results))
    failed = [(s, r) for s, rs in run.results for r in rs if not r.passed]
    if failed:
        lines += ["", _rule(" FAILURES ")]
        for suite, r in failed:
            lines.append(_rule(f" {suite.path}:{r.test.line}::{r.test.name} ", "_"))
            lines += [f"  {f}" for f in r.failures]
            if r.context:
                lines.append("  what the audit log says:")
                lines += [f"    {c}" for c in r.context]
            if verbose:
                lines += _records(r)
    for cov in run.coverage.values():
        lines += ["", _rule(" coverage ")]
        names = ", ".join(cov.suites)
        missing = cov.uncovered
        lines.append(f"{len(cov.rules) - len(missing)} of {len(cov.rules)} rules decided something in {names}")
        if missing:
            lines.append("rules that never decided anything:")
            lines += [f"  {rule}" for rule in missing]
    lines.append(_rule(f" {run.passed} passed, {run.failed} failed in {run.seconds:.2f}s "))
    return "\n".join(lines)


RECORDS_SHOWN = 30


def _records(r: TestResult) -> list[str]:
    """-v: the audit records about the jobs and pods the test expects something of, as written."""
    names = set(r.test.expect.get("jobs") or {}) | set(r.test.expect.get("tasks") or {})
    mine = [rec for rec in r.records if rec.get("job") in names or rec.get("task") in names]
    shown = [f"    {json.dumps(rec, sort_keys=True)}" for rec in mine[:RECORDS_SHOWN]]
    more = [f"    ... and {len(mine) - RECORDS_SHOWN} more"] if len(mine) > RECORDS_SHOWN else []
    return (["  audit records:"] + shown + more) if shown else []


def _rule(title: str, fill: str = "=", width: int = 88) -> str:
    pad = max(width - len(title), 4)
    return fill * (pad // 2) + title + fill * (pad - pad // 2)
