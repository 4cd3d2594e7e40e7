"""kaipolicy.testing: a platform team's pytest tests run suites and scenarios in a few lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaipolicy.testing import assert_suites_pass, run_scenario

REPO = Path(__file__).resolve().parents[2]
QUOTA = REPO / "examples" / "policies" / "gpu-type-quota"


def test_assert_suites_pass_counts_the_passing_tests() -> None:
    assert assert_suites_pass(QUOTA) == 8


def test_assert_suites_pass_fails_with_the_kaipolicy_test_report(tmp_path: Path) -> None:
    (tmp_path / "x_test.yaml").write_text(
        "tests:\n  - name: nothing runs\n    scenario: {actions: [allocate], queues: [{name: q}], nodes: [],\n"
        "      jobs: [{name: j, queue: q, perTask: {gpus: 1}, tasks: [{state: Pending}]}]}\n"
        "    expect: {jobs: {j: {status: Running}}}\n")
    with pytest.raises(AssertionError, match=r"job j: expected Running, got j-0 Pending(.|\n)* 0 passed, 1 failed"):
        assert_suites_pass(tmp_path)


def test_run_scenario_gives_the_report_the_decisions_and_explain() -> None:
    run = run_scenario(REPO / "examples" / "gpu-models.yaml", [QUOTA])
    assert {t["name"]: t["node"] for t in run.report["tasks"]}["a-notebook-0"] == "h100-0"
    assert run.decided(rule="gpu-type-quota/queue-model-quota", task="a-notebook-0", node="a100-1")
    assert not run.decided(rule="gpu-type-quota/queue-model-quota", job="b-tune")
    assert "cycle 1: bound: 1 pod(s) sent to node h100-0" in run.explain("a-notebook")


def test_run_scenario_takes_modes_and_arguments() -> None:
    run = run_scenario(REPO / "examples" / "gpu-models.yaml", [QUOTA],
                       arguments={"gpu-type-quota": {"quotas": {}}})
    assert not run.decided(rule="gpu-type-quota/queue-model-quota")
    audit = run_scenario(REPO / "examples" / "gpu-models.yaml", [QUOTA],
                         modes={"gpu-type-quota/queue-model-quota": "audit"})
    assert audit.decided(rule="gpu-type-quota/queue-model-quota", mode="audit")
