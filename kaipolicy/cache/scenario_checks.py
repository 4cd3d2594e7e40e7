"""Scenario rules the JSON Schema cannot state: numbers, names that refer to each other,
requests that mean exactly one thing, and warnings for what is legal but hardly meant.

`check_numbers` and `check_references` raise `Problem(path, message)` for the first problem in
document order; `warnings` lists (path, message) pairs. Every rule is in docs/scenarios.md.
"""

from __future__ import annotations

import math
from typing import Any

from kaipolicy.cache.scenario_paths import declared, elem, render

#: Task states that hold a node and therefore must name one.
NODE_HOLDING_STATES = frozenset({"Running", "Releasing", "Pipelined", "Binding", "Bound", "Allocated"})
#: Numbers beyond this lose integer precision as floats (and sums of them overflow nothing).
MAX_NUMBER = 2**53
#: Queue parents and subgroup parents: deeper trees are refused (real ones have 2 to 4 levels).
MAX_TREE_DEPTH = 16
#: cycles x (nodes + pods): a run's work grows with both, and a small file asking for a thousand
#: cycles of a thousand pods would take minutes (1000 cycles of 100 objects, 10 of 10,000 fit).
MAX_CYCLE_WORK = 100_000


class Problem(Exception):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


# ---------------------------------------------------------------- numbers
def check_numbers(doc: Any) -> None:
    """Every number is finite and at most 2^53 in size (NaN, .inf and 400-digit integers are refused)."""
    if _numbers_in_range(doc):
        return
    stack: list[tuple[tuple[Any, ...], Any]] = [((), doc)]
    while stack:
        path, value = stack.pop()
        if isinstance(value, dict):
            stack.extend((path + (k,), v) for k, v in reversed(list(value.items())))
        elif isinstance(value, list):
            stack.extend((path + (i,), v) for i, v in reversed(list(enumerate(value))))
        elif isinstance(value, bool) or not isinstance(value, (int, float)):
            continue
        elif isinstance(value, float) and not math.isfinite(value):
            raise Problem(render(doc, path), f"expected a finite number, got {value}")
        elif abs(value) > MAX_NUMBER:
            if isinstance(value, float):
                shown = f"{value:g}"
            else:
                shown = str(value) if abs(value) < 10**30 else f"a {len(str(abs(value)))}-digit number"
            raise Problem(render(doc, path), f"{shown} is out of range: numbers in a scenario are at most "
                                             f"2^53 ({MAX_NUMBER}) in size")


def _numbers_in_range(doc: Any) -> bool:
    """True when check_numbers surely passes: its walk without the key paths, which only the
    message needs (False sends it to the walk that finds the first problem and names it)."""
    stack = [doc]
    pop, push_all = stack.pop, stack.extend
    while stack:
        value = pop()
        kind = type(value)
        if kind is dict:
            push_all(value.values())
        elif kind is list:
            push_all(value)
        elif kind is float or kind is int:
            if not -MAX_NUMBER <= value <= MAX_NUMBER:   # (NaN compares false)
                return False
        elif kind is not str and kind is not bool and value is not None:
            return False   # (a subclass or another type: the full walk decides)
    return True


# ---------------------------------------------------------------- references
def _unique(items: list[dict[str, Any]], where: str, what: str, seen: dict[str, str]) -> None:
    for i, item in enumerate(items):
        name = item["name"]
        if name in seen:
            raise Problem(f"{where}[{i}].name", f"duplicate {what} name {name!r} (also {seen[name]})")
        seen[name] = f"{where}[{i}]"


