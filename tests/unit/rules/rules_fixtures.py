"""A small vocabulary (Task, Node, Queue) and node arrays shared by the rule compiler tests."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from celpy import celtypes

from kaipolicy.rules import Bundle, load_bundle
from kaipolicy.rules.standard import VOCABULARY
from kaipolicy.rules.vocabulary import FunctionSpec, Vocabulary, type_spec

POLICIES = Path(__file__).resolve().parents[3] / "policies"


@dataclass
class Task:
    name: str = "t"
    gpus: float = 1.0
    priority: int = 0
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class Node:
    name: str = "n"
    idle_gpus: float = 0.0
    allocatable_gpus: float = 8.0
    pods: int = 0
    labels: dict[str, str] = field(default_factory=dict)


@dataclass
class Queue:
    name: str = "q"
    priority: int = 0
    over_fair_share: bool = False


class NodeArrays:
    """Per-node attributes as numpy arrays, the shape vector mode expects."""

    def __init__(self, nodes: list[Node]) -> None:
        self.name = np.array([n.name for n in nodes])
        self.idle_gpus = np.array([n.idle_gpus for n in nodes], dtype=float)
        self.allocatable_gpus = np.array([n.allocatable_gpus for n in nodes], dtype=float)
        self.pods = np.array([n.pods for n in nodes], dtype=np.int64)
        self._n = len(nodes)

    def __len__(self) -> int:
        return self._n


def binpack_share(idle: Any, task: Task) -> Any:
    return 1.0 - (idle - task.gpus) / 8.0


def make_vocabulary() -> Vocabulary:
    types = {
        "Task": type_spec("Task", {"name": "string", "gpus": "double", "priority": "int",
                                   "labels": "map<string,string>"}),
        "Node": type_spec("Node", {"name": "string", "idleGpus": "double", "allocatableGpus": "double",
                                   "pods": "int", "labels": "map<string,string>"}),
        "Queue": type_spec("Queue", {"name": "string", "priority": "int", "overFairShare": "bool"}),
    }
    functions = {
        "placement.binpackShare": FunctionSpec("placement.binpackShare", ("double", "Task"), "double",
                                               binpack_share, binpack_share),
        "placement.scalarOnly": FunctionSpec("placement.scalarOnly", ("double",), "double", lambda x: x * 2.0),
        "placement.explode": FunctionSpec("placement.explode", ("double",), "double", _explode, _explode),
    }
    return Vocabulary(types, {"task": "Task", "node": "Node", "queue": "Queue", "job": "dyn"}, functions)


def _explode(_: Any) -> Any:
    raise RuntimeError("boom")


# ---- comparing celpy's answers with ours ----------------------------------------------------------
def normalise(value: Any) -> Any:
    """celpy, cel-expr-python, numpy and our own (kinds.UInt) values as plain Python values;
    BoolType subclasses int, so it goes first."""
    if isinstance(value, (celtypes.BoolType, bool, np.bool_)):
        return bool(value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, (bytes, bytearray)):
        return bytes(value)
    if isinstance(value, str):
        return str(value)
    if isinstance(value, (list, tuple)):
        return [normalise(v) for v in value]
    if isinstance(value, dict):
        return {normalise(k): normalise(v) for k, v in value.items()}
    return value


def same(a: Any, b: Any) -> bool:
    """Equal values of the same Python type (so 1, 1.0 and True differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float) and math.isnan(a):
        return math.isnan(b)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return bool(a == b)


def node_order_cases(tmp_path: Path, cases: Mapping[str, str], extra: str = "") -> Bundle:
    """The default bundle and a plugin `cases` of node-order rules (name -> score expression,
    then the `extra` rule lines), with a double argument `weight` and a string `resource`."""
    rules = "\n".join(f'  - {{name: {name}, hook: nodeOrder, score: "{expr}"}}' for name, expr in cases.items())
    text = ("plugin: cases\narguments:\n  weight: {type: double, default: 1.0}\n"
            "  resource: {type: string, default: gpu}\nrules:\n" + rules + "\n" + extra)
    (tmp_path / "cases.yaml").write_text(text)
    return load_bundle([POLICIES, tmp_path], VOCABULARY)
