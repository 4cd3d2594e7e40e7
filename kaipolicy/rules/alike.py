"""Whether a node-order rule scores the other nodes alike for the next pod of a run: a static,
conservative answer.

A run is the pods of one pod set placed one after another onto one node set, nothing else
happening in between. Between two pods of a run with equal requests, what changes is the pod
itself (its name, labels and spec beyond the request), the node the last pod landed on, and the
state that placement moved: the queues' allocations, the pod set's counts, the job's. A rule
whose value at a node reads only that node, the pod's request, the job's and the queue's fixed
fields, its arguments, and functions declared `per_node` gives every other node the same value
for the next pod. A `per_node` function that also compares against the whole node set (its
`scope_key`) does so while what it compares against stays the same.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from kaipolicy.rules import tree as t
from kaipolicy.rules.vocabulary import Vocabulary

#: Task fields that are the request's (equal requests, equal values) or the run's (its pod set).
TASK_FIELDS = frozenset({"gpus", "gpuMemoryMiB", "gpuDevices", "cpuMillis", "memoryBytes", "cpuOnly",
                         "sharedGpu", "migRequest", "subGroup"})
#: Fields that no placement changes, per hook variable; the node's are all its own.
FIXED_FIELDS = {
    "task": TASK_FIELDS,
    "job": frozenset({"name", "namespace", "queue", "priority", "preemptible", "minAvailable"}),
    "queue": frozenset({"name", "priority"}),
    "podSet": frozenset({"name", "minAvailable"}),
    "subGroup": frozenset({"name"}),
}

#: What a set-relative call compares against: the function, then its literal arguments.
Scope = tuple[Callable[..., Any], tuple[Any, ...]]


def carried_scopes(trees: Mapping[str, t.Expr], names: Sequence[str], vocabulary: Vocabulary) -> tuple[Scope, ...] | None:
    """The set-relative calls of a rule that scores the other nodes alike for the next pod of a
    run (empty when it calls none), or None when it may not. The message is not looked at (a
    score has none that counts)."""
    scopes: list[Scope] = []
    for key, tree in trees.items():
        if key != "message" and not _alike(tree, None, set(names), vocabulary, scopes):
            return None
    return tuple(scopes)


def _alike(node: t.Expr, parent: t.Expr | None, names: set[str], vocabulary: Vocabulary, scopes: list[Scope]) -> bool:
    if isinstance(node, t.Ident):
        if node.name == "node" or node.name not in names and node.name != "cluster":
            return True     # the node itself, the arguments, literals' names, a comprehension's variable
        # the pod, its job and the session: only through a fixed field or a per-node function
        if isinstance(parent, (t.Select, t.Has)):
            return parent.field in FIXED_FIELDS.get(node.name, ())
        return isinstance(parent, t.Call) and parent.function in vocabulary.functions \
            and vocabulary.functions[parent.function].per_node
    if isinstance(node, t.Call) and node.function in vocabulary.functions:
        spec = vocabulary.functions[node.function]
        if not spec.per_node:
            return False
        if spec.scope_key is not None:
            rest = [a for a in node.args if not (isinstance(a, t.Ident) and (a.name in names or a.name == "cluster"))]
            if not all(isinstance(a, t.Literal) for a in rest):
                return False    # compared against a set chosen at run time
            scopes.append((spec.scope_key, tuple(a.value for a in rest if isinstance(a, t.Literal))))
        return all(_alike(a, node, names, vocabulary, scopes) for a in node.args)
    return all(_alike(c, node, names, vocabulary, scopes) for c in node.children())