def check_references(doc: dict[str, Any]) -> None:
    departments: list[dict[str, Any]] = doc.get("departments") or []
    queues: list[dict[str, Any]] = doc.get("queues") or []
    nodes: list[dict[str, Any]] = doc.get("nodes") or []
    jobs: list[dict[str, Any]] = doc.get("jobs") or []
    topologies: list[dict[str, Any]] = doc.get("topologies") or []

    queue_names: dict[str, str] = {}
    _unique(departments, "departments", "queue", queue_names)
    _unique(queues, "queues", "queue", queue_names)
    if "departments" not in doc and doc.get("defaultDepartment", True):
        queue_names.setdefault("default", "the implicit default department")
    _check_queue_parents(queues, queue_names)

    node_names: dict[str, str] = {}
    _unique(nodes, "nodes", "node", node_names)
    for i, node in enumerate(nodes):
        _check_node(node, elem("nodes", node, i))
    topo_levels: dict[str, list[str]] = {}
    _unique(topologies, "topologies", "topology", {})
    for topo in topologies:
        topo_levels[topo["name"]] = topo["levels"]
    _unique(jobs, "jobs", "job", {})

    task_names: dict[str, str] = {}
    for i, job in enumerate(jobs):
        _check_job(job, elem("jobs", job, i), queue_names, node_names, topo_levels, task_names)
    _check_work(doc.get("cycles", 1), len(nodes) + len(task_names))
    # `expect` names are not cross-checked: the reference's tests name some tasks that do not
    # exist (their check is then vacuous), and the scenarios copy them faithfully.


def _check_work(cycles: int, objects: int) -> None:
    if cycles > 1 and cycles * objects > MAX_CYCLE_WORK:
        raise Problem("cycles", f"{cycles} cycles of {objects} nodes and pods make {cycles * objects:,} node- and "
                                f"pod-cycles, over the limit of {MAX_CYCLE_WORK:,}: run at most "
                                f"{max(1, MAX_CYCLE_WORK // objects)} cycles of this cluster")


def _check_tree(parents: dict[str, str | None], name: str, where: str, what: str, ok: set[str]) -> None:
    """The parent chain from `name` ends at a root, without a loop, within MAX_TREE_DEPTH levels.
    `ok` remembers names already known to be fine, so a long chain is walked once."""
    chain = [name]
    cur = parents.get(name)
    while cur is not None and cur not in ok:
        if cur in chain:
            loop = " -> ".join(chain[chain.index(cur):] + [cur])
            raise Problem(where, f"{what} parents form a cycle: {loop}")
        chain.append(cur)
        cur = parents.get(cur)
    ok.update(chain)
    depth, cur = 1, parents.get(name)
    while cur is not None:
        depth, cur = depth + 1, parents.get(cur)
        if depth > MAX_TREE_DEPTH:
            raise Problem(where, f"{what}s nest more than {MAX_TREE_DEPTH} levels deep")


def _check_queue_parents(queues: list[dict[str, Any]], queue_names: dict[str, str]) -> None:
    parents: dict[str, str | None] = {q["name"]: q.get("parent") for q in queues}
    ok: set[str] = set()
    for i, q in enumerate(queues):
        parent = q.get("parent")
        if parent is None:
            continue
        where = elem("queues", q, i) + ".parent"
        if parent not in queue_names:
            raise Problem(where, f"unknown queue {parent!r} ({declared(queue_names)})")
        _check_tree(parents, q["name"], where, "queue", ok)


def _check_node(node: dict[str, Any], where: str) -> None:
    if node.get("gpus", 0) <= 0 or node.get("gpuMemorySynced", True) is False:
        return
    memory = node.get("gpuMemoryMiB")
    if memory is None:
        raise Problem(where, "a node with GPUs gives 'gpuMemoryMiB' (MiB of one device), or "
                             "'gpuMemorySynced: false' when its GPU memory is not known")
    if memory < 1:
        raise Problem(f"{where}.gpuMemoryMiB", f"expected at least 1 MiB on a node with GPUs, got {memory}")


def _check_topology(tc: dict[str, Any] | None, where: str, topo_levels: dict[str, list[str]]) -> None:
    if tc is None:
        return
    name = tc["topology"]
    if name not in topo_levels:
        raise Problem(f"{where}.topology", f"unknown topology {name!r} ({declared(topo_levels)})")
    for key in ("requiredLevel", "preferredLevel"):
        level = tc.get(key)
        if level is not None and level not in topo_levels[name]:
            levels = ", ".join(topo_levels[name])
            raise Problem(f"{where}.{key}", f"{level!r} is not a level of topology {name!r} ({levels})")


