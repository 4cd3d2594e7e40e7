"""`kaipolicy test`: pytest-like output closing with `N passed, M failed`; a failure shows expected
vs actual and what the audit log says about it; decisions are matched field by field."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaipolicy.cli.main import main
from kaipolicy.workflow.decisions import matches

SUITE = """\
scenarios:
  one-node:
    actions: [allocate]
    queues: [{name: q, deserved: {gpu: 4}, limit: {gpu: 2}}]
    nodes: [{name: n0, gpus: 4, gpuMemoryMiB: 40000, cpuMillis: 8000, memoryBytes: 64000000000, maxPods: 110}]
    jobs:
      - {name: small, queue: q, perTask: {gpus: 1}, tasks: [{state: Pending}]}
      - {name: big, queue: q, createdMinutesAgo: 0, perTask: {gpus: 3}, tasks: [{state: Pending}]}
tests:
  - name: the small job runs
    scenario: one-node
    expect: {jobs: {small: {status: Binding, node: n0}}}
  - name: the big job runs too
    scenario: one-node
    expect:
      jobs: {big: {status: Binding}}
      decisions: [{rule: predicates/node-affinity, verdict: deny}]
  - name: the limit stops the big job
    scenario: one-node
    expect:
      decisions: [{rule: proportion/queue-limit-and-quota, verdict: deny, job: big, messageContains: "Limit is 2 GPUs"}]
      absent: [{rule: proportion/queue-limit-and-quota, job: small}]
"""


def _run(tmp_path: Path, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    (tmp_path / "limit_test.yaml").write_text(SUITE)
    code = main(["test", str(tmp_path), *args])
    return code, capsys.readouterr().out


def test_the_summary_counts_passes_and_failures_and_the_exit_status_says_whether_all_passed(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(tmp_path, capsys)
    assert code == 1
    assert "limit_test.yaml .F." in out
    assert " 2 passed, 1 failed in " in out.splitlines()[-1]


def test_a_failure_shows_expected_and_actual_and_what_the_audit_log_says(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out = _run(tmp_path, capsys)
    failure = out[out.index("FAILURES"):]
    assert "limit_test.yaml:13::the big job runs too" in failure
    assert "job big: expected Binding, got big-0 Pending" in failure
    assert "expected decision {rule: predicates/node-affinity, verdict: deny} was not made" in failure
    assert "rule proportion/queue-limit-and-quota refused the job: q quota has reached the allowable limit" in failure
    assert "rule predicates/node-affinity decided nothing in this test" in failure


def test_v_also_prints_the_audit_records_of_the_jobs_a_failing_test_is_about(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, out = _run(tmp_path, capsys, "-v")
    failure = out[out.index("FAILURES"):]
    assert "  audit records:" in failure
    assert '"deniedBy": {"message": "q quota has reached the allowable limit of GPUs.' in failure


def test_k_selects_tests_by_name_and_v_prints_one_line_each(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = _run(tmp_path, capsys, "-k", "small", "-v")
    assert code == 0
    assert "limit_test.yaml::the small job runs PASSED" in out and "big job" not in out
    assert " 1 passed, 0 failed in " in out


@pytest.mark.parametrize(("expected", "hit"), [
    ({"rule": "p/r"}, True),
    ({"rule": "p/r", "job": "j"}, True),
    ({"rule": "p/r", "job": "ns/j"}, True),
    ({"rule": "p/r", "job": "other/j"}, False),
    ({"rule": "p/r", "for": "boss"}, True),
    ({"rule": "p/r", "for": "ns/boss"}, True),
    ({"rule": "p/r", "mode": "audit"}, False),
    ({"rule": "p/r", "messageContains": "too big"}, True),
    ({"rule": "p/r", "node": "n1"}, False),
])
def test_an_expected_decision_matches_field_by_field(expected: dict[str, str], hit: bool) -> None:
    decision = {"rule": "p/r", "verdict": "deny", "mode": "enforce", "job": "j", "namespace": "ns", "node": "n0",
                "for": "ns/boss", "message": "the pod is too big", "cycle": 1, "action": "allocate"}
    assert matches(expected, decision) is hit
