"""Small scenario builders shared by the unit tests (names unique to avoid conftest clashes)."""

from __future__ import annotations

import copy
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

from kaipolicy.cache.scenario_source import Scenario, scenario_from_doc

NODE = {"gpus": 4, "gpuMemoryMiB": 100, "cpuMillis": 64000, "memoryBytes": 256 * 10**9, "maxPods": 110}


def node(name: str, **over: Any) -> dict[str, Any]:
    spec = {"name": name, **copy.deepcopy(NODE), "labels": {"kai.scheduler/type": name}}
    spec.update(over)
    return spec


def job(name: str, queue: str = "q0", tasks: list[dict[str, Any]] | None = None, **over: Any) -> dict[str, Any]:
    spec: dict[str, Any] = {"name": name, "queue": queue, "priority": 50, "createdMinutesAgo": 1,
                            "perTask": {"gpus": 1, "cpuMillis": 1000, "memoryBytes": 10**9},
                            "tasks": tasks if tasks is not None else [{"state": "Pending"}]}
    spec.update(over)
    return spec


def scenario(nodes: list[dict[str, Any]], jobs: list[dict[str, Any]], queues: list[dict[str, Any]] | None = None,
             actions: list[str] | None = None, **over: Any) -> Scenario:
    doc: dict[str, Any] = {
        "name": "unit", "actions": actions or ["allocate"],
        "queues": queues if queues is not None else [{"name": "q0", "deserved": {"gpu": 100}}],
        "nodes": nodes, "jobs": jobs, "expect": {},
        "params": {"useSchedulingSignatures": False},
    }
    doc.update(over)
    return scenario_from_doc(doc, "<unit>")


def noted(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str, events: list[str], label: str) -> None:
    """`owner.name` (a function) appends `label` to `events` each time before it runs."""
    real = getattr(owner, name)

    def call(*args: Any, **kwargs: Any) -> Any:
        events.append(label)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, call)


@contextmanager
def collections_noted(events: list[str]) -> Iterator[None]:
    """Appends "collected" to `events` at every pass of the cyclic collector, which starts a pass
    at any allocation meanwhile (threshold 1) whenever it runs."""
    def watch(phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            events.append("collected")

    threshold = gc.get_threshold()
    gc.collect()
    gc.set_threshold(1)
    gc.callbacks.append(watch)
    try:
        yield
    finally:
        gc.callbacks.remove(watch)
        gc.set_threshold(*threshold)
