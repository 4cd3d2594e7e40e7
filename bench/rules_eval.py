"""Rule evaluation speed: compiled scalar vs celpy's interpreter, and vector mode per node.

Run: .venv/bin/python bench/rules_eval.py  -> prints one JSON object (times in microseconds).
"""

from __future__ import annotations

import json
import sys
import timeit
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import celpy
import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from kaipolicy.rules.expression import compile_text
from kaipolicy.rules.vocabulary import Vocabulary, type_spec

EXPR = ("node.idleGpus >= task.gpus && node.pods < 110 && task.priority > 0 "
        "&& node.name != 'drained' && node.allocatableGpus > 2.0")
NODES = 1000


@dataclass
class Task:
    gpus: float
    priority: int


@dataclass
class Node:
    name: str
    idle_gpus: float
    allocatable_gpus: float
    pods: int


class NodeArrays:
    def __init__(self, nodes: list[Node]) -> None:
        self.name = np.array([n.name for n in nodes])
        self.idle_gpus = np.array([n.idle_gpus for n in nodes])
        self.allocatable_gpus = np.array([n.allocatable_gpus for n in nodes])
        self.pods = np.array([n.pods for n in nodes], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.pods)


def per_call_us(fn: Any, number: int) -> float:
    best = min(timeit.repeat(fn, number=number, repeat=5))
    return best / number * 1e6


def main() -> None:
    vocabulary = Vocabulary({
        "Task": type_spec("Task", {"gpus": "double", "priority": "int"}),
        "Node": type_spec("Node", {"name": "string", "idleGpus": "double", "allocatableGpus": "double",
                                   "pods": "int"}),
    }, {"task": "Task", "node": "Node"})
    compiled = compile_text(EXPR, {"task": "Task", "node": "Node"}, vocabulary, vector_names=frozenset({"node"}))
    assert compiled.vector is not None
    task = Task(2.0, 5)
    nodes = [Node(f"node-{i}", float(i % 9), 8.0, i % 120) for i in range(NODES)]
    node = nodes[7]
    scalar = compiled.scalar
    arrays = NodeArrays(nodes)

    env = celpy.Environment()
    program = env.program(env.compile(EXPR))
    activation = {"task": celpy.json_to_cel({"gpus": task.gpus, "priority": task.priority}),
                  "node": celpy.json_to_cel({"name": node.name, "idleGpus": node.idle_gpus,
                                             "allocatableGpus": node.allocatable_gpus, "pods": node.pods})}
    assert bool(program.evaluate(activation)) == scalar(task, node)

    vector_us = per_call_us(lambda: compiled.vector(task, arrays), 2000)
    figures = {
        "expression": EXPR,
        "compiled_scalar_us_per_eval": round(per_call_us(lambda: scalar(task, node), 200_000), 3),
        "compiled_scalar_loop_us_per_node": round(
            per_call_us(lambda: [scalar(task, n) for n in nodes], 50) / NODES, 3),
        "celpy_interpreted_us_per_eval": round(per_call_us(lambda: program.evaluate(activation), 300), 1),
        "celpy_value_conversion_us_per_node": round(per_call_us(lambda: celpy.json_to_cel(
            {"name": node.name, "idleGpus": node.idle_gpus, "allocatableGpus": node.allocatable_gpus,
             "pods": node.pods}), 2000), 1),
        "vector_us_per_call_1000_nodes": round(vector_us, 2),
        "vector_ns_per_node": round(vector_us * 1000 / NODES, 2),
        "vector_matches_scalar": bool(np.array_equal(compiled.vector(task, arrays),
                                                     np.array([scalar(task, n) for n in nodes]))),
    }
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
