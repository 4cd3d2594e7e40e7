"""Hostile scenario files and hostile rule-file YAML: each is refused in one line naming the file,
line and column, or runs as its case says; none prints a traceback, runs unbounded, takes a
gigabyte, or lets a control character from the file reach the terminal.

The cases are the files in `scenarios/` and `rulefiles-yaml/`, each described in the folder's
`cases.yaml`: add a file and its case there for every new defect found.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from kaipolicy.cli.main import main

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "scenarios"
RULE_FILES = HERE / "rulefiles-yaml"
GIB_IN_KIB = 2**20


def cases(folder: Path) -> dict[str, dict[str, Any]]:
    loaded: dict[str, dict[str, Any]] = yaml.safe_load((folder / "cases.yaml").read_text(encoding="utf-8"))
    return loaded


def in_process(folder: Path) -> list[tuple[str, dict[str, Any]]]:
    """The cases cheap enough to run in the test process even if their limit broke."""
    return [(name, case) for name, case in sorted(cases(folder).items()) if not case.get("bounded")]


def no_control_characters(text: str) -> None:
    bad = sorted({c for c in text if not c.isprintable() and c != "\n"})
    assert not bad, f"control characters reached the output: {bad}"


@pytest.mark.parametrize("folder", [SCENARIOS, RULE_FILES], ids=["scenarios", "rule files"])
def test_every_hostile_file_has_a_case_and_every_case_a_file(folder: Path) -> None:
    files = {p.name for p in folder.glob("*.yaml")} - {"cases.yaml"}
    assert files == set(cases(folder))


# ---------------------------------------------------------------- scenarios
@pytest.mark.parametrize(("name", "case"), in_process(SCENARIOS), ids=[n for n, _ in in_process(SCENARIOS)])
def test_a_hostile_scenario_is_refused_in_one_line_or_runs_as_its_case_says(
        name: str, case: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    path = str(SCENARIOS / name)
    code = main(["simulate", path])
    out, err = capsys.readouterr()
    no_control_characters(out + err)
    if "refused" in case:
        assert (code, out) == (2, "")
        assert err.startswith(f"kaipolicy: {path}:{case['at']}: "), err
        assert case["refused"] in err and err.count("\n") == 1, err
    else:
        assert (code, err) == (0, ""), err
        for fragment in case["runs"]:
            assert fragment in out, out


def test_the_whole_scenario_corpus_runs_in_one_child_process_within_its_bounds() -> None:
    """The costly cases too (each once took minutes and gigabytes): a 120 s guard, a 1 GiB peak."""
    named = sorted(cases(SCENARIOS).items())
    files = [str(SCENARIOS / name) for name, _ in named]
    lines, peak_kib = _child(["simulate", "--output", "jsonl", *files])
    assert [line["scenario"] for line in lines] == files
    for (_, case), line, path in zip(named, lines, files, strict=True):
        if "refused" in case:
            assert line["error"].startswith(f"{path}:{case['at']}: ") and case["refused"] in line["error"], line
        else:
            assert "error" not in line, line["error"]
    assert peak_kib < GIB_IN_KIB


def _child(argv: list[str]) -> tuple[list[Any], int]:
    """Run the CLI in a child process; its JSON output (lines or one document) and peak RSS in KiB."""
    script = ("import resource, sys\nfrom kaipolicy.cli.main import main\nmain(sys.argv[1:])\n"
              "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, file=sys.stderr)\n")
    proc = subprocess.run([sys.executable, "-c", script, *argv], capture_output=True, text=True, timeout=120,
                          check=False)
    assert "Traceback" not in proc.stderr, proc.stderr
    stripped = proc.stdout.strip()
    parsed = json.loads(stripped) if stripped.startswith("[") else [json.loads(x) for x in stripped.splitlines()]
    return parsed, int(proc.stderr.strip().splitlines()[-1])


def test_a_scenario_over_the_size_limit_is_refused_unread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"# padding\n" * (33 * 2**20 // 10))
    assert main(["simulate", str(big)]) == 2
    assert capsys.readouterr().err == f"kaipolicy: {big}: the scenario is larger than 32 MiB, the limit for one document\n"


# ---------------------------------------------------------------- rule files
def lint_json(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[dict[str, Any]]]:
    code = main(["lint", "--format", "json", *argv])
    out, err = capsys.readouterr()
    assert err == ""
    diagnostics: list[dict[str, Any]] = json.loads(out)
    return code, diagnostics


def has(diagnostics: list[dict[str, Any]], file: str, case: dict[str, Any]) -> bool:
    return any(d["file"] == file and d["code"] == case["code"] and f"{d['line']}:{d['column']}" == case["at"]
               and case["message"] in d["message"] for d in diagnostics)


@pytest.mark.parametrize(("name", "case"), in_process(RULE_FILES), ids=[n for n, _ in in_process(RULE_FILES)])
def test_a_hostile_rule_file_gets_its_diagnostic_with_its_place(
        name: str, case: dict[str, Any], capsys: pytest.CaptureFixture[str]) -> None:
    path = str(RULE_FILES / name)
    code, diagnostics = lint_json([path], capsys)
    if case.get("clean"):
        assert (code, diagnostics) == (0, [])
    else:
        assert code == 1 and has(diagnostics, path, case), diagnostics
    main(["lint", path])
    no_control_characters("".join(capsys.readouterr()))


def test_lint_reports_every_hostile_rule_file_of_a_folder_in_one_bounded_run() -> None:
    diagnostics, peak_kib = _child(["lint", "--format", "json", str(RULE_FILES)])
    for name, case in cases(RULE_FILES).items():
        path = str(RULE_FILES / name)
        if case.get("clean"):
            assert not [d for d in diagnostics if d["file"] == path]
        else:
            assert has(diagnostics, path, case), name
    assert peak_kib < GIB_IN_KIB


def test_a_rule_file_over_one_mib_is_refused_unread(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    big = tmp_path / "big.yaml"
    big.write_bytes(b"plugin: big\n" + b"# padding\n" * (2**20 // 10))
    code, diagnostics = lint_json([str(big)], capsys)
    assert code == 1
    assert [(d["code"], d["message"]) for d in diagnostics] == [
        ("E006", "the rule file is larger than 1 MiB, the limit for one document")]
