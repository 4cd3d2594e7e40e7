"""One scheduling cycle of `kaipolicy run`, on a cluster source and API server in memory: it
writes the BindRequests, the audit records (with the bundle's hash, valid against the published
schema), counts cycles and rule errors, sends warn rules' verdicts as Events; the next cycle waits
for the informers to show those writes, and a pod the snapshot wrongly shows pending is not bound
a second time."""

from __future__ import annotations

import copy
import gc
import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from kaipolicy import metrics
from kaipolicy.api.node import Node
from kaipolicy.api.snapshot import ClusterInfo
from kaipolicy.api.task import Task
from kaipolicy.cache.assemble import Assembly
from kaipolicy.cache.outbox import Outbox
from kaipolicy.cache.scenario_source import scenario_from_doc
from kaipolicy.rules import Bundle
from kaipolicy.server import loop as loop_module
from kaipolicy.server.commit import Committer
from kaipolicy.server.loop import Loop
from kaipolicy.server.reload import Reloader
from kaipolicy.workflow.bundles import default_policies, load
from tests.scenarios.shared import default_bundle
from tests.scenarios.test_audit_log import schema_errors
from tests.unit.fakeapi import FakeApi
from tests.unit.helpers import collections_noted, job, node, noted

NOW = 1_800_000_000.0
WARN = """plugin: caution
enable: always
rules:
  - name: big-jobs
    hook: prePredicate
    mode: warn
    deny: "task.gpus > 1.0"
    message: "'asks for more than one GPU'"
  - name: broken
    hook: nodeOrder
    score: "task.labels['team'] == 'x' ? 1.0 : 0.0"
"""


class Informer(dict[str, Any]):
    synced = True

    def reached(self, version: str) -> bool:
        return False


class FakeSource:
    def __init__(self, api: FakeApi, doc: dict[str, Any]) -> None:
        self.api, self.doc = api, doc
        self.informers = {"BindRequest": Informer(), "Pod": Informer(), "PodGroup": Informer()}
        self.bundle_informers: dict[Any, Any] = {}
        self.origins = {j["name"]: ("Pod", "team", j["name"].split("/")[1], f"uid-{j['name']}") for j in doc["jobs"]}
        self.origins |= {t["name"]: ("Pod", "team", t["name"].split("/")[1], f"uid-{t['name']}")
                         for j in doc["jobs"] for t in j["tasks"]}

    def scenario(self) -> Assembly:
        return Assembly(copy.deepcopy(self.doc), [], self.origins, NOW)

    def cycle(self) -> tuple[Assembly, ClusterInfo]:
        out = self.scenario()
        return out, scenario_from_doc(out.doc, "<fake>", validate=False).snapshot()

    def rule_bundle(self) -> None:
        return None

    def show_writes(self) -> None:
        self.informers["BindRequest"].update({f"{ns}/{name}": obj for (kind, ns, name), obj in self.api.objects.items()
                                              if kind == "BindRequest"})


def _doc() -> dict[str, Any]:
    jobs = [job(f"team/{name}", "q0", namespace="team", perTask={"gpus": gpus},
                tasks=[{"name": f"team/{name}-0", "state": "Pending"}]) for name, gpus in (("a", 1), ("b", 2))]
    return {"actions": ["allocate"], "queues": [{"name": "q0", "deserved": {"gpu": 8}}],
            "nodes": [node("n0")], "jobs": jobs, "defaultDepartment": True}


@pytest.fixture
def api() -> FakeApi:
    return FakeApi()


@pytest.fixture
def loop(api: FakeApi, tmp_path: Path) -> Iterator[Loop]:
    (tmp_path / "caution.yaml").write_text(WARN)
    bundle = load([str(default_policies()), str(tmp_path)])
    yield _loop(api, bundle)


def _loop(api: FakeApi, bundle: Bundle, doc: dict[str, Any] | None = None) -> Loop:
    source = FakeSource(api, doc or _doc())
    outbox = Outbox(api, window=300)
    committer = Committer(api, source, outbox, 3, "")
    return Loop(source, Reloader(bundle, "test rules", lambda *a: None), committer,
                period=0.05, catch_up_timeout=30.0, audit_file=io.StringIO(), audit_source="cluster fake")


def _requests(api: FakeApi) -> dict[str, Any]:
    return {name: obj for (kind, _, name), obj in api.objects.items() if kind == "BindRequest"}


def _cycles(result: str) -> float:
    return metrics.CYCLES.labels(result=result)._value.get()


def test_a_cycle_writes_bind_requests_audit_records_and_counts(api: FakeApi, loop: Loop) -> None:
    ok, errors = _cycles("ok"), metrics.RULE_ERRORS.labels(rule="caution/broken")._value.get()
    loop.once()
    assert sorted(_requests(api)) == ["a-0", "b-0"]
    assert _cycles("ok") == ok + 1 and loop.cycle == 1
    assert metrics.RULE_ERRORS.labels(rule="caution/broken")._value.get() > errors
    assert loop.audit_file is not None
    records = [json.loads(line) for line in loop.audit_file.getvalue().splitlines()]
    assert records and {(r["cycle"], r["bundle"], r["source"]) for r in records} == {
        (1, loop.reloader.current.bundle.hash, "cluster fake")}
    assert [e for r in records for e in schema_errors(r)] == []
    loop.committer.outbox.drain(5)
    warnings = [e for e in api.events if e["reason"] == "PolicyWarning"]
    assert [(e["name"], e["type"]) for e in warnings] == [("b", "Warning")]
    assert "caution/big-jobs (warn) would deny" in warnings[0]["message"]
    loop.committer.outbox.stop(1)