def _check_job(
    job: dict[str, Any],
    jwhere: str,
    queue_names: dict[str, str],
    node_names: dict[str, str],
    topo_levels: dict[str, list[str]],
    task_names: dict[str, str],
) -> None:
    jname = job["name"]
    job_request = _check_request(job.get("perTask") or {}, {}, f"{jwhere}.perTask", "")
    if job["queue"] not in queue_names:
        raise Problem(f"{jwhere}.queue", f"unknown queue {job['queue']!r} ({declared(queue_names)})")
    _check_topology(job.get("topologyConstraint"), f"{jwhere}.topologyConstraint", topo_levels)

    subgroups: list[dict[str, Any]] = job.get("subGroups") or []
    by_name: dict[str, dict[str, Any]] = {}
    _unique(subgroups, f"{jwhere}.subGroups", "subgroup", {})
    for sg in subgroups:
        by_name[sg["name"]] = sg
    parents: dict[str, str | None] = {sg["name"]: sg.get("parent") for sg in subgroups}
    ok: set[str] = set()
    for i, sg in enumerate(subgroups):
        swhere = elem(f"{jwhere}.subGroups", sg, i)
        parent = sg.get("parent")
        if parent is not None:
            if parent not in by_name:
                raise Problem(f"{swhere}.parent",
                              f"unknown subgroup {parent!r} in job {jname!r} ({declared(by_name)})")
            _check_tree(parents, sg["name"], f"{swhere}.parent", "subgroup", ok)
        _check_topology(sg.get("topology"), f"{swhere}.topology", topo_levels)

    for i, task in enumerate(job["tasks"]):
        tname = task.get("name", f"{jname}-{i}")
        twhere = elem(f"{jwhere}.tasks", task, i)
        if tname in task_names:
            how = "" if "name" in task else " (the default name)"
            raise Problem(f"{twhere}.name" if "name" in task else twhere,
                          f"duplicate task name {tname!r}{how} (also {task_names[tname]})")
        task_names[tname] = twhere
        _check_task(task, twhere, job, job_request, by_name, node_names)


def _check_task(
    task: dict[str, Any],
    twhere: str,
    job: dict[str, Any],
    job_request: dict[str, Any],
    subgroups: dict[str, dict[str, Any]],
    node_names: dict[str, str],
) -> None:
    """`job_request`: the job's perTask, checked already: a task without resources of its own asks
    just that."""
    jname = job["name"]
    state = task["state"]
    node = task.get("node")
    override = task.get("resources")
    request = _check_request(job.get("perTask") or {}, override, f"{job_where(twhere)}.perTask",
                             f"{twhere}.resources") if override else job_request
    if node is None and state in NODE_HOLDING_STATES:
        raise Problem(twhere, f"a {state} task must name its 'node'")
    if node is not None and node not in node_names:
        raise Problem(f"{twhere}.node", f"unknown node {node!r} ({declared(node_names)})")
    if state in NODE_HOLDING_STATES and _is_shared(request):
        devices = request.get("gpuDevices") or 1
        groups = task.get("gpuGroups") or []
        if len(groups) != devices:
            raise Problem(f"{twhere}.gpuGroups" if "gpuGroups" in task else twhere,
                          f"a {state} task with a shared GPU request names the GPU group of each of its "
                          f"{devices} device(s) in 'gpuGroups', got {len(groups)}")
    _check_sub_group(task, twhere, jname, subgroups)


def job_where(twhere: str) -> str:
    """`jobs[j].tasks[t]` -> `jobs[j]`."""
    return twhere[: twhere.rindex(".tasks[")]


def _check_sub_group(task: dict[str, Any], twhere: str, jname: str, subgroups: dict[str, dict[str, Any]]) -> None:
    sub = task.get("subGroup")
    if sub is None:
        if subgroups:
            raise Problem(twhere, f"missing 'subGroup': job {jname!r} has subGroups, so every task names one")
        return
    if not subgroups:
        raise Problem(f"{twhere}.subGroup", f"job {jname!r} declares no subGroups")
    if sub not in subgroups:
        raise Problem(f"{twhere}.subGroup",
                      f"unknown subgroup {sub!r} in job {jname!r} ({declared(subgroups)})")
    if "minAvailable" not in subgroups[sub]:
        raise Problem(f"{twhere}.subGroup",
                      f"subgroup {sub!r} has no minAvailable: it only groups other subgroups "
                      "and cannot hold tasks")


