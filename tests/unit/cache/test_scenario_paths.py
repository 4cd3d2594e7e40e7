"""Key paths as messages show them, read back against the document to find their line."""

from __future__ import annotations

from typing import Any

import pytest

from kaipolicy.cache.scenario_paths import declared, keys, render
from tests.unit.helpers import job, node


@pytest.mark.parametrize(("path", "want"), [
    (["jobs", 0, "tasks", 1, "state"], "jobs[j].tasks[j-1].state"),
    (["nodes", 0, "labels", "nvidia.com/gpu.count"], "nodes[n0].labels[nvidia.com/gpu.count]"),
    (["jobs", 1, "queue"], "jobs[1].queue"),
    ([None], "null"),
    ([1], "[1]"),
])
def test_rendered_key_paths_read_back_to_the_same_keys(path: list[Any], want: str) -> None:
    d = {"actions": ["allocate"], "queues": [{"name": "q0"}], "nodes": [node("n0", labels={"nvidia.com/gpu.count": "1"})],
         "jobs": [job("j", tasks=[{"state": "Pending"}, {"name": "j-1", "state": "Pending"}]), {"queue": "q0"}]}
    d[None] = "x"
    d[1] = "y"
    assert render(d, path) == want
    assert keys(d, want) == path


def test_a_path_reads_back_as_far_as_it_resolves() -> None:
    d = {"jobs": [{"name": "a", "tasks": []}]}
    assert keys(d, "jobs[a].tasks[3].state") == ["jobs", 0, "tasks"]
    assert keys(d, "nodes[n0]") == []


def test_unknown_name_messages_list_at_most_twelve_declared_names() -> None:
    assert declared([]) == "none declared"
    assert declared(["b", "a", "b"]) == "declared: a, b"
    assert declared([f"q{i:02}" for i in range(20)]).endswith("q11, ... (20 in all)")
