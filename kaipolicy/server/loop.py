"""The scheduling loop: every schedule period (counted from the end of the last cycle, as the
reference's wait.Until does), while this replica leads, one cycle: snapshot, policy (swapped here
when a new bundle compiled), run_cycle, write the decisions, metrics, audit lines, one log line.

A cycle that cannot run (the informers have not caught up with this scheduler's own writes yet,
the shard is missing, no rule bundle is usable) is skipped and says why; one that fails is logged
and counted. Nothing a cycle meets stops the loop; only `stop()` does.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Any

from kaipolicy import metrics
from kaipolicy.cache.k8s_source import K8sSource
from kaipolicy.cache.scenario_source import scenario_settings
from kaipolicy.collector import paused_gc
from kaipolicy.cycle import CycleResult, release, run_cycle
from kaipolicy.daemon.leader import LeaderElector
from kaipolicy.errors import KaipolicyError
from kaipolicy.framework.audit import Audit
from kaipolicy.framework.config import Params, SchedulerConfig, config_from
from kaipolicy.framework.session import Session
from kaipolicy.server.commit import Committer, Summary
from kaipolicy.server.decisions import decide
from kaipolicy.server.reload import Policy, Reloader

log = logging.getLogger("kaipolicy.loop")


@dataclass
class Loop:
    source: K8sSource
    reloader: Reloader
    committer: Committer
    period: float
    catch_up_timeout: float
    elector: LeaderElector | None = None
    audit_file: IO[str] | None = None
    audit_source: str = ""
    cycle: int = 0
    stopping: threading.Event = field(default_factory=threading.Event)
    _behind_since: float | None = None
    _last_skip: tuple[str, float] = ("", 0.0)
    _audit_said: dict[tuple[str, str], str] = field(default_factory=dict)

    def leading(self) -> bool:
        return self.elector is None or self.elector.leading()

    def may_write(self) -> bool:
        """A new gang may be written: still leading and not stopping."""
        return self.leading() and not self.stopping.is_set()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                self.once()
            except Exception:
                metrics.CYCLES.labels(result="error").inc()
                log.exception("scheduling cycle %d failed", self.cycle)
            self.stopping.wait(self.period)

    def stop(self) -> None:
        self.stopping.set()

    # ---- one cycle ------------------------------------------------------------------------------
    def once(self) -> None:
        if not self.leading():
            metrics.CYCLES.labels(result="standby").inc()
            return
        if not self._caught_up():
            return
        with paused_gc():   # from the snapshot until the cycle is released (see paused_gc)
            self._cycle()

    def _cycle(self) -> None:
        start = time.perf_counter()
        try:
            assembly, cluster = self.source.cycle()
            scenario = scenario_settings(assembly.doc, f"cluster {self.source.api.host}")
            config = config_from(scenario.config, actions=scenario.actions, where="the shard's configuration",
                                 params=Params.from_scenario(scenario.params, scenario.stale_grace_seconds))
            policy = self._policy(config)
        except KaipolicyError as e:
            self._skip(f"no snapshot: {e}")
            return
        if policy is None:
            self._skip(self.reloader.problem)
            return
        snapshot_ms = (time.perf_counter() - start) * 1000.0
        self.cycle += 1
        audit = Audit(enabled=self.audit_file is not None, cycle=self.cycle, bundle_hash=policy.bundle.hash,
                      source=self.audit_source)
        try:
            result = run_cycle(cluster, policy.config, policy.bundle, audit)
        except KaipolicyError as e:
            metrics.CYCLES.labels(result="error").inc()
            log.error("cycle %d could not run: %s", self.cycle, e, extra={"cycle": self.cycle})
            return
        close = time.perf_counter()
        decisions = decide(result.session, assembly)
        summary = self.committer.apply(decisions, set(cluster.nodes), self.may_write)
        self.committer.report(decisions, time.time())
        close_ms = (time.perf_counter() - close) * 1000.0
        self._record(result, decisions.scheduled_by_action, snapshot_ms, close_ms, start)
        self._write_audit(audit)
        self._log(policy, result.session, summary, (time.perf_counter() - start) * 1000.0)
        release(result)   # read: freed now, not left to the collector

    def _caught_up(self) -> bool:
        """Wait (at most a schedule period) for the informers to show this scheduler's last writes;
        past `catch_up_timeout` of waiting, stop waiting and say so."""
        deadline = time.monotonic() + self.period
        while not self.committer.caught_up():
            if self.stopping.is_set():
                return False
            if time.monotonic() >= deadline:
                now = time.monotonic()
                self._behind_since = self._behind_since or now
                if now - self._behind_since < self.catch_up_timeout:
                    self._skip(f"the informers do not show {self.committer.waiting_for()} yet")
                    return False
                log.error("the informers still do not show %s after %.0fs: scheduling on without them",
                          self.committer.waiting_for(), now - self._behind_since)
                self.committer.forget()
                break
            time.sleep(0.02)
        self._behind_since = None
        return True

    def _policy(self, config: SchedulerConfig) -> Policy | None:
        maps = self.source.rule_bundle()     # the first call starts the ConfigMaps' informers
        unsynced = [f"{ns}/{name}" for (ns, name), inf in self.source.bundle_informers.items()
                    if not inf.synced.is_set()]
        if unsynced:
            self.reloader.problem = f"waiting for the first list of ConfigMap(s) {', '.join(sorted(unsynced))}"
            return self.reloader.current
        return self.reloader.select(maps, config)

    def _skip(self, why: str) -> None:
        """Count a skipped cycle; say why when the reason is new (or once a minute while it lasts)."""
        metrics.CYCLES.labels(result="skipped").inc()
        now = time.monotonic()
        if why != self._last_skip[0] or now - self._last_skip[1] >= 60.0:
            self._last_skip = (why, now)
            log.warning("cycle skipped: %s", why, extra={"skipped": why})

    def _record(self, result: CycleResult, scheduled: dict[str, int], snapshot_ms: float, close_ms: float,
                start: float) -> None:
        actions_ms = {a: s * 1000.0 for a, s in result.action_seconds.items()}
        metrics.OPEN_SESSION_LATENCY.set(snapshot_ms + result.seconds * 1000.0 - sum(actions_ms.values()))
        metrics.CLOSE_SESSION_LATENCY.set(close_ms)
        for action, ms in actions_ms.items():
            metrics.ACTION_LATENCY.labels(action=action).set(ms)
        for action, n in scheduled.items():
            metrics.PODGROUPS_SCHEDULED.inc(action, n)
        _record_tally(result.session, scheduled.get("preempt", 0))
        for error in result.session.errors:
            metrics.RULE_ERRORS.labels(rule=error.rule).inc()
        for gauge in (metrics.QUEUE_FAIR_SHARE_CPU, metrics.QUEUE_FAIR_SHARE_MEMORY, metrics.QUEUE_FAIR_SHARE_GPU):
            gauge.clear()
        for qs in result.session.shares.queues.values():
            name = qs.queue.name
            metrics.QUEUE_FAIR_SHARE_CPU.labels(queue_name=name).set(qs.shares["cpu"].fair_share / 1000.0)
            metrics.QUEUE_FAIR_SHARE_MEMORY.labels(queue_name=name).set(qs.shares["memory"].fair_share / 1e9)
            metrics.QUEUE_FAIR_SHARE_GPU.labels(queue_name=name).set(qs.shares["gpu"].fair_share)
        metrics.E2E_LATENCY.set((time.perf_counter() - start) * 1000.0)
        metrics.CYCLES.labels(result="ok").inc()

    def _write_audit(self, audit: Audit) -> None:
        """This cycle's records, leaving out each job whose records say what they said in the cycle
        last written for it (a pending job would otherwise add the same lines every second)."""
        if self.audit_file is None or not audit.records:
            return
        by_job: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for record in audit.records:
            by_job.setdefault((str(record.get("namespace", "")), str(record.get("job", ""))), []).append(record)
        said: dict[tuple[str, str], str] = {}
        lines = []
        for key, records in by_job.items():
            said[key] = json.dumps([{k: v for k, v in r.items() if k != "cycle"} for r in records],
                                   sort_keys=True, default=str)
            if key == ("", "") or self._audit_said.get(key) != said[key]:
                lines += [json.dumps(r, sort_keys=True, default=str) for r in records]
        self._audit_said = said
        try:
            self.audit_file.write("".join(line + "\n" for line in lines))
            self.audit_file.flush()
        except OSError as e:
            log.error("could not write the audit log: %s", e)

    def _log(self, policy: Policy, ssn: Session, summary: Summary, ms: float) -> None:
        errors = sorted({e.rule for e in ssn.errors})
        if errors:
            log.error("cycle %d: rules failed while evaluating: %s", self.cycle, ", ".join(errors),
                      extra={"cycle": self.cycle, "ruleErrors": [f"{e.rule}: {e.message}" for e in ssn.errors][:20]})
        busy = bool(summary.binds or summary.evictions or ssn.pipelines or summary.errors)
        # a quiet cycle (every second on an idle cluster) is only worth a debug line
        log.log(logging.INFO if busy else logging.DEBUG,
                "cycle %d: %d bound, %d evicted, %d pipelined in %.0f ms", self.cycle, summary.binds,
                 summary.evictions, len(ssn.pipelines), ms,
                 extra={"cycle": self.cycle, "bundle": policy.bundle.hash, "binds": summary.binds,
                        "evictions": summary.evictions, "pipelined": len(ssn.pipelines),
                        "gangsFailed": summary.gangs_failed, "evictionsFailed": summary.evictions_failed,
                        "abandoned": summary.abandoned, "milliseconds": round(ms, 1)}
                 | ({"errors": summary.errors[:20]} if summary.errors else {}))


def _record_tally(ssn: Session, preempted: int) -> None:
    """The reference's per-action counters of the eviction actions, and each plugin's open time."""
    counters = {"considered": metrics.PODGROUPS_CONSIDERED, "simulated": metrics.SCENARIOS_SIMULATED,
                "filtered": metrics.SCENARIOS_FILTERED}
    for (what, action), n in sorted(ssn.tally.items()):
        if what in counters:    # the rest are kaipolicy's own (refusals proven before simulating)
            counters[what].inc(action, n)
    # the reference counts a preemption attempt when preempt commits one (jobs scheduled by preempt)
    if preempted:
        metrics.PREEMPTION_ATTEMPTS.inc(amount=preempted)
    for plugin, seconds in ssn.plugin_seconds.items():
        metrics.PLUGIN_LATENCY.labels(plugin=plugin, OnSession="OnSessionOpen").set(seconds * 1000.0)
