"""`kaipolicy simulate`: text for people, JSON/JSONL for tools, one bad file does not stop the rest."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from kaipolicy.actions import eviction_loop
from kaipolicy.cli.main import main

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"
EXAMPLE = EXAMPLES / "small-cluster.yaml"


def test_text_output_says_where_pods_went_and_why_others_wait(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", str(EXAMPLE)]) == 0
    out = capsys.readouterr().out
    assert "llm-finetune [nlp]: 2 Binding" in out
    assert "pending because: vision quota has reached the allowable limit of GPUs" in out


def test_jsonl_output_gives_one_line_per_file_and_an_error_line_for_a_bad_one(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nactions: [allocate]\nqueues: []\nnodes: []\njobs: []\nbogus: 1\n")
    assert main(["simulate", "--output", "jsonl", str(bad), str(EXAMPLE)]) == 1
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert lines[0]["scenario"] == str(bad) and "bogus" in lines[0]["error"]
    assert lines[1]["scenario"] == str(EXAMPLE) and lines[1]["binds"] == 3


def test_a_single_bad_file_prints_one_message_and_no_traceback(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nactions: [allocate]\nqueues: []\nnodes: []\njobs: [{name: j, queue: nowhere, tasks: []}]\n")
    assert main(["simulate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "nowhere" in err and "Traceback" not in err


def test_json_output_has_the_documented_fields(capsys: pytest.CaptureFixture[str]) -> None:
    main(["simulate", "--output", "json", str(EXAMPLE)])
    report = json.loads(capsys.readouterr().out)
    assert {"cycles", "tasks", "jobs", "binds", "evictions", "pipelined", "perCycle", "nodes"} <= set(report)
    assert {"job", "name", "status", "node", "gpuGroups", "gpus", "gpusAccepted", "cpuMillis", "memoryBytes"} \
        <= set(report["tasks"][0])


def test_every_cycle_reports_its_seconds_per_phase_and_the_text_prints_the_total(
        capsys: pytest.CaptureFixture[str]) -> None:
    reclaim = EXAMPLE.parent / "reclaim.yaml"
    main(["simulate", "--output", "json", str(reclaim)])
    cycles = json.loads(capsys.readouterr().out)["perCycle"]
    actions = ["allocate", "consolidation", "reclaim", "preempt", "stalegangeviction"]
    assert [list(c["seconds"]) for c in cycles] == [["total", "snapshot", "session", *actions]] * 2
    for c in cycles:
        parts = sum(v for k, v in c["seconds"].items() if k != "total")
        assert all(v >= 0 for v in c["seconds"].values())
        assert parts <= c["seconds"]["total"] + 1e-5 < parts + 0.05    # the phases make up the total
    main(["simulate", str(reclaim)])
    lines = [ln for ln in capsys.readouterr().out.splitlines() if " pipelined in " in ln]
    assert len(lines) == 2 and all(re.fullmatch(r"  cycle \d: .* pipelined in \d+\.\d{3} s", ln) for ln in lines)


def test_the_audit_log_is_written_as_json_lines(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    audit = tmp_path / "audit.jsonl"
    main(["simulate", "--audit", str(audit), str(EXAMPLE)])
    records = [json.loads(line) for line in audit.read_text().splitlines()]
    assert any(r["kind"] == "job" and r["job"] == "detector-sweep" and r["outcome"] == "pending" for r in records)
    assert all(r["bundle"] for r in records)


def test_a_bad_plugin_argument_in_a_scenario_config_names_the_file_plugin_and_argument(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["config"] = {"tiers": [{"plugins": [{"name": "proportion", "arguments": {"kValue": "abc"}}]}]}
    bad = tmp_path / "cfg.yaml"
    bad.write_text(yaml.safe_dump(doc))
    assert main(["simulate", str(bad)]) == 2
    err = capsys.readouterr().err
    assert str(bad) in err and "proportion" in err and "kValue" in err and "Traceback" not in err


def test_an_unknown_plugin_in_a_scenario_config_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["config"] = {"tiers": [{"plugins": [{"name": "nodeplacment"}]}]}
    bad = tmp_path / "cfg.yaml"
    bad.write_text(yaml.safe_dump(doc))
    assert main(["simulate", str(bad)]) == 2
    assert "'nodeplacment' is not in the rule bundle" in capsys.readouterr().err


def test_a_rule_file_with_an_unknown_field_is_refused_with_its_line_and_column(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import shutil

    policies = tmp_path / "policies"
    shutil.copytree(Path(__file__).resolve().parents[3] / "policies", policies)
    rt = policies / "resourcetype.yaml"
    rt.write_text(rt.read_text().replace("task.cpuOnly && node.cpuOnly", "task.cpuOnyl && node.cpuOnly"))
    assert main(["simulate", "--policies", str(policies), str(EXAMPLE)]) == 2
    err = capsys.readouterr().err
    assert "resourcetype.yaml:" in err and "cpuOnyl" in err and "Traceback" not in err


def test_an_audit_path_that_cannot_be_opened_is_refused_before_anything_runs(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["simulate", "--audit", str(tmp_path), str(EXAMPLE)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err == f"kaipolicy: --audit {tmp_path}: cannot append to it: Is a directory\n"


def test_an_unexpected_failure_is_one_line_and_the_other_files_still_run(
        monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    import kaipolicy.cli.simulate as cli

    real = cli.simulate_file

    def flaky(path: str, bundle: object, **options: object) -> object:
        if path == "boom.yaml":
            raise RecursionError("maximum recursion depth exceeded")
        return real(path, bundle, **options)

    monkeypatch.setattr(cli, "simulate_file", flaky)
    assert main(["simulate", "boom.yaml"]) == 70
    err = capsys.readouterr().err
    assert err.startswith("kaipolicy: internal error: RecursionError: maximum recursion depth exceeded (a bug")
    assert err.count("\n") == 1
    assert main(["simulate", "--output", "jsonl", "boom.yaml", str(EXAMPLE)]) == 1
    first, second = (json.loads(line) for line in capsys.readouterr().out.splitlines())
    assert first["error"].startswith("boom.yaml: internal error: RecursionError")
    assert second["binds"] == 3


def test_warnings_are_in_the_json_report_and_on_top_of_the_text(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import yaml

    doc = yaml.safe_load(EXAMPLE.read_text())
    doc["jobs"][1]["minAvailable"] = 3
    path = tmp_path / "gang.yaml"
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    main(["simulate", "--output", "json", str(path)])
    warning = json.loads(capsys.readouterr().out)["warnings"]
    assert len(warning) == 1 and warning[0].startswith("jobs[detector-sweep].minAvailable (line ")
    main(["simulate", str(path)])
    assert capsys.readouterr().out.splitlines()[1] == f"  warning: {warning[0]}"


@pytest.mark.parametrize(("actions", "where", "between_jobs"), [
    ("[allocate]", "in allocate", True),
    ("[reclaim]", "in reclaim", True),
    ("[reclaim]", "in reclaim, trying victims for job", False),    # inside one job's victim search
])
def test_a_scenario_past_its_time_limit_is_an_error_saying_where(
        actions: str, where: str, between_jobs: bool, tmp_path: Path, capsys: pytest.CaptureFixture[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    if not between_jobs:
        monkeypatch.setattr(eviction_loop, "timelimit", SimpleNamespace(check=lambda where: None))
    slow = tmp_path / "slow.yaml"
    slow.write_text(re.sub(r"(?m)^actions: .*$", f"actions: {actions}", (EXAMPLES / "reclaim.yaml").read_text()))
    assert main(["simulate", "--output", "jsonl", "--time-limit", "1e-9", str(slow)]) == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error.startswith(f"{slow}: cycle 1: ran past its time limit of 1e-09 s and was stopped {where}")
    assert main(["simulate", "--output", "jsonl", "--time-limit", "0", str(slow)]) == 0


def test_the_time_limit_must_be_a_number_of_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("-1", "inf", "nan", "soon"):
        with pytest.raises(SystemExit):
            main(["simulate", "--time-limit", bad, str(EXAMPLE)])
        assert "--time-limit" in capsys.readouterr().err
