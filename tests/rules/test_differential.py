"""Scalar, vector and the celpy oracle agree on generated expressions (cel-expr-python, Google's
runtime, breaks a tie when celpy and we differ). A fast slice runs by default; set
KAIPOLICY_DIFFERENTIAL=10000 (or any count) for the long run."""

from __future__ import annotations

import math
import os
import random
from typing import Any

import celpy
import numpy as np
import pytest
from cel_expr_python import cel
from rules_fixtures import Node, NodeArrays, Task, make_vocabulary, normalise, same  # tests/unit/rules

from kaipolicy.errors import RuleError
from kaipolicy.rules.expression import compile_text
from tests.rules.generate import Generator

COUNT = int(os.environ.get("KAIPOLICY_DIFFERENTIAL", "400"))
BATCH = 100
TYPES = ["bool", "double", "int", "string"]
VOCABULARY = make_vocabulary()
ERROR = ("error",)
_CEL_ENV = cel.NewEnv(variables={"task": cel.Type.Map(cel.Type.STRING, cel.Type.DYN),
                                 "node": cel.Type.Map(cel.Type.STRING, cel.Type.DYN)})


def world(rng: random.Random) -> tuple[Task, list[Node]]:
    labels = [{}, {"zone": "a"}, {"zone": "b", "tier": "x1"}]
    task = Task(rng.choice(["a", "abc", "node-1", "b"]), rng.choice([0.0, 0.5, 1.0, 8.0]), rng.randint(-3, 3),
                rng.choice(labels))
    nodes = [Node(rng.choice(["node-1", "node-2", "a1", "n", "xyz"]), rng.choice([0.0, 1.0, 2.5, 8.0]),
                  rng.choice([0.0, 8.0]), rng.choice([0, 1, 3, 110]), rng.choice(labels)) for _ in range(4)]
    return task, nodes


def as_map(obj: Task | Node) -> dict[str, Any]:
    if isinstance(obj, Task):
        return {"name": obj.name, "gpus": obj.gpus, "priority": obj.priority, "labels": obj.labels}
    return {"name": obj.name, "idleGpus": obj.idle_gpus, "allocatableGpus": obj.allocatable_gpus,
            "pods": obj.pods, "labels": obj.labels}


def outcome(fn: Any, *args: Any) -> tuple[Any, ...]:
    try:
        return ("value", normalise(fn(*args)))
    except Exception:  # noqa: BLE001 - any failure is the error outcome; its message may differ
        return ERROR


def celpy_outcome(program: Any, activation: dict[str, Any]) -> tuple[Any, ...]:
    result = outcome(program.evaluate, {k: celpy.json_to_cel(v) for k, v in activation.items()})
    return ERROR if result != ERROR and isinstance(result[1], celpy.CELEvalError) else result


def google_outcome(expression: Any, activation: dict[str, Any]) -> tuple[Any, ...]:
    value = expression.eval(data=activation)
    if value.type() == cel.Type.ERROR:
        return ERROR
    return ("value", normalise(value.plain_value()))


def agree(a: tuple[Any, ...], b: tuple[Any, ...]) -> bool:
    return a == b == ERROR or (a != ERROR and b != ERROR and same(a[1], b[1]))


def check(text: str, task: Task, nodes: list[Node]) -> list[str]:
    """Problems found for one expression (empty when every evaluator agrees)."""
    try:
        compiled = compile_text(text, {"task": "Task", "node": "Node"}, VOCABULARY, vector_names=frozenset({"node"}))
    except RuleError as err:
        return [f"{text}: does not compile: {err}"]
    env = celpy.Environment()
    program = env.program(env.compile(text))
    google = _CEL_ENV.compile(text, disable_check=True)
    problems = []
    ours = [outcome(compiled.scalar, task, node) for node in nodes]
    for node, mine in zip(nodes, ours):
        activation = {"task": as_map(task), "node": as_map(node)}
        oracle = celpy_outcome(program, activation)
        if not agree(mine, oracle) and not agree(mine, google_outcome(google, activation)):
            problems.append(f"{text} on {node}: ours {mine}, celpy {oracle}")
    if compiled.vector is not None:
        problems += _vector_problems(text, compiled.vector, task, nodes, ours)
    return problems


def _vector_problems(text: str, vector: Any, task: Task, nodes: list[Node], ours: list[tuple[Any, ...]]) -> list[str]:
    """The vector form gives the scalar form's values, or raises (it does not absorb errors
    element by element, e.g. `true || error`; the session then falls back node by node): never a
    different value."""
    try:
        values = np.asarray(vector(task, NodeArrays(nodes)))
    except Exception:  # noqa: BLE001 - raising means "evaluate node by node", always allowed
        return []
    got = [("value", normalise(v.item() if isinstance(v, np.generic) else v)) for v in values]
    bad = [(g, o) for g, o in zip(got, ours) if o == ERROR or not _close(g[1], o[1])]
    return [f"{text}: vector {g} scalar {o}" for g, o in bad]


def _close(a: Any, b: Any) -> bool:
    if isinstance(a, float) and isinstance(b, float):
        return (math.isnan(a) and math.isnan(b)) or a == b or math.isclose(a, b, rel_tol=1e-12)
    return same(a, b) or (isinstance(a, (bool, int, float)) and type(a) is type(b) and a == b)


@pytest.mark.parametrize("batch", range(max(1, COUNT // BATCH)))
def test_scalar_vector_and_the_oracles_agree_on_generated_expressions(batch: int) -> None:
    rng = random.Random(8000 + batch)
    problems: list[str] = []
    for _ in range(BATCH):
        task, nodes = world(rng)
        text = Generator(rng).expression(rng.choice(TYPES))
        problems += check(text, task, nodes)
    assert problems == [], "\n".join(problems[:10])
