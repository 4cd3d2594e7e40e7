"""Shrink a failing scenario: drop nodes, jobs, tasks, queues and optional fields one at a time
while the document stays schema-valid and still fails with the same failure kind."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

Doc = dict[str, Any]

_KEEP = {"name", "queue", "state", "tasks", "actions", "queues", "nodes", "jobs"}


def minimise(doc: Doc, kind: str, still_fails: Callable[[Doc], bool] | None = None) -> Doc:
    test = still_fails or (lambda d: _fails_with(d, kind))
    changed = True
    while changed:
        changed = False
        for candidate in _candidates(doc):
            if _valid(candidate) and test(candidate):
                doc = candidate
                changed = True
                break
    return doc


def _fails_with(doc: Doc, kind: str) -> bool:
    from tests.fuzz.properties import check

    return any(f.kind == kind for f in check(doc))


def _valid(doc: Doc) -> bool:
    from kaipolicy.cache.scenario_schema import validate_scenario
    from kaipolicy.errors import ScenarioError

    try:
        validate_scenario(doc, "minimise")
    except ScenarioError:
        return False
    return True


def _candidates(doc: Doc) -> Iterator[Doc]:
    """Smaller documents, the biggest cuts first."""
    for i in range(len(doc["jobs"])):
        d = copy.deepcopy(doc)
        del d["jobs"][i]
        yield d
    for i, node in enumerate(doc["nodes"]):
        d = copy.deepcopy(doc)
        del d["nodes"][i]
        for job in d["jobs"]:
            for t in job["tasks"]:
                if t.get("node") == node["name"]:
                    t.pop("node")
                    t.pop("gpuGroups", None)
                    t["state"] = "Pending"
        yield d
    for j, job in enumerate(doc["jobs"]):
        for i in range(len(job["tasks"])):
            if len(job["tasks"]) > 1:
                d = copy.deepcopy(doc)
                del d["jobs"][j]["tasks"][i]
                yield d
    for key in ("queues", "departments"):
        for i in range(len(doc.get(key) or [])):
            d = copy.deepcopy(doc)
            del d[key][i]
            yield d
    if doc.get("cycles", 1) > 1:
        d = copy.deepcopy(doc)
        d["cycles"] -= 1
        yield d
    for i in range(len(doc["actions"])):
        if len(doc["actions"]) > 1:
            d = copy.deepcopy(doc)
            del d["actions"][i]
            yield d
    yield from _fewer_keys(doc, [])


def _fewer_keys(doc: Doc, path: list[Any]) -> Iterator[Doc]:
    """The document without one optional key (or list item) somewhere below `path`."""
    node: Any = doc
    for p in path:
        node = node[p]
    if isinstance(node, dict):
        for key in list(node):
            if key in _KEEP and (not path or path[-1] != "labels"):
                if isinstance(node[key], (dict, list)):
                    yield from _fewer_keys(doc, [*path, key])
                continue
            d = copy.deepcopy(doc)
            target: Any = d
            for p in path:
                target = target[p]
            del target[key]
            yield d
            if isinstance(node[key], (dict, list)):
                yield from _fewer_keys(doc, [*path, key])
    elif isinstance(node, list):
        for i, item in enumerate(node):
            if isinstance(item, (dict, list)):
                yield from _fewer_keys(doc, [*path, i])
