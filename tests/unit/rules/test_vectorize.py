"""Vector mode evaluates a rule for all nodes at once and agrees with scalar mode node by node."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from rules_fixtures import Node, NodeArrays, Task, make_vocabulary

from kaipolicy.rules import EvalError, load_bundle
from kaipolicy.rules.expression import compile_text
from kaipolicy.rules.vocabulary import Vocabulary

EXPRESSIONS = [
    "node.idleGpus < task.gpus",
    "node.idleGpus >= task.gpus && node.pods < 10",
    "node.idleGpus == 0.0 || task.gpus > 4.0",
    "!(node.idleGpus > 2.0)",
    "9.0 * placement.binpackShare(node.idleGpus, task)",
    "node.idleGpus / node.allocatableGpus * 10.0 + task.gpus * 2.0",
    "node.idleGpus > task.gpus ? node.idleGpus - task.gpus : 0.0",
    "task.gpus > 2.0 ? node.idleGpus : node.allocatableGpus",
    "node.pods * 2 + task.priority - 3",
    "node.pods / 3 + node.pods % 3",
    "-node.pods",
    "double(node.pods) * 1.5",
    "int(node.idleGpus) + 1",
    "node.name == 'node-3' || node.name == task.name",
    "task.gpus * 3.0 + 1.0",
    "node.idleGpus / (task.gpus - 1.0)",
]


def random_nodes(rng: random.Random, count: int) -> list[Node]:
    return [Node(f"node-{i}", float(rng.randint(0, 8)) / rng.choice([1, 2, 4]), 8.0, rng.randint(1, 20))
            for i in range(count)]


def scalar_over(fn: Callable[..., Any], task: Task, nodes: list[Node]) -> list[Any]:
    return [fn(task, node) for node in nodes]


@pytest.mark.parametrize("expr", EXPRESSIONS)
def test_vector_mode_equals_scalar_mode_on_random_nodes(expr: str) -> None:
    vocabulary = make_vocabulary()
    variables = {"task": "Task", "node": "Node"}
    compiled = compile_text(expr, variables, vocabulary, vector_names=frozenset({"node"}))
    assert compiled.vector is not None, compiled.note
    rng = random.Random(20240611)
    for _ in range(25):
        nodes = random_nodes(rng, rng.randint(1, 40))
        task = Task("node-1", rng.choice([0.5, 1.0, 2.0, 3.0, 8.0]), rng.randint(-5, 5))
        want = scalar_over(compiled.scalar, task, nodes)
        got = compiled.vector(task, NodeArrays(nodes))
        assert got.shape == (len(nodes),)
        assert np.allclose(got.astype(float), np.array(want, dtype=float), equal_nan=True), expr


def test_a_scalar_result_is_broadcast_to_every_node() -> None:
    compiled = compile_text("task.gpus * 2.0", {"task": "Task", "node": "Node"}, make_vocabulary(),
                            vector_names=frozenset({"node"}))
    assert compiled.vector is not None
    result = compiled.vector(Task(gpus=1.5), NodeArrays([Node(), Node(), Node()]))
    assert result.tolist() == [3.0, 3.0, 3.0]


def test_a_function_without_a_vector_implementation_makes_the_expression_scalar_only() -> None:
    compiled = compile_text("placement.scalarOnly(node.idleGpus) > 1.0", {"task": "Task", "node": "Node"},
                            make_vocabulary(), vector_names=frozenset({"node"}))
    assert compiled.vector is None
    assert "cannot be vectorised" in compiled.note


@pytest.mark.parametrize(("expr", "want"), [
    ("dyn(false) == node.idleGpus", False),        # numpy would call false equal to 0.0
    ("dyn(true) != node.idleGpus", True),
    ("node.idleGpus > 1.0 && dyn(task.gpus > 0.0)", False),
])
def test_a_value_behind_dyn_keeps_the_expression_scalar(expr: str, want: bool) -> None:
    compiled = compile_text(expr, {"task": "Task", "node": "Node"}, make_vocabulary(),
                            vector_names=frozenset({"node"}))
    assert compiled.vector is None, expr
    assert compiled.scalar(Task(gpus=1.0), Node(idle_gpus=0.0)) is want


def test_task_only_parts_are_evaluated_once_per_call() -> None:
    calls: list[float] = []

    def counted(x: Any) -> Any:
        calls.append(1.0)
        return x

    from kaipolicy.rules.vocabulary import FunctionSpec
    base = make_vocabulary()
    vocabulary = Vocabulary(base.types, base.variables,
                            {**base.functions, "f": FunctionSpec("f", ("double",), "double", counted, counted)})
    compiled = compile_text("node.idleGpus + f(task.gpus)", {"task": "Task", "node": "Node"}, vocabulary,
                            vector_names=frozenset({"node"}))
    assert compiled.vector is not None
    compiled.vector(Task(gpus=2.0), NodeArrays([Node(idle_gpus=float(i)) for i in range(100)]))
    assert len(calls) == 1


def test_integer_division_by_zero_in_vector_mode_raises_so_the_caller_falls_back() -> None:
    compiled = compile_text("10 / node.pods", {"task": "Task", "node": "Node"}, make_vocabulary(),
                            vector_names=frozenset({"node"}))
    assert compiled.vector is not None
    with pytest.raises(EvalError):
        compiled.vector(Task(), NodeArrays([Node(pods=1), Node(pods=0)]))


RULES = """
plugin: placement
arguments:
  mode: {type: string, default: binpack, enum: [binpack, spread]}
rules:
  - name: binpack
    hook: nodeOrder
    when: "args.mode == 'binpack'"
    score: "9.0 * placement.binpackShare(node.idleGpus, task)"
  - name: busy
    hook: nodeOrder
    when: "node.pods > 5"
    score: "double(node.pods)"
  - name: fits
    hook: predicate
    deny: "node.idleGpus < task.gpus"
    message: "'node ' + node.name + ' lacks GPUs'"
  - name: labelled
    hook: predicate
    deny: "node.labels['zone'] == 'b'"
"""


def test_rules_from_a_file_agree_between_scalar_and_vector_mode(write: Callable[[str, str], Path]) -> None:
    bundle = load_bundle([write("placement.yaml", RULES)], make_vocabulary())
    instance = bundle.instantiate("placement", {})
    rng = random.Random(7)
    nodes = random_nodes(rng, 30)
    task = Task(gpus=2.0)
    neutral = {"deny": False, "score": 0.0}
    for rule in instance.rules:
        if rule.vector is None:
            continue
        want = [rule.scalar(task, None, node) for node in nodes]
        want = [neutral[rule.rule.form.value] if w is None else w for w in want]
        got = rule.vector(task, None, NodeArrays(nodes))
        assert np.allclose(got.astype(float), np.array(want, dtype=float)), rule.name


def test_a_false_scalar_guard_makes_the_vector_rule_not_apply(write: Callable[[str, str], Path]) -> None:
    bundle = load_bundle([write("placement.yaml", RULES)], make_vocabulary())
    rule = bundle.instantiate("placement", {"mode": "spread"}).rules[0]
    assert rule.vector is not None
    assert rule.vector(Task(), None, NodeArrays([Node()])) is None
    assert rule.scalar(Task(), None, Node()) is None


def test_a_rule_indexing_a_per_node_map_is_scalar_only_with_a_warning(write: Callable[[str, str], Path]) -> None:
    bundle = load_bundle([write("placement.yaml", RULES)], make_vocabulary())
    labelled = bundle.plugins["placement"].rules[3]
    assert not labelled.vectorizable
    assert [d.code for d in bundle.diagnostics] == ["W501"]
