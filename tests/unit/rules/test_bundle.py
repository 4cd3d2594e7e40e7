"""Bundles load all-or-nothing, carry a content hash, and bind plugin arguments from configuration."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from rules_fixtures import Node, Queue, Task

import kaipolicy.rules
from kaipolicy.errors import RuleError
from kaipolicy.framework.hooks import HOOK_KINDS
from kaipolicy.rules import EvalError, load_bundle
from kaipolicy.rules.schema import load_schema
from kaipolicy.rules.vocabulary import Vocabulary

Write = Callable[[str, str], Path]

PLUGIN = """\
plugin: nodeplacement
description: Prefer nodes that are already busy
arguments:
  gpu: {type: string, default: binpack, enum: [binpack, spread]}
  weight: {type: double, default: 1.0}
  limit: {type: int, default: 4}
  strict: {type: bool, default: false}
rules:
  - name: gpu-binpack
    hook: nodeOrder
    when: "args.gpu == 'binpack' && task.gpus > 0.0"
    score: "args.weight * placement.binpackShare(node.idleGpus, task)"
    weight: 2
  - name: fits
    hook: predicate
    deny: "node.idleGpus < task.gpus || (args.strict && node.pods > args.limit)"
    message: "'node ' + node.name + ' has ' + string(node.idleGpus) + ' idle GPUs'"
  - name: fair-share
    hook: queueOrder
    key: "[queue.overFairShare ? 1 : 0, -queue.priority]"
  - name: cluster-aware
    hook: nodeOrder
    score: "cluster.spare"
  - name: proportion
    hook: subsetNodes
    builtin: topology.subsetNodes
    with: {mode: binpack}
  - name: stamp
    hook: bindRequestMutate
    annotations:
      example.com/node: node.name
      example.com/gpus: string(task.gpus)