# ---------------------------------------------------------------- requests
def _is_shared(r: dict[str, Any]) -> bool:
    """A fraction of a device (of several with gpuDevices), or GPU memory: the GPU-sharing path."""
    gpus = r.get("gpus", 0)
    return r.get("gpuMemoryMiB", 0) > 0 or (gpus > 0 and (gpus < 1 or r.get("gpuDevices") is not None))


def _check_request(per_task: dict[str, Any], override: dict[str, Any], job_where_: str,
                   task_where: str) -> dict[str, Any]:
    """The task's request (the job's perTask with the task's resources over it) means one thing."""
    r = {**per_task, **override}

    def where(key: str) -> str:
        return f"{task_where}.{key}" if key in override else f"{job_where_}.{key}"

    gpus, memory, devices = r.get("gpus", 0), r.get("gpuMemoryMiB", 0), r.get("gpuDevices")
    if 0 < gpus < 0.01:
        # GPU portions are counted in hundredths, as the reference does: less rounds to nothing.
        raise Problem(where("gpus"), f"expected 0 or at least 0.01 GPUs (hundredths), got {gpus}")
    if gpus > 0 and memory > 0:
        raise Problem(where("gpuMemoryMiB"), "a request gives 'gpus' or 'gpuMemoryMiB', not both")
    if any(r.get("mig", {}).values()) and (gpus > 0 or memory > 0):
        raise Problem(where("mig"), "a MIG request names its slices in 'mig' only, without 'gpus' or 'gpuMemoryMiB'")
    if devices is not None and memory <= 0 and not 0 < gpus <= 1:
        raise Problem(where("gpus") if "gpus" in r else where("gpuDevices"),
                      f"with 'gpuDevices', 'gpus' is the fraction of each device: expected more than 0 and "
                      f"at most 1, got {gpus}")
    if devices is None and gpus > 1 and gpus != int(gpus):
        raise Problem(where("gpus"), f"expected a whole number of GPUs above 1, got {gpus} (a fraction is "
                                     "of one device; 'gpuDevices' asks for the same fraction of several)")
    return r


# ---------------------------------------------------------------- warnings
def warnings(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """Legal but hardly meant: gangs larger than their tasks, jobs in queues that have children."""
    out: list[tuple[str, str]] = []
    default_parent = "default" if "departments" not in doc and doc.get("defaultDepartment", True) else None
    parents = {q.get("parent", default_parent) for q in doc.get("queues") or []}
    for i, job in enumerate(doc.get("jobs") or []):
        jwhere = elem("jobs", job, i)
        out.extend(_gang_warnings(job, jwhere))
        if job["queue"] in parents:
            message = (f"queue {job['queue']!r} has child queues: only jobs of leaf queues are scheduled, "
                       "so this job stays pending")
            out.append((f"{jwhere}.queue", message))
    return out


def _gang_warnings(job: dict[str, Any], jwhere: str) -> list[tuple[str, str]]:
    tasks = job["tasks"]
    wanted = [(f"{jwhere}.minAvailable", "job", job.get("minAvailable"), len(tasks))]
    for i, sg in enumerate(job.get("subGroups") or []):
        have = sum(1 for t in tasks if t.get("subGroup") == sg["name"])
        wanted.append((f"{elem(f'{jwhere}.subGroups', sg, i)}.minAvailable", "subgroup", sg.get("minAvailable"), have))
    if len(wanted) > 1:
        wanted = wanted[1:]   # with subGroups the job's own minAvailable is not used
    out = []
    for where, what, need, have in wanted:
        if need is not None and need > have:
            message = (f"minAvailable {need} is more than the {what}'s {have} task(s): the job waits for pods "
                       "that do not exist and is never scheduled")
            out.append((where, message))
    return out
