"""Copies of the model for one cycle: every field copied, nothing shared that a cycle changes,
and a cycle on copies decides what it decides on a fresh build (every shared scenario and fuzz
seed, all cycles)."""

from __future__ import annotations

from dataclasses import fields
from pathlib import Path
from typing import Any

import pytest
import yaml

from kaipolicy.api import copies
from kaipolicy.api.job import Job
from kaipolicy.api.node import Node
from kaipolicy.api.queue import Queue
from kaipolicy.api.task import Task
from kaipolicy.cache import scenario_source
from kaipolicy.cache.scenario_source import Scenario, scenario_from_doc
from kaipolicy.errors import KaipolicyError
from kaipolicy.framework.audit import Audit
from kaipolicy.simulate import simulate, without_timings
from tests.fuzz.generate import scenario
from tests.scenarios.shared import default_bundle, scenario_files, scenario_id
from tests.unit.api.model_dump import dump_cluster

SOURCE = Path(copies.__file__).read_text()


@pytest.mark.parametrize(("cls", "written"), [(Task, "c.{}"), (Node, "c.{}"), (Job, "c.{}"), (Queue, "q.{}")])
def test_the_copies_name_every_field_of_the_model(cls: type, written: str) -> None:
    missing = [f.name for f in fields(cls) if written.format(f.name) not in SOURCE]
    assert missing == []


def _decisions(doc: dict[str, Any], copied: bool, monkeypatch: pytest.MonkeyPatch) -> Any:
    build = scenario_source._build
    if copied:    # every cycle runs on copies of the build, as the live delta source's do
        monkeypatch.setattr(Scenario, "snapshot", lambda scn: copies.copy_cluster(build(scn)))
    audit = Audit(enabled=True, detail=True)
    try:
        res = simulate(scenario_from_doc(doc, "<test>"), default_bundle(), audit=audit)
    except KaipolicyError as e:
        return f"error: {e}"
    finally:
        monkeypatch.undo()
    return without_timings(res.report()), audit.records


def _same_on_copies(doc: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> bool:
    try:
        cluster = scenario_from_doc(doc, "<test>").snapshot()
    except KaipolicyError:
        return True   # refused at load: nothing to copy
    if dump_cluster(copies.copy_cluster(cluster)) != dump_cluster(cluster):
        return False
    return bool(_decisions(doc, True, monkeypatch) == _decisions(doc, False, monkeypatch))


@pytest.mark.parametrize("path", scenario_files(), ids=scenario_id)
def test_a_shared_scenario_decides_alike_on_copies(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _same_on_copies(yaml.safe_load(path.read_text()), monkeypatch)


@pytest.mark.parametrize("start", range(0, 120, 40))
def test_random_clusters_decide_alike_on_copies(start: int, monkeypatch: pytest.MonkeyPatch) -> None:
    assert [seed for seed in range(start, start + 40) if not _same_on_copies(scenario(seed), monkeypatch)] == []


def test_a_copy_shares_nothing_a_cycle_changes() -> None:
    doc = scenario(3)
    cluster = scenario_from_doc(doc, "<test>").snapshot()
    before = dump_cluster(cluster)
    copied = copies.copy_cluster(cluster)
    for node in copied.nodes.values():
        node.idle.gpus -= 1
        node.tasks.clear()
        node.shared_used["x"] = 1
    for job in copied.jobs.values():
        job.fit_errors.append("no")
        for task in job.tasks.values():
            task.gpu_groups.append("g")
            task.node = "elsewhere"
        for ps in job.pod_sets.values():
            ps.tasks.clear()
    for q in copied.queues.values():
        q.children.append("x")
    assert dump_cluster(cluster) == before
    assert dump_cluster(copied) != before
