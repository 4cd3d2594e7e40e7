"""The audit log's records: rejections grouped by rule, the chosen node's and the runner-up's
score parts, what an unplaced pod lacks, evictions with the job served and the rules that allowed
them, rule errors apart from denials, one outcome sentence per job, shadow verdicts of warn and
audit rules, and identical consecutive records written once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest

from kaipolicy.cli.bundle import default_policies, load
from kaipolicy.framework.audit import Audit
from kaipolicy.simulate import SimulationResult, simulate
from tests.unit.helpers import job, node, scenario

REPO = Path(__file__).resolve().parents[3]


def _run(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], extra_rules: str = "", tmp: Path | None = None,
         **over: Any) -> tuple[SimulationResult, list[dict[str, Any]]]:
    paths = [str(default_policies())]
    if extra_rules and tmp is not None:
        (tmp / "extra.yaml").write_text(extra_rules)
        paths.append(str(tmp))
    audit = Audit(enabled=True)
    result = simulate(scenario(nodes, jobs, **over), load(paths), audit=audit)
    return result, [json.loads(line) for line in audit.lines()]


def _kind(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in records if r["kind"] == kind]


def test_nodes_passed_over_are_grouped_by_the_rule_that_rejected_them() -> None:
    pod = {"state": "Pending", "nodeAffinity": ["n2"]}
    _, records = _run([node("n0"), node("n1"), node("n2")], [job("j", tasks=[pod])])
    (task,) = _kind(records, "task")
    assert task["outcome"] == "allocated" and task["node"] == "n2" and task["nodes"] == 3
    assert task["rejected"] == [{"rule": "predicates/node-affinity", "count": 2, "sampleNode": "n0",
                                 "message": "node(s) didn't match Pod's node affinity/selector"}]


def test_the_chosen_node_and_the_runner_up_carry_each_score_rules_part() -> None:
    busy = job("busy", tasks=[{"state": "Running", "node": "n0"}], perTask={"gpus": 2, "cpuMillis": 1000})
    _, records = _run([node("n0"), node("n1")], [busy, job("j")])
    (task,) = [r for r in _kind(records, "task") if r["job"] == "j"]
    assert task["scores"]["chosen"] == {"node": "n0", "total": 109.0,
                                        "rules": {"nodeavailability/fits-now": 100.0, "nodeplacement/gpu-binpack": 9.0}}
    assert task["scores"]["runnerUp"] == {"node": "n1", "total": 100.0, "rules": {"nodeavailability/fits-now": 100.0}}


def test_an_unplaced_pod_names_the_node_closest_to_fitting_and_what_it_lacks() -> None:
    half = job("half", tasks=[{"state": "Running", "node": "n0"}], perTask={"gpus": 2, "cpuMillis": 1000})
    most = job("most", tasks=[{"state": "Running", "node": "n1"}], perTask={"gpus": 3, "cpuMillis": 1000})
    big = job("big", perTask={"gpus": 3, "cpuMillis": 1000})
    _, records = _run([node("n0"), node("n1")], [half, most, big])
    (task,) = [r for r in _kind(records, "task") if r["job"] == "big"]
    assert task["outcome"] == "unplaced" and task["node"] is None
    assert task["rejected"] == [{"rule": "(node resources)", "count": 2, "sampleNode": "n0",
                                 "message": "node n0 lacks 1 GPU"}]


def test_an_eviction_names_the_job_it_served_and_the_rules_that_allowed_it() -> None:
    from kaipolicy.cache.scenario_source import load_scenario

    audit = Audit(enabled=True)
    simulate(load_scenario(REPO / "examples" / "reclaim.yaml"), load(None), audit=audit)
    evictions = _kind(audit.records, "eviction")
    assert {e["task"] for e in evictions} == {"vision-sweep-6", "vision-sweep-7"}
    assert all(e["servedJob"] == "default/llm-finetune" and e["action"] == "reclaim" for e in evictions)
    assert "proportion/reclaim-within-fair-share" in evictions[0]["allowedBy"]
    assert "fair-share of <GPU: 12" in evictions[0]["message"]


def test_a_rule_that_fails_is_an_error_record_and_not_a_denial(tmp_path: Path) -> None:
    failing = ("plugin: broken\nenable: always\nrules:\n  - name: needs-team\n    hook: predicate\n"
               "    deny: \"task.labels['team'] == 'x'\"\n")
    _, records = _run([node("n0")], [job("j")], failing, tmp_path)
    errors = _kind(records, "error")
    assert errors and errors[0]["rule"] == "broken/needs-team" and errors[0]["hook"] == "predicate"
    assert not _kind(records, "shadow")


def test_every_job_the_cycle_touched_gets_one_outcome_sentence() -> None:
    _, records = _run([node("n0", gpus=1)], [job("fits"), job("waits", createdMinutesAgo=0)])
    outcomes = {r["job"]: r for r in _kind(records, "outcome")}
    assert outcomes["fits"]["status"] == "bound" and outcomes["fits"]["reason"] == "bound: 1 pod(s) sent to node n0"
    assert outcomes["waits"]["status"] == "pending"
    assert outcomes["waits"]["reason"].startswith("pending: no node takes pod default/waits-0: 0/1 nodes")
    assert "\n" not in outcomes["waits"]["reason"] and outcomes["waits"]["queueNumbers"]["name"] == "q0"


GUARD = """\
plugin: guard
enable: always
rules:
  - name: not-n0
    hook: predicate
    mode: {mode}
    deny: "node.name == 'n0'"
    message: "'n0 is reserved'"
