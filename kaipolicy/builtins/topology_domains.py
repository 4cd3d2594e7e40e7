"""Domain trees for topology-aware placement, and the per-call accounting on them.

A tree has one domain per distinct label path: a node with labels (zone=z1, rack=r2) sits in
domain "z1" at level `zone` and in "z1.r2" at level `rack`; every labelled node is also in the
root. Nodes missing any level label stay outside the topology.

Every placement call recomputes, for the sub-tree it works in, what is free (idle plus
releasing) and, when the tasks are alike, how many of them each domain could hold. Domains
outside that sub-tree are left "unset" and so never fit. Sibling order is kept on the tree
between calls, as the reference keeps its sorted children.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from kaipolicy.api.node import Node
from kaipolicy.api.resources import Request, RequestType, Resources
from kaipolicy.api.snapshot import Topology
from kaipolicy.api.task import Task

ROOT = "root"
UNSET = -1
MISSING_RESOURCE_RATIO = 1000.0   # a resource the tasks need and the domain has none of


@dataclass(slots=True, eq=False)
class Domain:
    id: str
    level: str
    children: list[Domain] = field(default_factory=list)
    nodes: dict[str, Node] = field(default_factory=dict)
    allocatable_pods: int = UNSET
    free: Resources = field(default_factory=Resources)

    def add_child(self, child: Domain) -> None:
        if all(c.id != child.id for c in self.children):
            self.children.append(child)

    def __repr__(self) -> str:
        return f"Domain({self.level}={self.id})"


@dataclass(slots=True, eq=False)
class Tree:
    topology: Topology
    root: Domain
    by_level: dict[str, dict[str, Domain]]

    @property
    def name(self) -> str:
        return self.topology.name

    def domains(self) -> Iterable[Domain]:
        for level in self.by_level.values():
            yield from level.values()


def in_topology(node: Node, levels: Sequence[str]) -> bool:
    return all(level in node.labels for level in levels)


def build_tree(topology: Topology, nodes: Iterable[Node]) -> Tree:
    root = Domain(ROOT, ROOT)
    by_level: dict[str, dict[str, Domain]] = {ROOT: {ROOT: root}}
    levels = topology.levels
    for node in sorted(nodes, key=lambda n: n.name):
        if not in_topology(node, levels):
            continue
        below: Domain | None = None
        for i in range(len(levels) - 1, -1, -1):
            did = ".".join(node.labels[lv] for lv in levels[:i + 1])
            domain = by_level.setdefault(levels[i], {}).get(did)
            if domain is None:
                domain = by_level[levels[i]][did] = Domain(did, levels[i])
            domain.nodes[node.name] = node
            if below is not None:
                domain.add_child(below)
            below = domain
        if below is not None:
            root.add_child(below)
        root.nodes[node.name] = node
    return Tree(topology, root, by_level)


def lowest_common_domain(tree: Tree, nodes: Iterable[Node], preferred: str) -> Domain | None:
    """The deepest domain holding every in-topology node of `nodes`, never below `preferred`."""
    levels = tree.topology.levels
    valid = [n for n in nodes if in_topology(n, levels)]
    parts: list[str] = []
    for level in levels:
        values = {n.labels[level] for n in valid}
        if len(values) > 1 or not values or "" in values:
            break
        parts.append(values.pop())
        if level == preferred:
            break
    if not parts:
        return tree.root
    return tree.by_level.get(levels[len(parts) - 1], {}).get(".".join(parts))


# ---- accounting ---------------------------------------------------------------------------------
def reset(tree: Tree) -> None:
    for d in tree.domains():
        d.allocatable_pods = UNSET
        d.free = Resources()


def sum_free(domain: Domain) -> Resources:
    if not domain.children:
        for node in domain.nodes.values():
            domain.free.add(node.idle)
            domain.free.add(node.releasing)
        return domain.free
    for child in domain.children:
        domain.free.add(sum_free(child))
    return domain.free


def total_request(tasks: Iterable[Task]) -> Resources:
    out = Resources()
    for t in tasks:
        r = t.request
        out.add(Resources(r.cpu, r.memory, r.gpus, 0.0, {k: float(v) for k, v in r.mig}))
    return out


def alike(tasks: Sequence[Task]) -> bool:
    """All tasks ask for the same kinds of things (all or none want GPUs, same MIG profiles)."""
    with_gpu = sum(1 for t in tasks if t.request.gpus > 0)
    if with_gpu not in (0, len(tasks)):
        return False
    kinds: dict[str, int] = {}
    for t in tasks:
        for name, _ in t.request.mig:
            kinds[name] = kinds.get(name, 0) + 1
    return all(n == len(tasks) for n in kinds.values())


def largest_pod(tasks: Iterable[Task]) -> Request | None:
    """Per-resource maximum over the tasks (None when their GPU fractions differ)."""
    cpu = memory = 0.0
    count, portion = 0, 0.0
    mig: dict[str, int] = {}
    for t in tasks:
        r = t.request
        cpu, memory = max(cpu, r.cpu), max(memory, r.memory)
        if portion and r.portion and portion != r.portion:
            return None
        if r.gpus > Request(count=count, portion=portion).gpus:
            count, portion = r.count, r.portion
        for name, n in r.mig:
            mig[name] = max(mig.get(name, 0), n)
    kind = RequestType.CPU_ONLY
    if mig:
        kind = RequestType.MIG
    elif count and portion >= 1:
        kind = RequestType.REGULAR
    elif count:
        kind = RequestType.FRACTION
    return Request(cpu, memory, count, portion, 0, tuple(sorted(mig.items())), kind)


def _multiples(need: float, have: float) -> int:
    """How many times `need` fits in `have` (need > 0)."""
    n = max(int(have // need), 0)
    while (n + 1) * need <= have:
        n += 1
    while n > 0 and n * need > have:
        n -= 1
    return n


def node_accommodation(node: Node, unit: Request) -> int:
    """How many copies of `unit` the node's idle plus releasing resources take at once, each
    taking a pod slot as well (the reference's test pods ask one pod each)."""
    free = node.non_allocated()
    bounds: list[int] = [_multiples(1.0, free.pods)]
    if unit.cpu > 0:
        bounds.append(_multiples(unit.cpu, free.cpu))
    if unit.memory > 0:
        bounds.append(_multiples(unit.memory, free.memory))
    for name, n in unit.mig:
        bounds.append(_multiples(n, free.mig.get(name, 0.0)))
    if unit.kind == RequestType.REGULAR:
        bounds.append(_multiples(unit.gpus, free.gpus + 1e-9))
    elif unit.kind == RequestType.FRACTION:
        if not node.valid_portion(unit):
            return 0
        groups = sum(1 for g in node.shared_used if node.fits_on_group(unit, g))
        bounds.append((math.floor(free.gpus + 1e-9) + groups) // max(unit.count, 1))
    return min(bounds)


def count_allocatable(domain: Domain, unit: Request, n_tasks: int) -> int:
    if not domain.children:
        if unit.cpu <= 0 and unit.memory <= 0 and unit.count == 0 and not unit.mig:
            domain.allocatable_pods = n_tasks * len(domain.nodes)
        else:
            domain.allocatable_pods = sum(node_accommodation(n, unit) for n in domain.nodes.values())
        return domain.allocatable_pods
    domain.allocatable_pods = sum(count_allocatable(c, unit, n_tasks) for c in domain.children)
    return domain.allocatable_pods


def _cores(milli: float) -> int:
    """CPU as a whole quantity: millicores truncated, then rounded up to cores."""
    return math.ceil(int(milli) / 1000)


def fill_ratio(request: Resources, domain: Domain) -> float:
    """The largest share of the domain's free resources the request would take (> 1: no fit)."""
    if request.cpu <= 0 and request.memory <= 0 and request.gpus <= 0 and not request.mig:
        return 0.0
    free = domain.free
    ratio = 0.0
    if request.gpus > 0:
        ratio = max(ratio, request.gpus / free.gpus if free.gpus else math.inf)
    pairs = [(_cores(request.cpu), _cores(free.cpu)), (int(request.memory), int(free.memory))]
    # a task's MIG count reads as thousandths next to the node's whole counts, as in the reference
    pairs += [(_cores(v), int(free.mig.get(k, 0.0))) for k, v in request.mig.items()]
    for want, have in pairs:
        if want == 0:
            continue
        ratio = max(ratio, MISSING_RESOURCE_RATIO if have == 0 else want / have)
    return ratio


# ---- ordering ---------------------------------------------------------------------------------
def sort_tree(request: Resources, domain: Domain, deepest: str) -> None:
    """Fullest-after-placement child first (ties by id), down to level `deepest`."""
    ratios = {id(c): fill_ratio(request, c) for c in domain.children}
    domain.children.sort(key=lambda c: (-ratios[id(c)], c.id))
    if domain.level == deepest:
        return
    for child in domain.children:
        sort_tree(request, child, deepest)


def bottom_up(root: Domain) -> list[Domain]:
    """Breadth-first levels, deepest level first, each level left to right."""
    levels: list[list[Domain]] = []
    current = [root]
    while current:
        levels.append(current)
        current = [c for d in current for c in d.children]
    return [d for level in reversed(levels) for d in level]


def level_domains(domain: Domain, level: str) -> list[Domain]:
    if domain.level == level:
        return [domain]
    return [d for c in domain.children for d in level_domains(c, level)]


def subtree(domain: Domain) -> Iterable[Domain]:
    yield domain
    for c in domain.children:
        yield from subtree(c)
