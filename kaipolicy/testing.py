"""Helpers for a platform team's own policy tests in pytest.

`assert_suites_pass("policies/")` runs `*_test.yaml` suites and fails with the same report as
`kaipolicy test`; `run_scenario(...)` runs one scenario (a mapping or a file) under a bundle and
gives the report, the audit records, the flattened decisions and `explain`.
"""

from __future__ import annotations

import copy
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kaipolicy.cache.scenario_source import load_scenario, scenario_from_doc
from kaipolicy.framework.audit import Audit
from kaipolicy.simulate import simulate
from kaipolicy.workflow.bundles import build
from kaipolicy.workflow.decisions import decisions, matches
from kaipolicy.workflow.explain import explain
from kaipolicy.workflow.runner import render, run_suites
from kaipolicy.workflow.suite import BundleSpec, find_suites

__all__ = ["ScenarioRun", "assert_suites_pass", "run_scenario"]


def assert_suites_pass(*paths: str | Path) -> int:
    """Run every suite under `paths`; AssertionError with the report if any test fails. Returns
    the number of tests that passed."""
    run = run_suites([str(p) for p in find_suites([str(p) for p in paths])])
    if run.failed:
        raise AssertionError(render(run))
    return run.passed


@dataclass
class ScenarioRun:
    report: dict[str, Any]            # what `kaipolicy simulate --output json` prints
    records: list[dict[str, Any]]     # the audit log (detailed: rejection groups list every node)

    @property
    def decisions(self) -> list[dict[str, Any]]:
        return decisions(self.records)

    def decided(self, **fields: Any) -> bool:
        """Whether some decision matches these fields, as in a suite's `expect.decisions`
        (`for_` stands for `for`)."""
        wanted = {("for" if k == "for_" else k): v for k, v in fields.items()}
        return any(matches(wanted, d) for d in self.decisions)

    def explain(self, name: str) -> str:
        return explain(self.records, name).render()


def run_scenario(scenario: dict[str, Any] | str | Path, policies: list[str | Path] | None = None, *,
                 default: bool = True, arguments: dict[str, dict[str, Any]] | None = None,
                 modes: dict[str, str] | None = None) -> ScenarioRun:
    """One scenario under the default bundle (unless `default=False`) plus `policies`, with plugin
    argument defaults and rule modes overridden as a suite's `bundle` would."""
    spec = BundleSpec(default, tuple(str(Path(p).resolve()) for p in policies or ()),
                      json.dumps(arguments or {}, sort_keys=True), tuple(sorted((modes or {}).items())))
    loaded = (scenario_from_doc(copy.deepcopy(scenario), "<scenario>") if isinstance(scenario, dict)
              else load_scenario(scenario))
    audit = Audit(enabled=True, detail=True)
    result = simulate(loaded, build(spec), audit=audit)
    return ScenarioRun(result.report(), audit.records)
