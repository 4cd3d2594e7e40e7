"""Scenario files as a cluster source: load, validate, build a snapshot per cycle, settle.

A loaded `Scenario` keeps the cluster as plain specs; `snapshot()` builds fresh model objects
for one cycle, and `settle()` folds a cycle's outcome back into the specs the way the
scenario format describes (Binding runs, Pipelined and Releasing return to Pending).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kaipolicy import yamlsafe
from kaipolicy.api.job import DEFAULT_SUB_GROUP, Job, PodSet, SubGroupSet, TopologyConstraint
from kaipolicy.api.node import DEFAULT_GPU_MEMORY, Node, Taint
from kaipolicy.api.queue import Quantities, Queue
from kaipolicy.api.resources import Request, Resources
from kaipolicy.api.snapshot import ClusterInfo, Topology
from kaipolicy.api.task import HOLDS_NODE, AffinityTerm, PodAffinity, Requirement, Status, Task, Toleration
from kaipolicy.cache.scenario_checks import warnings as scenario_warnings
from kaipolicy.cache.scenario_paths import elem, keys
from kaipolicy.cache.scenario_schema import content_key, validate_scenario
from kaipolicy.collector import paused_gc
from kaipolicy.errors import ScenarioError, YamlError

PARAM_DEFAULTS: dict[str, Any] = {
    "maxConsolidationPreemptees": 16,
    "allowConsolidatingReclaim": True,
    "useSchedulingSignatures": True,
    "fullHierarchyFairness": True,
    "detailedFitErrors": False,
}


@dataclass
class Scenario:
    """One scenario file, kept as specs so every cycle gets a fresh snapshot."""

    file: str
    doc: dict[str, Any]
    actions: list[str]
    cycles: int
    params: dict[str, Any]
    config: dict[str, Any] | None
    stale_grace_seconds: float
    jobs: list[dict[str, Any]] = field(default_factory=list)
    # carried across cycles: job name -> scenario-clock seconds
    last_start: dict[str, float] = field(default_factory=dict)
    stale_since: dict[str, float] = field(default_factory=dict)
    now: float = 0.0
    # (key path, message): legal but hardly meant (docs/scenarios.md); reports print them
    warnings: list[tuple[str, str]] = field(default_factory=list)
    text: str | None = field(default=None, repr=False)   # the file's text, to place later errors

    def snapshot(self) -> ClusterInfo:
        return _build(self)

    def error(self, path: str, message: str) -> ScenarioError:
        """A ScenarioError at `path` (a rendered key path), with its line when the text is known."""
        place = yamlsafe.positions(self.text, [keys(self.doc, path)])[0] if self.text is not None else None
        return ScenarioError(self.file, path, message, *(place or (0, 0)))

    def settle(self, cluster: ClusterInfo) -> None:
        _settle(self, cluster)


#: What a scenario file may cost (docs/scenarios.md): 32 MiB of UTF-8, 32 levels of nesting, and
#: aliases that add at most 200,000 values in all (a 2 MB scenario holds about 220,000).
LIMITS = yamlsafe.Limits(max_bytes=32 * 2**20, max_depth=32, alias_values=200_000, what="scenario")


def load_scenario(path: str | Path) -> Scenario:
    """Read, parse and validate a scenario file; every refusal is a ScenarioError naming the file
    and the line (and the key path once the YAML has been read)."""
    file = str(path)
    try:
        text = yamlsafe.read_text(path, LIMITS)
        with paused_gc():
            doc = yamlsafe.load(text, file, LIMITS)
    except YamlError as e:
        raise ScenarioError(file, "", e.message, e.line, e.column) from None
    try:
        scn = scenario_from_doc(doc, file)
    except ScenarioError as e:
        if e.line:
            raise
        place = yamlsafe.positions(text, [keys(doc, e.path)])[0] if doc is not None else None
        raise ScenarioError(file, e.path, e.message, *(place or (1, 1))) from None
    scn.text = text
    if scn.warnings:
        places = yamlsafe.positions(text, [keys(doc, path) for path, _ in scn.warnings])
        scn.warnings = [(f"{path} (line {place[0]})" if place else path, message)
                        for (path, message), place in zip(scn.warnings, places, strict=True)]
    return scn


def scenario_from_doc(doc: Any, file: str = "<scenario>", validate: bool = True) -> Scenario:
    """`validate=False` is for documents a trusted producer built (the live cluster source, every
    cycle): the schema check costs about twice the build on a large cluster."""
    with paused_gc():   # (everything it makes stays alive until it returns)
        return _from_doc(doc, file, validate)


def _from_doc(doc: Any, file: str, validate: bool) -> Scenario:
    if validate:
        validate_scenario(doc, file)
    scn = scenario_settings(doc, file)
    scn.jobs = _copied(doc.get("jobs") or [])
    for j in scn.jobs:
        if j.get("lastStartMinutesAgo") is not None:
            scn.last_start[j["name"]] = -60.0 * float(j["lastStartMinutesAgo"])
        if j.get("staleSeconds") is not None:
            scn.stale_since[j["name"]] = -float(j["staleSeconds"])
    # Build the first snapshot once now, so that a cluster the model cannot hold is refused at
    # load and an overcommitted node is named before any cycle runs.
    first = _build(scn)
    scn.warnings = scenario_warnings(doc) + _overcommitted(first)
    first.unlink()   # freed now, not left to the collector (see cycle.release)
    return scn


_IMMUTABLE = (str, int, float, bool, type(None))


def _copied(value: Any) -> Any:
    """A copy of parsed scenario data that settling may change: every mapping and list copied,
    numbers and text shared, anything else deep-copied. Unlike copy.deepcopy it keeps no record
    of what it copied (about twice as fast on a large scenario), so two places that held one
    mapping get a copy each, which settling then changes one by one."""
    kind = type(value)
    if kind is dict:
        return {k: _copied(v) for k, v in value.items()}
    if kind is list:
        return [_copied(v) for v in value]
    if kind in _IMMUTABLE:
        return value
    return copy.deepcopy(value)


def scenario_settings(doc: dict[str, Any], file: str = "<scenario>") -> Scenario:
    """The document's settings (actions, cycles, params, config, grace period) without its jobs:
    for a caller that has its snapshot already (the live source's delta builds it)."""
    params = dict(PARAM_DEFAULTS)
    params.update(doc.get("params") or {})
    return Scenario(file=file, doc=doc, actions=list(doc["actions"]), cycles=int(doc.get("cycles", 1)),
                    params=params, config=doc.get("config"),
                    stale_grace_seconds=float(doc.get("staleGracePeriodSeconds", 0)))


def _overcommitted(cluster: ClusterInfo) -> list[tuple[str, str]]:
    """Nodes whose pods hold more than they have. Kept, as the reference keeps them (its node
    accounting goes negative and nothing new fits until pods leave), but said out loud."""
    out = []
    for node in cluster.nodes.values():
        free = node.idle.plus(node.releasing)
        over = [f"{what} {-amount:g} over" for what, amount in
                (("cpuMillis", free.cpu), ("memoryBytes", free.memory), ("pods", free.pods)) if amount < -1e-9]
        devices = node.used_gpus_total()
        if devices > node.allocatable.gpus + 1e-9:
            over.append(f"GPUs {devices} in use of {node.allocatable.gpus:g}")
        over.extend(f"GPU group {g!r} {used} MiB of {node.gpu_memory}" for g, used in node.shared_used.items()
                    if used > node.gpu_memory)
        over.extend(f"{name} {-n:g} over" for name, n in free.mig.items() if n < -1e-9)
        if over:
            message = (f"the pods on node {node.name!r} hold more than it has ({'; '.join(over)}): "
                       "nothing new fits there until pods leave")
            out.append((elem("nodes", {"name": node.name}, node.index), message))
    return out


# ---- building one snapshot ------------------------------------------------------------------
def _quantities(spec: dict[str, Any] | None, default: float, gpu_default: float | None = None) -> Quantities:
    spec = spec or {}
    gpu = spec.get("gpu", default if gpu_default is None else gpu_default)
    return Quantities(cpu=float(spec.get("cpu", default)), memory=float(spec.get("memory", default)),
                      gpu=float(gpu))


def _queue(spec: dict[str, Any], parent: str | None) -> Queue:
    return Queue(
        uid=spec["name"], name=spec["name"], parent=parent, priority=int(spec.get("priority", 100)),
        deserved=_quantities(spec.get("deserved"), -1.0, 0.0),
        limit=_quantities(spec.get("limit"), -1.0),
        over_quota_weight=_quantities(spec.get("overQuotaWeight"), 1.0),
        created=int(spec.get("creationOrder", 0)),
        preempt_min_runtime=_seconds(spec.get("preemptMinRuntimeSeconds")),
        reclaim_min_runtime=_seconds(spec.get("reclaimMinRuntimeSeconds")),
    )


def _seconds(value: Any) -> float | None:
    return None if value is None else float(value)


def queues_model(doc: dict[str, Any]) -> dict[str, Queue]:
    queues: dict[str, Queue] = {}
    departments = doc.get("departments")
    if departments is None and doc.get("defaultDepartment", True):
        departments = [{"name": "default", "deserved": {"gpu": -1, "cpu": -1, "memory": -1}}]
        default_parent: str | None = "default"
    else:
        default_parent = None
    for d in departments or []:
        queues[d["name"]] = _queue(d, d.get("parent"))
    for q in doc.get("queues") or []:
        parent = q.get("parent", default_parent)
        queues[q["name"]] = _queue(q, parent)
    for q in queues.values():
        if q.parent and q.parent in queues:
            queues[q.parent].children.append(q.uid)
    return queues


def node_model(spec: dict[str, Any], index: int) -> Node:
    """The node of one scenario node spec (no tasks yet), at row `index` of the node table."""
    labels = {str(k): str(v) for k, v in (spec.get("labels") or {}).items()}
    strategy = spec.get("migStrategy", "none")
    mig = {k: float(v) for k, v in (spec.get("mig") or {}).items()}
    gpus = 0.0 if strategy == "mixed" else float(spec.get("gpus", 0))
    enabled_label = labels.get("node-role.kubernetes.io/mig-enabled")
    mig_enabled = enabled_label.lower() == "true" if enabled_label is not None else bool(mig)
    synced = bool(spec.get("gpuMemorySynced", True))
    memory = int(spec.get("gpuMemoryMiB", DEFAULT_GPU_MEMORY)) if synced else DEFAULT_GPU_MEMORY
    label_strategy = labels.get("nvidia.com/mig.strategy", "")
    return Node(
        name=spec["name"],
        allocatable=Resources(float(spec.get("cpuMillis", 0)), float(spec.get("memoryBytes", 0)), gpus,
                              float(spec.get("maxPods", 110)), mig),
        labels=labels, gpu_memory=memory, gpu_memory_synced=synced, mig_enabled=mig_enabled,
        mig_strategy=(label_strategy if label_strategy in ("single", "mixed") else "none") if mig_enabled
        else "none",
        unschedulable=bool(spec.get("unschedulable", False)),
        taints=tuple(Taint(t["key"], str(t.get("value", "")), t.get("effect", "NoSchedule"))
                     for t in spec.get("taints") or ()),
        conditions=tuple(spec.get("conditions") or ()), other_pods=_other_pods(spec.get("otherPods")),
        index=index,
    )


def _other_pods(spec: dict[str, Any] | None) -> Resources | None:
    if not spec:
        return None
    return Resources(float(spec.get("cpuMillis", 0)), float(spec.get("memoryBytes", 0)),
                     float(spec.get("gpus", 0)), float(spec.get("count", 0)))


def _requirements(specs: list[dict[str, Any]] | None) -> tuple[Requirement, ...]:
    return tuple(Requirement(r["key"], r["operator"], tuple(str(v) for v in r.get("values") or ()))
                 for r in specs or ())


_NO_CONSTRAINTS: dict[str, Any] = {"node_selector": (), "affinity_terms": (), "tolerations": ()}


def _node_constraints(spec: dict[str, Any]) -> dict[str, Any]:
    """Task fields from the optional nodeSelector, requiredNodeAffinity and tolerations keys."""
    if not (spec.get("nodeSelector") or spec.get("requiredNodeAffinity") or spec.get("tolerations")):
        return _NO_CONSTRAINTS    # most pods have none: the same empty tuples, read-only
    return {
        "node_selector": tuple(sorted((str(k), str(v)) for k, v in (spec.get("nodeSelector") or {}).items())),
        "affinity_terms": tuple(AffinityTerm(_requirements(t.get("matchExpressions")), _requirements(t.get("matchFields")))
                                for t in spec.get("requiredNodeAffinity") or ()),
        "tolerations": tuple(Toleration(t.get("key", ""), t.get("operator", "Equal"), str(t.get("value", "")),
                                        t.get("effect", "")) for t in spec.get("tolerations") or ()),
    }


def _request(per_task: dict[str, Any], override: dict[str, Any] | None) -> Request:
    r = dict(per_task or {})
    r.update(override or {})
    devices = r.get("gpuDevices")
    return Request.build(cpu=float(r.get("cpuMillis", 0)), memory=float(r.get("memoryBytes", 0)),
                         gpus=float(r.get("gpus", 0)), gpu_memory=int(r.get("gpuMemoryMiB", 0)),
                         devices=int(devices) if devices is not None else None, mig=r.get("mig"))


#: Job requests read so far, by their spec's content key (see _job_request).
_JOB_REQUESTS: dict[Any, Request] = {}
JOB_REQUESTS_KEPT = 4096


def _job_request(per_task: dict[str, Any]) -> Request:
    """_request of a job's `perTask` with no override, read once per distinct spec: a large
    cluster's thousands of jobs ask a few dozen requests. Specs are told apart as the schema
    check tells parts apart (`content_key`: the values' types too, so 1 and 1.0, which build
    requests that print otherwise, differ); one holding a mapping (MIG slices) is read every time."""
    key = content_key(per_task)
    if key is None:
        return _request(per_task, None)
    known = _JOB_REQUESTS.get(key)
    if known is None:
        if len(_JOB_REQUESTS) >= JOB_REQUESTS_KEPT:
            _JOB_REQUESTS.clear()
        known = _JOB_REQUESTS[key] = _request(per_task, None)
    return known


def _constraint(spec: dict[str, Any] | None) -> TopologyConstraint | None:
    if not spec or not spec.get("topology"):
        return None
    return TopologyConstraint(spec["topology"], spec.get("requiredLevel", "") or "",
                              spec.get("preferredLevel", "") or "")


def _sub_groups(spec: dict[str, Any], n_tasks: int) -> tuple[SubGroupSet, dict[str, PodSet]]:
    root = SubGroupSet("", _constraint(spec.get("topologyConstraint")))
    groups = spec.get("subGroups")
    if not groups:
        ps = PodSet(DEFAULT_SUB_GROUP, int(spec.get("minAvailable", n_tasks)), parent=root)
        root.pod_sets.append(ps)
        return root, {ps.name: ps}
    parents = {g.get("parent") for g in groups if g.get("parent")}
    sets: dict[str, SubGroupSet] = {"": root}
    pod_sets: dict[str, PodSet] = {}
    for g in groups:
        if g["name"] in parents:
            sets[g["name"]] = SubGroupSet(g["name"], _constraint(g.get("topology")))
        else:
            pod_sets[g["name"]] = PodSet(g["name"], max(int(g.get("minAvailable", 1)), 1),
                                         _constraint(g.get("topology")))
    for g in groups:
        parent = sets[g.get("parent") or ""]
        if g["name"] in sets:
            child = sets[g["name"]]
            child.parent = parent
            parent.groups.append(child)
        else:
            ps = pod_sets[g["name"]]
            ps.parent = parent
            parent.pod_sets.append(ps)
    return root, pod_sets


_STATUS = {s.value: s for s in Status}


#: The keys of a pod spec that needs no more than its job gives (most pods of a large cluster).
_PLAIN_TASK_KEYS = frozenset({"name", "state", "node"})


def _task(job: dict[str, Any], index: int, spec: dict[str, Any], created: float, shared: Request) -> Task:
    name = spec.get("name") or f"{job['name']}-{index}"
    state = _STATUS.get(spec["state"]) or Status(spec["state"])
    if spec.keys() <= _PLAIN_TASK_KEYS:
        # what the full reading below gives such a pod, without asking for every other key
        return Task(uid=name, name=name, namespace=job.get("namespace", "default"), job=job["name"],
                    request=shared, status=state, node=spec.get("node", "") or "", created=created, order=index)
    aff = spec.get("podAffinity")
    labels = {str(k): str(v) for k, v in (spec.get("labels") or {}).items()}
    if spec.get("priority") is not None:
        labels.setdefault("kai.scheduler/task-priority", str(int(spec["priority"])))
    return Task(
        uid=name, name=name, namespace=job.get("namespace", "default"), job=job["name"],
        request=_request(job.get("perTask") or {}, spec["resources"]) if spec.get("resources") else shared,
        status=state,
        node=spec.get("node", "") or "", gpu_groups=[str(g) for g in spec.get("gpuGroups") or []],
        sub_group=spec.get("subGroup") or DEFAULT_SUB_GROUP,
        priority=spec.get("priority"), labels=labels,
        node_affinity=tuple(str(v) for v in spec.get("nodeAffinity") or ()),
        pod_affinity=PodAffinity(tuple(sorted((str(k), str(v)) for k, v in (aff.get("labels") or {}).items())),
                                 aff.get("topologyKey"), aff.get("antiTopologyKey")) if aff else None,
        legacy_mig=bool(spec.get("legacyMig", False)), created=created, order=index, **_node_constraints(spec),
    )


def _job(scn: Scenario, order: int, spec: dict[str, Any]) -> Job:
    return job_model(spec, order, scn.now - 60.0 * float(spec.get("createdMinutesAgo", 0)),
                     scn.last_start.get(spec["name"]), scn.stale_since.get(spec["name"]))


def job_model(spec: dict[str, Any], order: int, created: float, last_start: float | None,
              stale_since: float | None) -> Job:
    """The job of one scenario job spec, created at `created` on the scenario clock."""
    tasks_spec = spec.get("tasks") or []
    root, pod_sets = _sub_groups(spec, len(tasks_spec))
    priority = int(spec.get("priority", 50))
    preemptible = spec.get("preemptible")
    job = Job(
        uid=spec["name"], name=spec["name"], namespace=spec.get("namespace", "default"), queue=spec["queue"],
        priority=priority, preemptible=bool(preemptible) if preemptible is not None else priority < 100,
        created=created, root=root, pod_sets=pod_sets, last_start=last_start,
        stale_since=stale_since, deleted=bool(spec.get("deleted", False)), order=order,
    )
    shared = _job_request(spec.get("perTask") or {})   # immutable: one object for the job's plain tasks
    for i, t in enumerate(tasks_spec):
        job.add_task(_task(spec, i, t, created, shared))
    return job


def spec_clock(spec: dict[str, Any], now: float = 0.0) -> tuple[float, float | None, float | None]:
    """A job spec's creation, last start and stale-since times on a scenario clock at `now`, read
    as a loaded scenario reads them."""
    last = spec.get("lastStartMinutesAgo")
    stale = spec.get("staleSeconds")
    return (now - 60.0 * float(spec.get("createdMinutesAgo", 0)), None if last is None else -60.0 * float(last),
            None if stale is None else -float(stale))


def _build(scn: Scenario) -> ClusterInfo:
    doc = scn.doc
    nodes = {n["name"]: node_model(n, i) for i, n in enumerate(doc.get("nodes") or [])}
    jobs = {j["name"]: _job(scn, i, j) for i, j in enumerate(scn.jobs)}
    for job in jobs.values():
        for task in job.tasks.values():
            if task.status in HOLDS_NODE and task.node:
                try:
                    nodes[task.node].add_task(task)
                except ValueError as e:
                    raise ScenarioError(scn.file, f"jobs[{job.name}].tasks[{task.name}]", str(e)) from e
    return ClusterInfo(nodes=nodes, jobs=jobs, queues=queues_model(doc), topologies=topologies_model(doc), now=scn.now)


def topologies_model(doc: dict[str, Any]) -> dict[str, Topology]:
    return {t["name"]: Topology(t["name"], tuple(t["levels"])) for t in doc.get("topologies") or []}


# ---- settling between cycles ------------------------------------------------------------------
def _settle(scn: Scenario, cluster: ClusterInfo) -> None:
    for spec in scn.jobs:
        job = cluster.jobs[spec["name"]]
        if job.last_start is not None:
            scn.last_start[job.name] = job.last_start
        if job.stale_since is not None:
            scn.stale_since[job.name] = job.stale_since
        else:
            scn.stale_since.pop(job.name, None)
        by_name = {t.name: t for t in job.tasks.values()}
        for i, tspec in enumerate(spec.get("tasks") or []):
            task = by_name[tspec.get("name") or f"{spec['name']}-{i}"]
            tspec["state"], node, groups = _settled(task, job.deleted)
            tspec["gpuGroups"] = groups
            if node:
                tspec["node"] = node
            else:
                tspec.pop("node", None)
    scn.now = cluster.now


def _settled(task: Task, deleted: bool) -> tuple[str, str, list[str]]:
    s = task.status
    if s == Status.BINDING:
        return Status.RUNNING.value, task.node, list(task.gpu_groups)
    # A pipelined pod was never bound, and an evicted one comes back as a new pod: neither carries
    # the GPU-group label the binder writes, so both go back to pending without groups.
    if s == Status.PIPELINED or (s == Status.RELEASING and not deleted):
        return Status.PENDING.value, "", []
    # every other state stays as it is, node included (a Pending pod may name a node)
    return s.value, task.node or "", list(task.gpu_groups)