def test_a_cycle_counts_jobs_tried_scenarios_simulated_and_preemptions_as_the_reference_does(
        api: FakeApi) -> None:
    doc = _doc() | {"actions": ["allocate", "preempt"], "nodes": [node("n0", gpus=2)]}
    doc["jobs"] = [job("team/low", "q0", namespace="team", priority=10, preemptible=True,
                       tasks=[{"name": "team/low-0", "state": "Running", "node": "n0"},
                              {"name": "team/low-1", "state": "Running", "node": "n0"}]),
                   job("team/high", "q0", namespace="team", priority=100, preemptible=True,
                       tasks=[{"name": "team/high-0", "state": "Pending"}])]
    loop = _loop(api, default_bundle(), doc)
    tried, simulated = metrics.PODGROUPS_CONSIDERED.get("preempt"), metrics.SCENARIOS_SIMULATED.get("preempt")
    attempts = metrics.PREEMPTION_ATTEMPTS.get()
    loop.once()
    assert metrics.PODGROUPS_CONSIDERED.get("preempt") == tried + 1
    assert metrics.SCENARIOS_SIMULATED.get("preempt") > simulated
    assert metrics.PREEMPTION_ATTEMPTS.get() == attempts + 1
    assert any(verb == "evict" for verb, _, _ in api.calls) and metrics.PODGROUPS_SCHEDULED.get("preempt") >= 1
    assert metrics.PLUGIN_LATENCY.labels(plugin="proportion", OnSession="OnSessionOpen")._value.get() > 0
    loop.committer.outbox.stop(1)


def test_a_cycle_once_read_is_freed_without_the_collector(loop: Loop) -> None:
    # the cluster model and the session hold reference cycles: left to the collector's rare full
    # passes, the clusters of cycle after cycle would pile up in a long-running scheduler
    gc.collect()
    gc.disable()
    try:
        loop.once()
        left = _tracked(Task), _tracked(Node)
        gc.collect()
        assert loop.cycle == 1 and (_tracked(Task), _tracked(Node)) == left
    finally:
        gc.enable()
        loop.committer.outbox.stop(1)


def test_the_collector_waits_until_the_cycle_is_released(loop: Loop, monkeypatch: pytest.MonkeyPatch) -> None:
    # resumed before the release, the collector's first pass walks the whole snapshot and session
    # (55 ms after openb's allocate cycle); after it, only what outlives the cycle
    events: list[str] = []
    noted(monkeypatch, loop_module, "release", events, "released")
    noted(monkeypatch, loop.source, "cycle", events, "snapshot")
    try:
        with collections_noted(events):
            loop.once()
    finally:
        loop.committer.outbox.stop(1)
    assert loop.cycle == 1 and "released" in events
    assert "collected" not in events[events.index("snapshot"):events.index("released")]


def _tracked(kind: type) -> int:
    return sum(1 for o in gc.get_objects() if isinstance(o, kind))


def test_the_next_cycle_waits_until_the_informers_show_the_writes(api: FakeApi, loop: Loop) -> None:
    loop.once()
    skipped = _cycles("skipped")
    loop.once()
    assert _cycles("skipped") == skipped + 1 and loop.cycle == 1
    loop.source.show_writes()
    loop.once()
    assert loop.cycle == 2
    loop.committer.outbox.stop(1)


def test_a_pod_the_snapshot_wrongly_shows_pending_is_not_bound_twice(api: FakeApi) -> None:
    loop = _loop(api, default_bundle())
    loop.catch_up_timeout = 0.0      # give up waiting at once: the snapshot below still shows both pods pending
    loop.once()
    first = {name: obj["metadata"]["uid"] for name, obj in _requests(api).items()}
    loop.once()
    assert loop.cycle == 2
    assert {name: obj["metadata"]["uid"] for name, obj in _requests(api).items()} == first
    assert api.verbs("BindRequest").count("create team/a-0") == 2      # tried, refused by its name
    loop.committer.outbox.stop(1)


def test_without_a_usable_bundle_the_cycle_is_skipped_saying_why(api: FakeApi) -> None:
    loop = _loop(api, default_bundle())
    loop.reloader.select = lambda maps, config: None
    loop.reloader.problem = "the rule bundle from configmap/kai/rules was refused: ..."
    skipped = _cycles("skipped")
    loop.once()
    assert _cycles("skipped") == skipped + 1 and not _requests(api)
    loop.committer.outbox.stop(1)


def test_a_job_whose_records_do_not_change_is_audited_once_not_every_cycle(api: FakeApi) -> None:
    loop = _loop(api, default_bundle())
    loop.source.doc["jobs"].append(job("team/huge", "q0", namespace="team", perTask={"gpus": 64},
                                       tasks=[{"name": "team/huge-0", "state": "Pending"}]))
    loop.source.origins |= {"team/huge": ("Pod", "team", "huge", "u-h"), "team/huge-0": ("Pod", "team", "huge", "u-h")}
    for _ in range(3):
        loop.source.show_writes()
        loop.catch_up_timeout = 0.0
        loop.once()
    assert loop.cycle == 3 and loop.audit_file is not None
    records = [json.loads(line) for line in loop.audit_file.getvalue().splitlines()]
    assert {r["cycle"] for r in records if r["job"] == "team/huge"} == {1}
    loop.committer.outbox.stop(1)
