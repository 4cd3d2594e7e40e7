"""What a rule file can say about itself beyond its rules: structured arguments (lists and
string-keyed maps), `enable: always`, and argument defaults overridden for a whole bundle."""

from __future__ import annotations

from pathlib import Path

import pytest

from kaipolicy.errors import RuleError
from kaipolicy.rules import Bundle, load_bundle
from kaipolicy.rules.arguments import coerce
from kaipolicy.rules.standard import VOCABULARY

QUOTA = """\
plugin: quota
enable: always
arguments:
  quotas:
    type: map<string,map<string,double>>
    default: {team-a: {A100: 2}}
rules:
  - name: per-model
    hook: predicate
    when: "job.queue in args.quotas && 'gpu' in node.labels"
    deny: "node.labels['gpu'] in args.quotas[job.queue] && task.gpus > args.quotas[job.queue][node.labels['gpu']]"
"""


def _load(tmp_path: Path, text: str) -> Bundle:
    (tmp_path / "quota.yaml").write_text(text)
    return load_bundle([tmp_path], VOCABULARY)


@pytest.mark.parametrize(("arg_type", "given", "value"), [
    ("map<string,double>", {"a": 1}, {"a": 1.0}),
    ("map<string,double>", '{"a": 1.5}', {"a": 1.5}),
    ("map<string,map<string,double>>", "{q: {A100: 4}}", {"q": {"A100": 4.0}}),
    ("list<string>", ["x", "y"], ["x", "y"]),
    ("list<int>", "[1, 2]", [1, 2]),
])
def test_structured_arguments_take_yaml_values_or_yaml_text(arg_type: str, given: object, value: object) -> None:
    assert coerce(arg_type, given) == value


@pytest.mark.parametrize(("arg_type", "given", "says"), [
    ("map<string,double>", {"a": "lots"}, "['a']: 'lots' is not a double"),
    ("map<string,double>", [1], "is not a map<string,double>"),
    ("list<int>", "{a: 1}", "is not a list<int>"),
    ("map<string,double>", {1: 2.0}, "map key 1 is not a string"),
])
def test_a_structured_argument_of_the_wrong_shape_says_where(arg_type: str, given: object, says: str) -> None:
    with pytest.raises(ValueError, match=says.replace("[", r"\[").replace("]", r"\]")):
        coerce(arg_type, given)


def test_a_map_argument_is_typed_for_the_rules_and_compiles(tmp_path: Path) -> None:
    bundle = _load(tmp_path, QUOTA)
    plugin = bundle.plugins["quota"]
    assert plugin.enable == "always"
    assert plugin.arguments["quotas"].default == {"team-a": {"A100": 2.0}}


def test_an_argument_type_outside_the_language_is_e106(tmp_path: Path) -> None:
    with pytest.raises(RuleError, match="E106.*type 'map<int,double>'"):
        _load(tmp_path, QUOTA.replace("map<string,map<string,double>>", "map<int,double>"))


def test_with_arguments_replaces_defaults_and_refuses_unknown_names(tmp_path: Path) -> None:
    bundle = _load(tmp_path, QUOTA)
    changed = bundle.with_arguments({"quota": {"quotas": {"team-b": {"H100": 1}}}})
    assert changed.plugins["quota"].arguments["quotas"].default == {"team-b": {"H100": 1.0}}
    assert changed.hash != bundle.hash
    with pytest.raises(RuleError, match="unknown argument 'quota'"):
        bundle.with_arguments({"quota": {"quota": {}}})
    with pytest.raises(RuleError, match="unknown plugin 'nope'"):
        bundle.with_arguments({"nope": {}})
