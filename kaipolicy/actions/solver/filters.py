"""Cheap checks that drop a scenario before any simulation: could the pending pods fit at all
once every victim of the scenario is gone?

Each filter is built once per partial job and then fed the same, growing scenario; it counts a
victim's GPUs once however many scenarios name it. Kept as in the reference: the idle-GPU check
matches the pending pods, largest first, against only the k nodes with the most free GPUs
(k = number of pending pods), and the topology check only looks at sub-group sets (not pod
sets) that carry a required level.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Hashable, Iterable, Sequence
from typing import Protocol, TypeVar

from kaipolicy.actions.solver.scenario import Scenario
from kaipolicy.actions.solver.views import gpu_room
from kaipolicy.api.job import SubGroupSet
from kaipolicy.api.node import Node
from kaipolicy.api.task import Task
from kaipolicy.builtins import affinity
from kaipolicy.framework.nodetable import NodeTable

K = TypeVar("K", bound=Hashable)


class ScenarioFilter(Protocol):
    name: str

    def accepts(self, scenario: Scenario) -> bool: ...


#: Keep every node's free GPUs in the node table between scenario builders (False: add them up
#: for every partial job; the tests compare both).
FREE_GPUS_KEPT = True


def free_gpus(node: Node) -> float:
    return node.idle_gpus_total() + node.releasing_gpus_total()


def _freed_gpus(task: Task) -> float:
    return (task.accepted or task.request).gpus


def greedy_match(required: Sequence[float], holders: Sequence[K], capacity: Callable[[K], float]) -> bool:
    """First fit, largest requirement first, over holders sorted by capacity (largest first)."""
    taken: dict[K, float] = {}
    for need in required:
        if need == 0:
            return True
        matched = False
        for h in holders:
            cap = capacity(h)
            if cap < need:
                break   # holders are sorted: no later one is big enough either
            if cap - taken.get(h, 0.0) >= need:
                taken[h] = taken.get(h, 0.0) + need
                matched = True
                break
        if not matched:
            return False
    return True


class NewVictims:
    """The scenario's victim pods on a node not counted yet, recorded ones first, each list in
    its order. Both lists only grow, so a call looks at the pods added since the last one (and
    at those that had no node then): the filters cost the same per scenario however many
    victims came before."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        self._read = {"recorded": 0, "potential": 0}
        self._nodeless: dict[str, list[Task]] = {"recorded": [], "potential": []}

    def of(self, scenario: Scenario) -> list[Task]:
        return [*self._new("recorded", scenario.recorded_tasks), *self._new("potential", scenario.potential_tasks)]

    def _new(self, which: str, tasks: list[Task]) -> list[Task]:
        start = self._read[which]
        self._read[which] = len(tasks)
        again, self._nodeless[which] = self._nodeless[which], []
        out: list[Task] = []
        for t in [*again, *tasks[start:]]:
            if not t.node:
                self._nodeless[which].append(t)
            elif t.uid not in self.seen:
                self.seen.add(t.uid)
                out.append(t)
        return out


class IdleGpus:
    """The pending pods' GPUs, matched against the nodes with the most free GPUs after eviction."""

    name = "AccumulatedIdleGpus"

    def __init__(self, scenario: Scenario, nodes: Iterable[Node], table: NodeTable | None = None) -> None:
        self.required = sorted((t.request.gpus for t in scenario.pending_tasks), reverse=True)
        self.k = len(scenario.pending_tasks)
        if table is None or not FREE_GPUS_KEPT:
            self.capacity: dict[str, float] = {n.name: free_gpus(n) for n in nodes}
        else:
            # the table keeps every node's idle and releasing GPUs; their sums are free_gpus'
            idle, releasing = gpu_room(table)
            kept = (idle + releasing).tolist()
            self.capacity = {n.name: kept[n.index] for n in nodes}
        self.top: list[str] = []          # up to k node names, most free GPUs first
        self._keys: list[float] = []      # -capacity of `top`, for bisect
        for name in sorted(self.capacity, key=lambda n: -self.capacity[n])[: self.k]:
            self.top.append(name)
            self._keys.append(-self.capacity[name])
        self.new_victims = NewVictims()

    def _raise(self, node: str, amount: float) -> None:
        if node not in self.capacity:
            return
        self.capacity[node] += amount
        cap = self.capacity[node]
        if node in self.top:
            i = self.top.index(node)
            del self.top[i], self._keys[i]
        elif len(self.top) >= self.k and (not self.top or cap <= self.capacity[self.top[-1]]):
            return
        i = bisect.bisect_left(self._keys, -cap)
        self.top.insert(i, node)
        self._keys.insert(i, -cap)
        if len(self.top) > self.k:
            self.top.pop()
            self._keys.pop()

    def accepts(self, scenario: Scenario) -> bool:
        for t in self.new_victims.of(scenario):
            self._raise(t.node, _freed_gpus(t))
        return greedy_match(self.required, self.top, self.capacity.__getitem__)


