"""Loading policy test suites: a suite that cannot load names the file, line:column and key path,
and nothing of it runs; scenarios come inline, by name or by path; YAML merge keys work."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaipolicy.cli.main import main
from kaipolicy.workflow.suite import SuiteError, find_suites, load_suite

SCENARIO = """\
    actions: [allocate]
    queues: [{name: q, deserved: {gpu: 4}}]
    nodes: [{name: n0, gpus: 4, gpuMemoryMiB: 40000, cpuMillis: 8000, memoryBytes: 64000000000, maxPods: 110}]
    jobs: [{name: j, queue: q, perTask: {gpus: 1}, tasks: [{state: Pending}]}]
"""


def _suite(tmp_path: Path, body: str, name: str = "x_test.yaml") -> Path:
    path = tmp_path / name
    path.write_text(body)
    return path


def test_an_inline_a_named_and_a_file_scenario_all_load(tmp_path: Path) -> None:
    (tmp_path / "cluster.yaml").write_text(SCENARIO.replace("    ", "", 1).replace("\n    ", "\n"))
    path = _suite(tmp_path, f"""\
scenarios:
  base: &base
{SCENARIO.replace("    ", "    ")}tests:
  - name: inline
    scenario:
      <<: *base
      jobs: []
    expect: {{jobs: {{}}}}
  - name: named
    scenario: base
    expect: {{jobs: {{j: {{status: Binding}}}}}}
  - name: by path
    scenario: cluster.yaml
    expect: {{jobs: {{j: {{status: Binding}}}}}}
""")
    suite = load_suite(path)
    assert [t.name for t in suite.tests] == ["inline", "named", "by path"]
    assert suite.tests[0].scenario_doc["jobs"] == [] and suite.tests[1].scenario().jobs[0]["name"] == "j"


@pytest.mark.parametrize(("body", "says"), [
    ("tests:\n  - name: t\n    scenario: {}\n    expect: {jobs: {}}\n    expected: 1\n",
     "x_test.yaml:5:5: tests[0].expected: unknown key 'expected'"),
    ("tests:\n  - name: t\n    scenario: nowhere.yaml\n    expect: {jobs: {}}\n",
     "x_test.yaml:3:15: tests[0].scenario: cannot load scenario 'nowhere.yaml'"),
    (("tests:\n  - name: t\n    scenario: {actions: [allocate], queues: [], nodes: [], jobs: [], bogus: 1}\n"
     "    expect: {jobs: {}}\n"), "x_test.yaml:3 (tests.0.scenario): bogus"),
    ("bundle: {policies: [missing/]}\ntests:\n  - {name: t, scenario: {}, expect: {jobs: {}}}\n",
     "x_test.yaml:1:21: bundle.policies[0]: no such rule file or folder: missing/"),
    (("tests:\n  - name: t\n    scenario: {actions: [allocate], queues: [], nodes: [], jobs: []}\n"
     "    bundle: {default: false}\n    expect: {jobs: {}}\n"),
     "tests[0].bundle: a test may change arguments and modes only"),
    ("tests:\n  - name: t\n    expect: [\n", "x_test.yaml:4:1: malformed YAML"),
    ("tests: []\n", "tests: [] should be non-empty"),
])
def test_a_suite_that_cannot_load_says_where(tmp_path: Path, body: str, says: str) -> None:
    with pytest.raises(SuiteError) as err:
        load_suite(_suite(tmp_path, body))
    assert says in str(err.value)


def test_the_cli_prints_a_bad_suite_without_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _suite(tmp_path, "tests:\n  - name: t\n")
    assert main(["test", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "x_test.yaml" in err and "Traceback" not in err


def test_folders_are_searched_for_test_suites_only(tmp_path: Path) -> None:
    _suite(tmp_path, "tests: []\n", "a_test.yaml")
    _suite(tmp_path, "plugin: p\nrules: []\n", "rules.yaml")
    (tmp_path / "sub").mkdir()
    _suite(tmp_path / "sub", "tests: []\n", "b_test.yml")
    assert [p.name for p in find_suites([str(tmp_path)])] == ["a_test.yaml", "b_test.yml"]
    (tmp_path / "empty").mkdir()
    with pytest.raises(SuiteError, match="no test suites"):
        find_suites([str(tmp_path / "empty")])
