"""`kaipolicy explain`: why a job or pod is pending, where it went and why, or why it was evicted,
from a scenario or from an audit log file, in text or JSON; unknown names and bad files are
clear messages, never tracebacks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kaipolicy.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
SMALL, RECLAIM = str(EXAMPLES / "small-cluster.yaml"), str(EXAMPLES / "reclaim.yaml")


def _explain(capsys: pytest.CaptureFixture[str], *args: str) -> str:
    assert main(["explain", *args]) == 0
    return capsys.readouterr().out


def test_a_job_held_by_its_queue_limit_names_the_rule_and_the_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    out = _explain(capsys, "detector-sweep", SMALL)
    assert out.startswith("job default/detector-sweep in queue vision, cycle 1: pending: "
                          "proportion/queue-limit-and-quota refused it in allocate")
    assert "Limit is 10 GPUs, currently 4 GPUs allocated and workload requested 8 GPUs" in out
    assert "queue vision: 4 GPUs allocated, deserved 8, fair share 10, limit 10" in out


def test_a_placed_job_shows_each_pods_scores_against_the_runner_up(capsys: pytest.CaptureFixture[str]) -> None:
    out = _explain(capsys, "llm-finetune", SMALL)
    assert "bound: 2 pod(s) sent to nodes dgx-a, dgx-b" in out
    assert ("allocate: pod llm-finetune-0 allocated on dgx-a (score 109 = nodeavailability/fits-now 100, "
            "nodeplacement/gpu-binpack 9); runner-up dgx-b (score 100 = nodeavailability/fits-now 100)") in out


def test_an_evicted_pod_names_the_job_it_made_room_for_and_the_queues_compared(
        capsys: pytest.CaptureFixture[str]) -> None:
    out = _explain(capsys, "default/vision-sweep-7", RECLAIM)
    assert out.startswith("pod default/vision-sweep-7 (job vision-sweep)")
    assert "cycle 1 reclaim: pod vision-sweep-7 on dgx-b evicted for default/llm-finetune, allowed by " \
           "proportion/reclaim-within-fair-share" in out
    assert "vision uses <GPU: 16, CPU: 64 (cores), memory: 256 (GB)> with a quota of <GPU: 8" in out


def test_a_gang_that_falls_short_says_how_many_pods_fit(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario = tmp_path / "gang.yaml"
    scenario.write_text("actions: [allocate]\nqueues: [{name: q, deserved: {gpu: 4}}]\n"
                        "nodes: [{name: n0, gpus: 2, gpuMemoryMiB: 40000, cpuMillis: 8000, memoryBytes: 64000000000, maxPods: 110}]\n"
                        "jobs: [{name: g, queue: q, minAvailable: 3, perTask: {gpus: 1},\n"
                        "        tasks: [{state: Pending}, {state: Pending}, {state: Pending}]}]\n")
    out = _explain(capsys, "g", str(scenario))
    assert "pending: its gang needs 3 pods and only 2 fit" in out
    assert "pod g-2 found no node: 1 of 1 nodes rejected (1 node lacked free resources (closest: node n0 lacks 1 GPU))" \
           in out


def test_the_answer_comes_from_an_audit_log_file_as_well(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "audit.jsonl"
    main(["simulate", "--audit", str(log), SMALL])
    capsys.readouterr()
    from_file = _explain(capsys, "detector-sweep", "--audit", str(log))
    assert from_file == _explain(capsys, "detector-sweep", SMALL)


def test_json_output_carries_the_summary_the_rules_and_the_queue_numbers(capsys: pytest.CaptureFixture[str]) -> None:
    answer = json.loads(_explain(capsys, "detector-sweep", SMALL, "--output", "json"))
    assert answer["status"] == "pending" and answer["queue"] == "vision"
    assert answer["rules"][0] == "proportion/queue-limit-and-quota"
    assert answer["queueNumbers"] == {"name": "vision", "allocatedGpus": 4.0, "deservedGpus": 8.0,
                                      "fairShareGpus": 10.0, "limitGpus": 10.0, "requestedGpus": 8.0}


def test_a_job_nothing_was_decided_about_is_described_from_the_scenario(capsys: pytest.CaptureFixture[str]) -> None:
    out = _explain(capsys, "resnet-train", SMALL)
    assert "no action decided anything about it; its pods are Running on" in out


@pytest.mark.parametrize(("args", "says"), [
    (["nobody", SMALL], "no job or pod named 'nobody' in the audit records (jobs: default/detector-sweep"),
    (["x"], "explain needs exactly one of --audit FILE or a SCENARIO file"),
    (["x", "--audit", "/nonexistent/audit.jsonl"], "cannot read the audit log"),
])
def test_unknown_names_and_missing_inputs_are_one_line_errors(args: list[str], says: str,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", *args]) == 2
    err = capsys.readouterr().err
    assert says in err and "Traceback" not in err


def test_a_line_that_is_not_a_record_is_named_by_its_number(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    log = tmp_path / "audit.jsonl"
    log.write_text('{"kind": "outcome", "job": "j"}\nnot json\n')
    assert main(["explain", "j", "--audit", str(log)]) == 2
    assert f"{log}:2: not a JSON record" in capsys.readouterr().err


LIVE = """name: a snapshot of a live cluster (its jobs and pods are named namespace/name)
actions: [allocate]
queues: [{name: q, deserved: {gpu: 1}}]
nodes: [{name: n0, gpus: 1, gpuMemoryMiB: 40000, cpuMillis: 8000, memoryBytes: 32000000000, maxPods: 110}]
jobs:
  - {name: team/big, namespace: team, queue: q, perTask: {gpus: 2}, tasks: [{name: team/big-0, state: Pending}]}
"""


@pytest.mark.parametrize("asked", ["big", "team/big", "big-0", "team/big-0"])
def test_a_live_clusters_audit_log_answers_for_a_job_or_pod_named_either_way(
        asked: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    scenario, log = tmp_path / "live.yaml", tmp_path / "audit.jsonl"
    scenario.write_text(LIVE)
    main(["simulate", "--audit", str(log), str(scenario)])
    capsys.readouterr()
    out = _explain(capsys, asked, "--audit", str(log))
    who = "pod team/big-0 (job team/big)" if asked.endswith("-0") else "job team/big"
    assert out.startswith(f"{who} in queue q, cycle 1: pending")
