"""`kaipolicy lint`: problems as file:line:col with a caret, exit code 1 on errors, and --format json."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from kaipolicy.cli.main import main
from kaipolicy.rules import lint
from kaipolicy.rules.standard import VOCABULARY

BROKEN = """\
plugin: broken
rules:
  - name: unknown-field
    hook: predicate
    deny: "node.idleGpus < task.gpuz"
    message: "'no'"
  - name: bad-syntax
    hook: nodeOrder
    score: "1.0 +"
"""

WARNED = """\
plugin: warned
rules:
  - name: scalar-only
    hook: predicate
    deny: "node.labels['zone'] == 'a'"
"""


def run(*argv: str) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["lint", *argv])
    return code, out.getvalue()


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / "broken.yaml"
    path.write_text(BROKEN, encoding="utf-8")
    return path


def test_lint_prints_each_problem_at_its_file_line_and_column_with_a_caret(broken: Path) -> None:
    code, out = run(str(broken))
    assert code == 1
    # the expression starts at column 12 of line 5; the unknown field `gpuz` 21 characters in
    assert f"{broken}:5:33: error E302 [unknown-field]" in out
    assert f"{broken}:9:" in out and "E201 [bad-syntax]" in out
    lines = out.splitlines()
    at = next(i for i, line in enumerate(lines) if ":5:33:" in line)
    assert lines[at + 1].strip() == 'deny: "node.idleGpus < task.gpuz"'
    assert lines[at + 2].index("^") == lines[at + 1].index("gpuz")
    assert lines[-1] == "2 problem(s), 2 error(s)"


def test_lint_json_prints_the_same_diagnostics_as_objects(broken: Path) -> None:
    code, out = run(str(broken), "--format", "json")
    assert code == 1
    printed = json.loads(out)
    assert printed == [d.to_dict() for d in lint([broken], VOCABULARY)]
    first = printed[0]
    assert {k: first[k] for k in ("code", "severity", "file", "line", "column", "rule")} == {
        "code": "E302", "severity": "error", "file": str(broken), "line": 5, "column": 33, "rule": "unknown-field"}


def test_lint_exits_0_on_warnings_only(tmp_path: Path) -> None:
    path = tmp_path / "warned.yaml"
    path.write_text(WARNED, encoding="utf-8")
    code, out = run(str(path))
    assert code == 0
    assert "warning W501" in out


def test_lint_exits_0_and_says_so_on_the_default_bundle() -> None:
    code, out = run()
    assert (code, out.strip()) == (0, "no problems")
    code, out = run("--format", "json")
    assert (code, json.loads(out)) == (0, [])


def test_lint_of_a_folder_without_rule_files_is_an_error(tmp_path: Path) -> None:
    code, out = run(str(tmp_path), "--format", "json")
    assert code == 1
    assert [d["code"] for d in json.loads(out)] == ["E005"]
