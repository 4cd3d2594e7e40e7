"""Order keys: one element per rule, so keys of different lengths and failing rules stay aligned."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kaipolicy.cli.bundle import default_policies, load
from kaipolicy.cycle import open_session
from kaipolicy.framework import session as session_module
from kaipolicy.framework.config import SchedulerConfig
from kaipolicy.framework.session import LAST, Session
from tests.scenarios.shared import default_bundle
from tests.unit.helpers import job, node, scenario


def test_a_failed_rule_sorts_after_any_value() -> None:
    assert ((0, 5),) < ((LAST,),)
    assert ((LAST,),) > ((1, 0, 0),)
    assert max([((LAST,), 1.0), ((0, 0, -3), 2.0), ((1, 0, 0), 0.0)])[0] == (LAST,)


# ---- what the session remembers keys by ----------------------------------------------------------

LONE_CALLS = """\
plugin: calls
rules:
  - name: plain
    hook: queueOrder
    key: "fairshare.queueOrderKey(cluster, queue, job, victims)"
  - name: guarded
    hook: queueOrder
    when: "queue.priority > 0"
    key: "fairshare.queueOrderKey(cluster, queue, job, victims)"
  - name: wrapped
    hook: queueOrder
    key: "fairshare.queueOrderKey(cluster, queue, job, victims) + [1]"
  - name: reordered
    hook: queueOrder
    key: "fairshare.queueOrderKey(cluster, queue, job, [])"
  - name: own
    hook: queueOrder
    key: "[-queue.priority]"
"""


def _plugin(tmp_path: Path, text: str) -> str:
    (tmp_path / "calls.yaml").write_text(text)
    return str(tmp_path)


def test_a_rule_is_known_as_a_vocabulary_call_only_when_the_call_is_all_it_is(tmp_path: Path) -> None:
    bundle = load([_plugin(tmp_path, LONE_CALLS)])
    calls = {r.name: r.calls for r in bundle.plugins["calls"].rules}
    assert calls == {"plain": "fairshare.queueOrderKey", "guarded": "", "wrapped": "", "reordered": "", "own": ""}


def _session(bundle: Any) -> Session:
    jobs = [job("a", "q0"), job("b", "q0", [{"state": "Running", "node": "n0"}])]
    return open_session(scenario([node("n0")], jobs).snapshot(), SchedulerConfig(), bundle)


def test_the_default_queue_order_is_remembered_by_allocation_request_and_victims() -> None:
    assert _session(default_bundle()).queue_keys_remembered


def test_another_queue_order_rule_beside_it_turns_the_memory_off(tmp_path: Path) -> None:
    extra = "plugin: calls\nenable: always\nrules:\n  - name: own\n    hook: queueOrder\n    key: \"[-queue.priority]\"\n"
    ssn = _session(load([str(default_policies()), _plugin(tmp_path, extra)]))
    assert [r.label for r in ssn.hooks["queueOrder"]] == ["proportion/fair-share-order", "calls/own"]
    assert not ssn.queue_keys_remembered


def test_a_remembered_queue_key_is_the_rule_s_and_follows_the_queue_s_allocation() -> None:
    ssn = _session(default_bundle())
    queue = ssn.cluster.queues["q0"]
    pending = ssn.cluster.jobs["a"]
    first = ssn.queue_key(queue, pending)
    assert ssn.queue_key(queue, pending) is first            # remembered
    session_module.SHARE_KEYED_QUEUE_KEYS = False
    try:
        assert ssn.queue_key(queue, pending) == first         # what the rule gives
    finally:
        session_module.SHARE_KEYED_QUEUE_KEYS = True
    running = ssn.cluster.jobs["b"].tasks
    task = next(iter(running.values()))
    stmt = ssn.statement()
    stmt.evict(task, "test")                                  # the queue gives up a GPU
    assert ssn.queue_key(queue, pending) != first
    stmt.discard()
    assert ssn.queue_key(queue, pending) is first


def test_a_whole_job_s_key_follows_its_pods_statuses() -> None:
    ssn = _session(default_bundle())
    running = ssn.cluster.jobs["b"]
    before = ssn.job_key(running)
    stmt = ssn.statement()
    stmt.evict(next(iter(running.tasks.values())), "test")
    during = ssn.job_key(running)
    assert during != before                                   # no longer remembered by the old count
    session_module.WHOLE_JOB_KEYS_BY_COUNT = False
    try:
        assert ssn.job_key(running) == during                 # what the state tuple gives
    finally:
        session_module.WHOLE_JOB_KEYS_BY_COUNT = True
    stmt.discard()
    assert ssn.job_key(running) == before


def test_a_built_in_queue_key_that_fails_is_the_rule_s_error(monkeypatch: Any) -> None:
    from kaipolicy.builtins import capacity

    def broken(*_: Any) -> list[object]:
        raise ValueError("no share")

    ssn = _session(default_bundle())
    monkeypatch.setattr(capacity, "queue_order_key_unmemoised", broken)
    key = ssn.queue_key(ssn.cluster.queues["q0"], ssn.cluster.jobs["a"])
    assert ssn.key_failed(key)                                 # sorts last, as a failed rule does
    assert [e.rule for e in ssn.errors] == ["proportion/fair-share-order"]
    assert "no share" in ssn.errors[0].message


# ---- job keys remembered by the fields the rules read -------------------------------------------

FIELD_RULES = """\
plugin: calls
rules:
  - name: plain
    hook: jobOrder
    key: "[-job.priority, job.name]"
  - name: guarded
    hook: jobOrder
    when: "has(job.priority)"
    key: "[job.elasticState]"
  - name: whole-job
    hook: jobOrder
    key: "[size([job])]"
  - name: vocabulary
    hook: jobOrder
    key: "[size(capacity.jobOverCapacity(cluster, job))]"
