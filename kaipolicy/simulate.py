"""`kaipolicy simulate`: run a scenario's cycles through run_cycle and report the outcome.

The report is the JSON object of `../shared/scenario-format.md`: every task's final state,
each job's fit error and start time, bind / eviction / pipeline counts per cycle, node GPUs.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kaipolicy.api.job import Job
from kaipolicy.api.snapshot import ClusterInfo
from kaipolicy.api.task import Status
from kaipolicy.cache.scenario_source import Scenario, load_scenario
from kaipolicy.collector import paused_gc
from kaipolicy.cycle import CycleResult, release, run_cycle
from kaipolicy.errors import ConfigError, RuleError, TimeLimitExceeded
from kaipolicy.framework.audit import Audit
from kaipolicy.framework.config import Params, config_from
from kaipolicy.framework.coverage import Coverage
from kaipolicy.framework.outcome import EvictionRecord, Outcome
from kaipolicy.framework.session import Session

WAITING = frozenset({Status.PENDING, Status.GATED})


@dataclass
class SimulationResult:
    scenario: Scenario
    cluster: ClusterInfo
    per_cycle: list[dict[str, Any]]   # counts, and `seconds` per phase (see cycle_seconds)
    evictions: list[tuple[int, EvictionRecord]]   # every cycle's, with its cycle number
    rule_errors: list[tuple[int, Outcome]]         # every cycle's, with its cycle number
    last: Session
    audit: Audit
    seconds: list[float]
    warnings: list[str] = field(default_factory=list)   # warn-mode rules' would-be denials, per cycle

    def report(self) -> dict[str, Any]:
        return _report(self)


def simulate(scenario: Scenario, bundle: Any, audit: Audit | None = None, vectorize: bool = True,
             coverage: Coverage | None = None) -> SimulationResult:
    """Every cycle of the scenario; the audit log is kept only when an enabled `audit` is given."""
    params = Params.from_scenario(scenario.params, scenario.stale_grace_seconds)
    config = config_from(scenario.config, actions=scenario.actions, params=params, where=f"{scenario.file}: config")
    audit = audit if audit is not None else Audit(enabled=False)
    audit.source = scenario.file
    warnings: list[str] = []
    per_cycle: list[dict[str, Any]] = []
    evictions: list[tuple[int, EvictionRecord]] = []
    rule_errors: list[tuple[int, Outcome]] = []
    seconds: list[float] = []
    result = None
    cluster: ClusterInfo | None = None
    # the collector stays paused from each snapshot until its cycle is released (see paused_gc)
    with paused_gc():
        for i in range(scenario.cycles):
            if cluster is not None:
                scenario.settle(cluster)
                scenario.now += 1.0
                assert result is not None
                release(result)   # what is kept of the last cycle is in the lists above
            started = time.perf_counter()
            cluster = scenario.snapshot()
            snapshot = time.perf_counter() - started
            audit.cycle = i + 1
            audit.bundle_hash = getattr(bundle, "hash", "")
            try:
                result = run_cycle(cluster, config, bundle, audit, vectorize, coverage)
            except (ConfigError, RuleError) as e:
                raise scenario.error("config", str(e)) from e
            except TimeLimitExceeded as e:
                raise TimeLimitExceeded(f"{scenario.file}: cycle {i + 1}: {e}") from None
            ssn = result.session
            evictions.extend((i + 1, e) for e in ssn.evictions)
            rule_errors.extend((i + 1, e) for e in ssn.errors)
            per_cycle.append({"binds": len(ssn.binds), "evictions": len(ssn.evictions),
                              "pipelined": len(ssn.pipelines), "seconds": cycle_seconds(snapshot, result)})
            seconds.append(result.seconds)
            warnings.extend(f"cycle {i + 1}: {w}" for w in ssn.warnings)
    assert result is not None and cluster is not None
    return SimulationResult(scenario, cluster, per_cycle, evictions, rule_errors, result.session, audit, seconds,
                            warnings)


def cycle_seconds(snapshot: float, result: CycleResult) -> dict[str, float]:
    """Wall-clock seconds of one cycle: `total`, `snapshot`, `session` (opening it) and one entry
    per action, in the order they ran."""
    phases = {"snapshot": snapshot, "session": result.session_seconds, **result.action_seconds}
    return {"total": round(snapshot + result.seconds, 6), **{k: round(v, 6) for k, v in phases.items()}}


def without_timings(report: dict[str, Any]) -> dict[str, Any]:
    """The report minus what differs from run to run (the seconds), for comparing two runs."""
    out = dict(report)
    out["perCycle"] = [{k: v for k, v in c.items() if k != "seconds"} for c in report["perCycle"]]
    return out


def simulate_file(path: str | Path, bundle: Any, vectorize: bool = True, audit: Audit | None = None,
                  coverage: Coverage | None = None) -> SimulationResult:
    return simulate(load_scenario(path), bundle, audit=audit, vectorize=vectorize, coverage=coverage)


def _report(res: SimulationResult) -> dict[str, Any]:
    cluster = res.cluster
    now = cluster.now
    tasks = []
    for spec in res.scenario.jobs:
        job = cluster.jobs[spec["name"]]
        for t in sorted(job.tasks.values(), key=lambda t: t.order):
            acc = t.accepted if t.accepted is not None else t.request
            tasks.append({"job": job.name, "name": t.name, "status": t.status.value,
                          "node": t.node or None, "gpuGroups": list(t.gpu_groups),
                          "gpus": t.request.gpus,
                          "gpusAccepted": acc.gpus_quota if t.accepted is not None else 0.0,
                          "gpuMemoryMiB": t.request.gpu_memory,
                          "cpuMillis": t.request.cpu, "memoryBytes": t.request.memory})
    jobs = []
    for spec in res.scenario.jobs:
        job = cluster.jobs[spec["name"]]
        # as the reference surfaces them: only for a job with pods still waiting (a running job's
        # errors come from re-placements tried inside the eviction solver's discarded simulations)
        waiting = any(t.status in WAITING for t in job.tasks.values())
        fit = ("; ".join(job.fit_errors) if job.fit_errors else _not_tried(job, cluster)) if waiting else None
        jobs.append({"name": job.name, "queue": job.queue, "fitError": fit,
                     "lastStartSecondsAgo": None if job.last_start is None else round(now - job.last_start, 3)})
    last = res.per_cycle[-1]
    nodes = [{"name": n.name, "idleGpus": n.idle.gpus, "releasingGpus": n.releasing.gpus}
             for n in sorted(cluster.nodes.values(), key=lambda n: n.name)]
    return {"cycles": len(res.per_cycle), "tasks": tasks, "jobs": jobs, "binds": last["binds"],
            "evictions": last["evictions"], "pipelined": last["pipelined"], "perCycle": res.per_cycle,
            "nodes": nodes,
            "ruleErrors": sorted({f"{e.rule}: {e.message}" for _, e in res.rule_errors}),
            # the scenario's own warnings (legal but hardly meant), then warn-mode rules' would-be denials
            "warnings": [f"{path}: {message}" for path, message in res.scenario.warnings] + res.warnings,
            "evictionReasons": [{"cycle": c, "job": e.job, "task": e.task, "node": e.node, "action": e.action,
                                 "message": e.message, **e.reason} for c, e in res.evictions]}


def _not_tried(job: Job, cluster: ClusterInfo) -> str | None:
    """Why a job with pods to place was never tried at all, which leaves no fit error behind."""
    reason = job.not_ready_reason()
    if reason is None and job.has_pending and cluster.queues.get(job.queue) and cluster.queues[job.queue].children:
        reason = f"queue {job.queue} has child queues: only jobs of leaf queues are scheduled"
    return reason