"""


def test_the_schema_lists_exactly_the_hook_kinds_of_the_framework() -> None:
    hook_enum = load_schema()["$defs"]["rule"]["properties"]["hook"]["enum"]
    assert hook_enum == [kind.name for kind in HOOK_KINDS]


def test_the_public_surface_is_short_and_importable() -> None:
    assert sorted(kaipolicy.rules.__all__) == [
        "BoundRule", "Bundle", "CompiledPlugin", "CompiledRule", "Diagnostic", "EvalError", "FieldSpec",
        "FunctionSpec", "PluginInstance", "TypeSpec", "Vocabulary", "lint", "load_bundle"]
    for name in kaipolicy.rules.__all__:
        assert getattr(kaipolicy.rules, name) is not None


def test_a_plugin_compiles_into_rules_of_each_form(write: Write, vocabulary: Vocabulary) -> None:
    bundle = load_bundle([write("p.yaml", PLUGIN)], vocabulary)
    plugin = bundle.plugins["nodeplacement"]
    forms = {r.name: r.form.value for r in plugin.rules}
    assert forms == {"gpu-binpack": "score", "fits": "deny", "fair-share": "key", "cluster-aware": "score",
                     "proportion": "builtin", "stamp": "annotations"}
    binpack = plugin.rules[0]
    assert (binpack.line, binpack.weight, binpack.variables) == (9, 2.0, ("task", "job", "node", "args", "cluster"))
    assert plugin.rules[4].builtin == "topology.subsetNodes" and plugin.rules[4].with_args == {"mode": "binpack"}


def test_an_instance_binds_arguments_so_rules_take_only_the_hook_variables(write: Write,
                                                                            vocabulary: Vocabulary) -> None:
    instance = load_bundle([write("p.yaml", PLUGIN)], vocabulary).instantiate("nodeplacement", {"weight": "1.5"})
    assert instance.args == {"gpu": "binpack", "weight": 1.5, "limit": 4, "strict": False}
    binpack, fits, fair, _, _, stamp = instance.rules
    task, node = Task(gpus=2.0), Node(name="n1", idle_gpus=1.0)
    assert binpack.scalar(task, None, node) == pytest.approx(1.5 * (1.0 - (1.0 - 2.0) / 8.0))
    assert fits.scalar(task, None, node) is True
    assert fits.message(task, None, node) == "node n1 has 1 idle GPUs"
    assert fair.scalar(Queue(priority=3, over_fair_share=True), None, []) == [1, -3]
    assert stamp.scalar(task, node) == {"example.com/node": "n1", "example.com/gpus": "2"}


def test_a_false_guard_means_the_rule_does_not_apply(write: Write, vocabulary: Vocabulary) -> None:
    instance = load_bundle([write("p.yaml", PLUGIN)], vocabulary).instantiate("nodeplacement", {"gpu": "spread"})
    assert instance.rules[0].scalar(Task(gpus=1.0), None, Node()) is None


def test_the_unbound_rule_takes_args_and_cluster_last(write: Write, vocabulary: Vocabulary) -> None:
    bundle = load_bundle([write("p.yaml", PLUGIN)], vocabulary)
    args = bundle.instantiate("nodeplacement", {})
    fits = bundle.plugins["nodeplacement"].rules[1]
    assert fits.scalar(Task(gpus=1.0), None, Node(idle_gpus=4.0), args.arg_values, None) is False
    assert fits.scalar(Task(gpus=8.0), None, Node(idle_gpus=4.0), args.arg_values, None) is True


def test_cluster_is_bound_per_cycle(write: Write, vocabulary: Vocabulary) -> None:
    instance = load_bundle([write("p.yaml", PLUGIN)], vocabulary).instantiate("nodeplacement", {})

    class Cluster:
        spare = 3.0

    bound = instance.bind_cluster({"spare": 3.0})
    assert bound.rules_for("nodeOrder")[1].scalar(Task(), None, Node()) == 3.0
    assert instance.bind_cluster(Cluster()).cluster.spare == 3.0


@pytest.mark.parametrize(("arguments", "fragment"), [
    ({"weight": "heavy"}, "argument 'weight': 'heavy' is not a double"),
    ({"gpu": "scatter"}, "argument 'gpu': 'scatter' is not one of"),
    ({"limit": "1.5"}, "argument 'limit'"),
    ({"strict": "maybe"}, "argument 'strict'"),
    ({"colour": "red"}, "unknown argument 'colour'"),
])
def test_a_bad_argument_override_names_the_plugin_and_argument(write: Write, vocabulary: Vocabulary,
                                                              arguments: dict[str, str], fragment: str) -> None:
    bundle = load_bundle([write("p.yaml", PLUGIN)], vocabulary)
    with pytest.raises(RuleError) as info:
        bundle.instantiate("nodeplacement", arguments)
    assert "plugin 'nodeplacement'" in str(info.value) and fragment in str(info.value)


def test_string_arguments_are_parsed_as_the_reference_config_passes_strings(write: Write,
                                                                            vocabulary: Vocabulary) -> None:
    bundle = load_bundle([write("p.yaml", PLUGIN)], vocabulary)
    instance = bundle.instantiate("nodeplacement", {"weight": "2", "limit": "7", "strict": "true"})
    assert instance.args["weight"] == 2.0 and instance.args["limit"] == 7 and instance.args["strict"] is True


def test_an_unknown_plugin_is_an_error(write: Write, vocabulary: Vocabulary) -> None:
    with pytest.raises(RuleError, match="unknown plugin 'nope'"):
        load_bundle([write("p.yaml", PLUGIN)], vocabulary).instantiate("nope", {})


def test_a_run_time_failure_becomes_an_eval_error_naming_the_rule(write: Write, vocabulary: Vocabulary) -> None:
    text = ("plugin: x\nrules:\n  - name: boom\n    hook: nodeOrder\n"
            "    score: placement.explode(node.idleGpus)\n  - name: labels\n    hook: predicate\n"
            "    deny: node.labels['zone'] == 'a'\n")
    instance = load_bundle([write("x.yaml", text)], vocabulary).instantiate("x", {})
    with pytest.raises(EvalError) as info:
        instance.rules[0].scalar(Task(), None, Node())
    assert (info.value.rule, info.value.line) == ("boom", 3) and "boom" in info.value.message
    with pytest.raises(EvalError, match="no such key: 'zone'"):
        instance.rules[1].scalar(Task(), None, Node())


def test_one_bad_file_refuses_the_whole_bundle(write: Write, vocabulary: Vocabulary) -> None:
    good = write("a.yaml", PLUGIN)
    bad = write("b.yaml", "plugin: other\nrules:\n  - name: a\n    hook: predicate\n    deny: task.gpuz\n")
    with pytest.raises(RuleError) as info:
        load_bundle([good, bad], vocabulary)
    assert [d.code for d in info.value.diagnostics] == ["E302"]


def test_a_directory_is_searched_for_yaml_files_and_plugins_must_be_unique(write: Write, vocabulary: Vocabulary,
                                                                          tmp_path: Path) -> None:
    write("a.yaml", PLUGIN)
    write("b.yaml", PLUGIN)
    with pytest.raises(RuleError, match="already defined"):
        load_bundle([tmp_path], vocabulary)


def test_the_hash_depends_on_content_only(write: Write, vocabulary: Vocabulary, tmp_path: Path) -> None:
    other = PLUGIN.replace("nodeplacement", "second")
    a, b = write("a.yaml", PLUGIN), write("b.yaml", other)
    first = load_bundle([a, b], vocabulary).hash
    assert load_bundle([b, a], vocabulary).hash == first
    b.write_text(other.replace("1.0}", "2.0}"), encoding="utf-8")
    assert load_bundle([a, b], vocabulary).hash != first