class TopologyIdleGpus:
    """Per required topology level: each constrained sub-group set's GPUs must fit in one domain."""

    name = "TopologyAwareIdleGpus"

    def __init__(self, groups: list[SubGroupSet], nodes: Iterable[Node]) -> None:
        self.groups = groups
        keys = {(g.topology.topology, g.topology.required_level) for g in groups if g.topology}
        self.capacity: dict[tuple[str, str, str], float] = {}
        self.domains_of: dict[str, list[tuple[str, str, str]]] = {}
        for n in nodes:
            free = free_gpus(n)
            for topo, level in sorted(keys):
                value = n.labels.get(level, "")
                if not value:
                    continue
                d = (topo, level, value)
                self.capacity[d] = self.capacity.get(d, 0.0) + free
                self.domains_of.setdefault(n.name, []).append(d)
        self.new_victims = NewVictims()

    @staticmethod
    def build(scenario: Scenario, nodes: Iterable[Node]) -> TopologyIdleGpus | None:
        groups = _required_groups(scenario.preemptor.root, [])
        return TopologyIdleGpus(groups, nodes) if groups else None

    def accepts(self, scenario: Scenario) -> bool:
        for t in self.new_victims.of(scenario):
            for d in self.domains_of.get(t.node, ()):
                self.capacity[d] += _freed_gpus(t)
        needs: dict[tuple[str, str], list[float]] = {}
        for g in self.groups:
            assert g.topology is not None
            gpus = sum(t.request.gpus for ps in g.all_pod_sets() for t in ps.tasks.values())
            needs.setdefault((g.topology.topology, g.topology.required_level), []).append(gpus)
        for (topo, level), required in needs.items():
            domains = sorted((d for d in self.capacity if d[0] == topo and d[1] == level),
                             key=lambda d: -self.capacity[d])
            if not greedy_match(sorted(required, reverse=True), domains, self.capacity.__getitem__):
                return False
        return True


def _required_groups(group: SubGroupSet, out: list[SubGroupSet]) -> list[SubGroupSet]:
    if group.topology is not None and group.topology.required_level:
        out.append(group)
    for child in group.groups:
        _required_groups(child, out)
    return out


class NodeAffinities:
    """Every pending pod with a required node affinity has a matching node among the feasible
    nodes and the victims' nodes."""

    name = "AccumulatedNodeAffinities"

    def __init__(self, feasible: Iterable[str], nodes: dict[str, Node]) -> None:
        self.nodes = nodes
        self.usable: set[str] = set(feasible)
        self.seen: set[str] = set()

    @staticmethod
    def build(scenario: Scenario, feasible: Iterable[str], nodes: dict[str, Node]) -> NodeAffinities | None:
        if not any(t.has_node_affinity for t in scenario.pending_tasks):
            return None
        return NodeAffinities(feasible, nodes)

    def accepts(self, scenario: Scenario) -> bool:
        for t in [*scenario.potential_tasks, *scenario.recorded_tasks]:
            if t.uid in self.seen:
                continue
            self.seen.add(t.uid)
            if t.node and t.node in self.nodes:
                self.usable.add(t.node)
        for task in scenario.pending_tasks:
            if task.has_node_affinity and not any(affinity.node_affinity_matches(task, self.nodes[n])
                                              for n in self.usable):
                return False
        return True


def build_filters(scenario: Scenario, feasible: Iterable[str], nodes: dict[str, Node],
                  table: NodeTable | None = None) -> list[ScenarioFilter]:
    out: list[ScenarioFilter] = []
    na = NodeAffinities.build(scenario, feasible, nodes)
    if na is not None:
        out.append(na)
    topo = TopologyIdleGpus.build(scenario, nodes.values())
    if topo is not None:
        out.append(topo)
    out.append(IdleGpus(scenario, nodes.values(), table))
    return out