"""


@pytest.mark.parametrize("mode", ["audit", "warn"])
def test_a_warn_or_audit_rule_records_what_it_would_deny_and_changes_nothing(tmp_path: Path, mode: str) -> None:
    result, records = _run([node("n0")], [job("j")], GUARD.format(mode=mode), tmp_path)
    assert result.report()["tasks"][0]["node"] == "n0"
    (shadow,) = _kind(records, "shadow")
    assert shadow == {**shadow, "rule": "guard/not-n0", "mode": mode, "verdict": "deny", "message": "n0 is reserved",
                      "job": "j", "task": "j-0", "node": "n0"}
    assert bool(result.warnings) == (mode == "warn")


def test_an_enforced_guard_rule_in_a_bundle_runs_without_being_configured(tmp_path: Path) -> None:
    result, records = _run([node("n0")], [job("j")], GUARD.format(mode="enforce"), tmp_path)
    assert result.report()["tasks"][0]["status"] == "Pending"
    (task,) = _kind(records, "task")
    assert task["rejected"][0]["rule"] == "guard/not-n0"


def test_identical_consecutive_records_are_written_once_and_counted() -> None:
    audit = Audit(enabled=True)
    for _ in range(3):
        audit.add("error", action="allocate", rule="p/r", hook="predicate", message="boom")
    audit.add("error", action="allocate", rule="p/r", hook="predicate", message="other")
    audit.add("error", action="allocate", rule="p/r", hook="predicate", message="boom")
    assert [(r["message"], r.get("repeated")) for r in audit.records] == [("boom", 2), ("other", None), ("boom", None)]


def test_a_disabled_audit_log_records_nothing() -> None:
    audit = Audit(enabled=False)
    simulate(scenario([node("n0")], [job("j")]), load(None), audit=audit)
    assert audit.records == []


@pytest.mark.parametrize("change", [{"version": 2}, {"surprise": 1}, {"kind": "task"}])
def test_the_published_schema_refuses_records_it_does_not_describe(change: dict[str, Any]) -> None:
    schema = json.loads((REPO / "schemas" / "audit.schema.json").read_text())
    record = {"version": 1, "cycle": 1, "bundle": "h", "kind": "error", "action": "allocate", "rule": "p/r",
              "hook": "predicate", "message": "m"}
    jsonschema.validate(record, schema)
    with pytest.raises(jsonschema.ValidationError):
        jsonschema.validate({**record, **change}, schema)


def test_an_eviction_names_the_node_the_pod_left_even_when_the_solver_moved_it() -> None:
    # regression: the record took the pod's node at commit, where a moved victim already sits elsewhere
    nodes = [node("n0"), node("n1")]
    jobs = [job("a-held", "qa", tasks=[{"state": "Running", "node": "n0"}], perTask={"gpus": 2}),
            job("b-n0", "qb", tasks=[{"state": "Running", "node": "n0"}], perTask={"gpus": 2}),
            job("b-n1", "qb", tasks=[{"state": "Running", "node": "n1"}], perTask={"gpus": 2}),
            job("a-more", "qa", tasks=[{"state": "Pending", "nodeAffinity": ["n0"]}], perTask={"gpus": 2})]
    queues = [{"name": "qa", "deserved": {"gpu": 2}}, {"name": "qb", "deserved": {"gpu": 2}}]
    result, records = _run(nodes, jobs, queues=queues, actions=["allocate", "reclaim"])
    report = result.report()
    moved = next(t for t in report["tasks"] if t["name"] == "b-n0-0")
    assert (moved["status"], moved["node"]) == ("Pipelined", "n1")
    assert [(e["task"], e["node"]) for e in report["evictionReasons"]] == [("b-n0-0", "n0")]
    assert [(r["task"], r["node"]) for r in _kind(records, "eviction")] == [("b-n0-0", "n0")]


def test_warn_mode_verdicts_are_warning_lines_in_simulates_text_output(tmp_path: Path,
                                                                     capsys: pytest.CaptureFixture[str]) -> None:
    from kaipolicy.cli.main import main

    (tmp_path / "guard.yaml").write_text(GUARD.format(mode="warn").replace("n0", "dgx-a"))
    assert main(["simulate", "--policies", str(default_policies()), "--policies", str(tmp_path),
                 str(REPO / "examples" / "small-cluster.yaml")]) == 0
    out = capsys.readouterr().out
    assert "  warning: cycle 1: guard/not-dgx-a (warn) would deny job llm-finetune, task llm-finetune-0, " \
           "node dgx-a in allocate: dgx-a is reserved" in out
