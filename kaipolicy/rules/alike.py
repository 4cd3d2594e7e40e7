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

The same reading decides whether a rule gives a pod the same value all session long
(`fixed_for_the_pod`, for task-order keys): it reads only the pod's fields that never change.
Fields are allowed by name: a field added to the model is read as moving until it is listed.
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
    walker = _Walker(set(names), vocabulary, {**FIXED_FIELDS, "node": None}, lambda spec: spec.per_node, scopes)
    if all(walker.fixed(tree, None) for key, tree in trees.items() if key != "message"):
        return tuple(scopes)
    return None


#: Pod fields that never change in a session (its spec and request; not its status). A field
#: added to the model is left out until it is put here (a test names every field).
FIXED_POD_FIELDS = frozenset({"name", "namespace", "gpus", "gpuMemoryMiB", "gpuDevices", "cpuMillis",
                              "memoryBytes", "cpuOnly", "sharedGpu", "migRequest", "labels", "nodeAffinity",
                              "legacyMig", "subGroup"})


def fixed_for_the_pod(trees: Mapping[str, t.Expr], names: Sequence[str], vocabulary: Vocabulary) -> bool:
    """Whether a rule's value (the message aside) reads nothing but the pod's fields that never
    change and its arguments: no other hook value, no session, no vocabulary function. Its value
    for a pod is then the same all session long."""
    walker = _Walker(set(names), vocabulary, {"task": FIXED_POD_FIELDS}, lambda spec: False, [])
    return all(walker.fixed(tree, None) for key, tree in trees.items() if key != "message")


#: Node fields that no placement changes in a session: its name, labels, allocatable amounts,
#: GPU kind and memory, schedulability and conditions. A field added to the model is left out
#: until it is put here (a test names every field).
FIXED_NODE_FIELDS = frozenset({"name", "labels", "allocatableGpus", "gpuCount", "allocatableCpuMillis",
                               "allocatableMemoryBytes", "gpuMemoryMiB", "gpuMemorySynced", "unschedulable",
                               "cpuOnly", "migEnabled", "migStrategy", "ready", "notReadyReason"})


def fixed_on_the_node(trees: Mapping[str, t.Expr], names: Sequence[str], vocabulary: Vocabulary) -> bool:
    """Whether a node-level rule's value (the message aside) reads nothing but the pod's and the
    node's fields that never change in a session, its arguments and functions declared `fixed`:
    no job, queue or session. Its value for a pod on a node is then the same all session long."""
    walker = _Walker(set(names), vocabulary, {"task": FIXED_POD_FIELDS, "node": FIXED_NODE_FIELDS},
                     lambda spec: spec.fixed, [])
    return all(walker.fixed(tree, None) for key, tree in trees.items() if key != "message")


class _Walker:
    """Whether an expression reads the hook's values only through the `allowed` fields (None: any
    use of that value), and the session only through functions `function_ok` accepts; collects
    the set-relative calls' scopes."""

    def __init__(self, names: set[str], vocabulary: Vocabulary, allowed: Mapping[str, frozenset[str] | None],
                 function_ok: Callable[[Any], bool], scopes: list[Scope]) -> None:
        self.names, self.vocabulary, self.allowed = names, vocabulary, allowed
        self.function_ok, self.scopes = function_ok, scopes

    def fixed(self, node: t.Expr, parent: t.Expr | None) -> bool:
        names, functions = self.names, self.vocabulary.functions
        if isinstance(node, t.Ident):
            if node.name not in names and node.name != "cluster":
                return True     # the arguments, a namespace, a comprehension's variable
            if node.name in self.allowed and self.allowed[node.name] is None:
                return True     # any use of it
            # only through an allowed field, or as an argument to an accepted function
            if isinstance(parent, (t.Select, t.Has)):
                return parent.field in (self.allowed.get(node.name) or ())
            return isinstance(parent, t.Call) and parent.function in functions \
                and self.function_ok(functions[parent.function])
        if isinstance(node, t.Call) and node.function in functions:
            spec = functions[node.function]
            if not self.function_ok(spec):
                return False
            if spec.scope_key is not None:
                rest = [a for a in node.args if not (isinstance(a, t.Ident) and (a.name in names or a.name == "cluster"))]
                if not all(isinstance(a, t.Literal) for a in rest):
                    return False    # compared against a set chosen at run time
                self.scopes.append((spec.scope_key, tuple(a.value for a in rest if isinstance(a, t.Literal))))
            return all(self.fixed(a, node) for a in node.args)
        return all(self.fixed(c, node) for c in node.children())