"""


def test_a_rule_records_the_plain_fields_it_reads_when_they_are_all_it_reads(tmp_path: Path) -> None:
    bundle = load([_plugin(tmp_path, FIELD_RULES)])
    reads = {r.name: r.field_reads for r in bundle.plugins["calls"].rules}
    assert reads == {"plain": (("job", "name"), ("job", "priority")), "guarded": (("job", "elastic"), ("job", "priority")),
                     "whole-job": None, "vocabulary": None}


def _jobs_of_priorities(priorities: list[int]) -> Session:
    jobs = [job(f"j{i}", "q0", priority=p) for i, p in enumerate(priorities)]
    return open_session(scenario([node("n0")], jobs).snapshot(), SchedulerConfig(), default_bundle())


def test_job_keys_remembered_by_field_values_are_the_rules_keys() -> None:
    priorities = [50, 10, 50, 90, 10, 50]
    ssn = _jobs_of_priorities(priorities)
    assert ssn._job_key_attrs == ("elastic", "priority")
    keys = {uid: ssn.job_key(j) for uid, j in ssn.cluster.jobs.items()}
    assert len(ssn._job_keys_by_fields) == 3                  # one per distinct priority
    fresh = _jobs_of_priorities(priorities)
    fresh._job_key_attrs = None                               # every key from the rules themselves
    assert keys == {uid: fresh.job_key(j) for uid, j in fresh.cluster.jobs.items()}


def test_a_job_key_rule_that_fails_records_its_error_for_every_job(tmp_path: Path) -> None:
    failing = ("plugin: calls\nenable: always\nrules:\n  - name: broken\n    hook: jobOrder\n"
               "    key: \"[100 / (job.priority - 50)]\"\n")
    bundle = load([str(default_policies()), _plugin(tmp_path, failing)])
    jobs = [job(f"j{i}", "q0", priority=50) for i in range(3)]
    ssn = open_session(scenario([node("n0")], jobs).snapshot(), SchedulerConfig(), bundle)
    assert ssn._job_key_attrs == ("elastic", "priority")
    keys = [ssn.job_key(j) for j in ssn.cluster.jobs.values()]
    assert all(ssn.key_failed(k) for k in keys)
    assert [e.rule for e in ssn.errors] == ["calls/broken"] * 3   # none shared: each job's own error
    assert not ssn._job_keys_by_fields
