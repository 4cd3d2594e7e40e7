"""Topology-aware placement: candidate node sets per topology domain, and a preference score
for nodes by the order of their preferred-level domain.

`subset_nodes` runs for every sub-group set and pod set being placed, with that group's own
constraint (a group without one places on whatever its parent handed down):

* the search starts from the deepest domain holding all candidate nodes (never below the
  preferred level); it must fit the tasks, or the group fails with a "no topology match"
  error;
* its sub-tree is sorted bin-pack style: among siblings, the one the tasks would fill the most
  comes first, ties by domain id;
* candidates are the domains of the preferred level and every level up to the required one
  (to the root without a required level) that can hold the tasks; when the group already has
  running pods and a required level, only domains under required-level domains that hold one;
* they are tried deepest level first, each level in the sorted tree's order.

Whether a domain fits: with alike tasks, how many copies of the largest task its nodes take at
once (idle plus releasing) against the number of tasks; otherwise the summed request against the
domain's free resources.

`preferred_score` gives the nodes of the i-th (of n) preferred-level domain, in the sorted
order, floor(10 * (i + 1) / n) x 10000: the emptier domains, sorted last, score highest. The
scores of a task's pod set, else of its nearest ancestor group that has them, apply; they are
dropped at the start of every job's placement attempt.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from kaipolicy.api.job import DEFAULT_SUB_GROUP, Job, PodSet, TopologyConstraint
from kaipolicy.api.node import Node
from kaipolicy.api.resources import Resources
from kaipolicy.api.task import ACTIVE_ALLOCATED, Task
from kaipolicy.builtins.topology_domains import (
    ROOT,
    UNSET,
    Domain,
    Tree,
    alike,
    bottom_up,
    build_tree,
    count_allocatable,
    fill_ratio,
    largest_pod,
    level_domains,
    lowest_common_domain,
    reset,
    sort_tree,
    subtree,
    sum_free,
    total_request,
)

TREES = ("topology", "trees")
SCORES = ("topology", "scores")
TOPOLOGY_SCORE = 10000.0   # the reference's score tier for topology


def subset_nodes(ssn: Any, with_args: Any, job: Job, group: Any, pod_sets: Any, tasks: Any,
                 nodes: list[Node]) -> list[list[Node]]:
    constraint: TopologyConstraint | None = getattr(group, "topology", None)
    if constraint is None or not constraint.topology:
        return [nodes]
    tree = trees(ssn).get(constraint.topology)
    if tree is None:
        job.add_fit_error(f"Requested topology {constraint.topology} does not exist")
        return []
    tasks = list(tasks)
    if not tasks:
        return [nodes]

    domain = lowest_common_domain(tree, nodes, constraint.preferred_level)
    if domain is None:
        return []
    reset(tree)
    sum_free(domain)
    if alike(tasks):
        unit = largest_pod(tasks)
        if unit is None:   # different GPU fractions: the reference gives up on the group
            return []
        count_allocatable(domain, unit, len(tasks))
    request = total_request(tasks)
    if domain_misfit(request, len(tasks), domain) is not None:
        where = "the cluster" if domain.level == ROOT else domain.id
        job.add_fit_error(_no_match(job, group, tree, f"not enough resources in {where} to allocate the job"))
        return []

    deepest = constraint.preferred_level or constraint.required_level
    if deepest:
        sort_tree(request, domain, deepest)
    if constraint.preferred_level:
        ssn.cache.setdefault(SCORES, {})[group.name] = node_scores(domain, constraint.preferred_level)

    levels = relevant_levels(tree, constraint)
    if levels is None:   # a level the topology lacks: a configuration error, no fit error
        return []
    found = _allocatable_domains(job, group, pod_sets, request, len(tasks), tree, levels)
    rank = {id(d): i for i, d in enumerate(bottom_up(tree.root))}
    found.sort(key=lambda d: rank.get(id(d), len(rank)))
    return [[n for n in nodes if n.name in d.nodes] for d in found]


def preferred_score(ssn: Any, task: Task, job: Job, node: Node) -> float:
    scores = ssn.cache.get(SCORES)
    if not scores:
        return 0.0
    group: Any = job.pod_sets.get(task.sub_group)
    while group is not None:
        table = scores.get(group.name)
        if table is not None:
            return float(table.get(node.name, 0.0))
        group = group.parent
    return 0.0


def scores_kept(ssn: Any) -> bool:
    """Whether the job being placed has preferred-domain scores (without them every node scores 0)."""
    return bool(ssn.cache.get(SCORES))


def pre_job_allocation(ssn: Any, job: Job) -> None:
    ssn.cache[SCORES] = {}


# ---- pieces ------------------------------------------------------------------------------------
def trees(ssn: Any) -> dict[str, Tree]:
    """The session's domain trees, one per topology, built on first use."""
    built: dict[str, Tree] | None = ssn.cache.get(TREES)
    if built is None:
        cluster = ssn.cluster
        built = ssn.cache[TREES] = {name: build_tree(t, cluster.nodes.values())
                                    for name, t in cluster.topologies.items()}
    return built


def relevant_levels(tree: Tree, constraint: TopologyConstraint) -> list[str] | None:
    """Levels whose domains may be candidates: from the preferred (else the required) level up
    to the required one, or to the root without one; None when a named level is missing."""
    required, preferred = constraint.required_level, constraint.preferred_level
    if not required and not preferred:
        return None
    out: list[str] = []
    seen_required = seen_preferred = False
    for level in [*reversed(tree.topology.levels), ROOT]:
        seen_preferred = seen_preferred or level == preferred
        seen_required = seen_required or level == required
        if seen_preferred or seen_required:
            out.append(level)
        if seen_required:
            break
    if (required and not seen_required) or (preferred and not seen_preferred):
        return None
    return out


def node_scores(domain: Domain, preferred: str) -> dict[str, float]:
    ordered = level_domains(domain, preferred)
    out: dict[str, float] = {}
    for i, d in enumerate(ordered):
        score = math.floor((i + 1) / len(ordered) * 10) * TOPOLOGY_SCORE
        for name in d.nodes:
            out[name] = score
    return out


def domain_misfit(request: Resources, n_tasks: int, domain: Domain) -> list[str] | None:
    """None when the domain can hold the tasks, else the short reasons why not."""
    if domain.allocatable_pods != UNSET:
        if domain.allocatable_pods < n_tasks:
            return [(f"node-group {domain.id} can allocate only {domain.allocatable_pods} of {n_tasks} "
                     "required pods")]
        return None
    if fill_ratio(request, domain) <= 1.0:
        return None
    free = domain.free
    why: list[str] = []
    if request.mig:
        why += [f"node-group(s) didn't have enough of mig profile: {name}"
                for name, n in sorted(request.mig.items()) if free.mig.get(name, 0.0) < n]
    elif request.gpus > free.gpus:
        why.append("node-group(s) didn't have enough resources: GPUs")
    if int(request.cpu) > int(free.cpu):
        why.append("node-group(s) didn't have enough resources: CPU cores")
    if request.memory > free.memory:
        why.append("node-group(s) didn't have enough resources: memory")
    return why or [f"node-group {domain.id} didn't have enough resources"]


def _allocatable_domains(job: Job, group: Any, pod_sets: Sequence[PodSet], request: Resources, n_tasks: int,
                         tree: Tree, levels: list[str]) -> list[Domain]:
    required = group.topology.required_level
    pool: dict[str, list[Domain]] = {}
    if required and any(ps.active_allocated > 0 for ps in pod_sets):
        # Running pods pin the group to the required-level domains that hold them.
        for top in tree.by_level.get(required, {}).values():
            if _holds_job_pod(pod_sets, top):
                for d in subtree(top):
                    pool.setdefault(d.level, []).append(d)
    else:
        pool = {level: list(ds.values()) for level, ds in tree.by_level.items()}

    found: list[Domain] = []
    top_reasons: list[str] = []
    for i, level in enumerate(levels):
        for d in sorted(pool.get(level, []), key=lambda d: d.id):
            why = domain_misfit(request, n_tasks, d)
            if why is None:
                found.append(d)
            elif i == len(levels) - 1:
                top_reasons.extend(why)
    if not found:
        for reason in top_reasons:
            job.add_fit_error(reason)
        job.add_fit_error(_no_match(job, group, tree))
    return found


def _holds_job_pod(pod_sets: Sequence[PodSet], domain: Domain) -> bool:
    return any(t.status in ACTIVE_ALLOCATED and t.node in domain.nodes
               for ps in pod_sets for t in ps.tasks.values())


def _no_match(job: Job, group: Any, tree: Tree, *details: str) -> str:
    who = f"job <{job.key}>"
    if group.name and group.name != DEFAULT_SUB_GROUP:
        who += f", subgroup {group.name}"
    tail = f": {', '.join(details)}" if details else ""
    level = group.topology.required_level
    return f"topology {tree.name}, requirement {level} couldn't be satisfied for {who}{tail}"
