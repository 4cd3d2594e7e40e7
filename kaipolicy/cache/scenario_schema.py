"""Validate a parsed scenario document: the JSON Schema first, then cross-references.

`validate_scenario` raises `ScenarioError(file, path, message)` for the first problem in
document order, with a key path such as `jobs[j0].tasks[j0-1].state` (list elements are
named by their `name` when they have one, else by index).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from functools import lru_cache
from typing import Any, cast

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError

from kaipolicy.errors import ScenarioError
from kaipolicy.paths import data_dir

SCHEMA_PATH = data_dir("schemas") / "scenario.schema.json"

#: Task states that hold a node and therefore must name one.
NODE_HOLDING_STATES = frozenset({"Running", "Releasing", "Pipelined", "Binding", "Bound", "Allocated"})

_SIMPLE_KEY = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]*$")
_TYPE_WORDS = {
    "object": "a mapping",
    "array": "a list",
    "string": "a string",
    "number": "a number",
    "integer": "an integer",
    "boolean": "a boolean (true/false)",
    "null": "null",
}
# When several errors sit at one place, the first of these kinds is reported.
_KIND_RANK = {"type": 0, "required": 1, "additionalProperties": 2, "enum": 3, "const": 3}


@lru_cache(maxsize=1)
def load_schema() -> dict[str, Any]:
    """The scenario JSON Schema (draft 2020-12), read once from `schemas/`."""
    with SCHEMA_PATH.open(encoding="utf-8") as fh:
        schema: dict[str, Any] = json.load(fh)
    return schema


@lru_cache(maxsize=1)
def _validator() -> Draft202012Validator:
    return Draft202012Validator(load_schema())


def validate_scenario(doc: object, file: str) -> None:
    """Raise ScenarioError for the first schema or reference problem in `doc`; else return."""
    if not isinstance(doc, dict):
        raise ScenarioError(file, "", f"expected a mapping at the top level, got {_show(doc)}")
    errors = list(_validator().iter_errors(doc))
    if errors:
        path, message = _describe(doc, _pick(doc, errors))
        raise ScenarioError(file, path, message)
    problem = _check_references(doc)
    if problem is not None:
        raise ScenarioError(file, problem[0], problem[1])


# ---------------------------------------------------------------- schema errors
# jsonschema's stubs allow an error's schema to be a boolean and its fields to be unset (for
# errors built by hand); iter_errors sets them all on every error it yields, and the scenario
# schema has no boolean subschemas. These three read them as what they are here.


def _schema(err: ValidationError) -> Mapping[str, Any]:
    """The subschema that failed."""
    return cast("Mapping[str, Any]", err.schema)


def _expected(err: ValidationError) -> Any:
    """The failing keyword's value in the schema (JSON data)."""
    return err.validator_value


def _instance(err: ValidationError) -> Any:
    """The part of the document that failed (JSON data)."""
    return err.instance


def _leaves(errors: Iterable[ValidationError]) -> Iterator[ValidationError]:
    """Errors, with anyOf/oneOf errors lacking a message of their own replaced by their causes."""
    for err in errors:
        if err.context and err.validator in ("anyOf", "oneOf") and "x-message" not in _schema(err):
            yield from _leaves(err.context)
        else:
            yield err


def _error_path(err: ValidationError) -> list[Any]:
    """The instance path an error is reported at (an unknown or bad key is appended)."""
    path: list[Any] = list(err.absolute_path)
    if err.validator == "additionalProperties" and isinstance(err.instance, dict):
        extra = _unknown_keys(err)
        if extra:
            path.append(extra[0])
    elif "propertyNames" in err.absolute_schema_path:
        path.append(err.instance)  # the instance is a map key: point at it
    return path


def _unknown_keys(err: ValidationError) -> list[Any]:
    allowed = _schema(err).get("properties", {})
    return [k for k in _instance(err) if k not in allowed]


def _position(doc: Any, path: Sequence[Any]) -> tuple[int, ...]:
    """Where `path` lies in document order (dict key order, list index)."""
    pos: list[int] = []
    node = doc
    for key in path:
        if isinstance(node, dict) and key in node:
            pos.append(list(node).index(key))
            node = node[key]
        elif isinstance(node, list) and isinstance(key, int) and 0 <= key < len(node):
            pos.append(key)
            node = node[key]
        else:
            pos.append(1 << 30)
            break
    return tuple(pos)


def _pick(doc: Any, errors: list[ValidationError]) -> ValidationError:
    leaves = list(_leaves(errors))
    return min(
        leaves,
        key=lambda e: (_position(doc, _error_path(e)), _KIND_RANK.get(str(e.validator), 9)),
    )


def _describe(doc: Any, err: ValidationError) -> tuple[str, str]:
    path = _error_path(err)
    kind = err.validator
    value = _instance(err)
    schema = _schema(err)
    expected = _expected(err)
    in_key_name = "propertyNames" in err.absolute_schema_path
    if kind == "additionalProperties":
        extra = _unknown_keys(err)
        allowed = ", ".join(schema.get("properties", {}))
        msg = f"unknown key {_show(extra[0] if extra else '?')} (allowed: {allowed})"
    elif kind == "required":
        missing = [k for k in expected if not isinstance(value, dict) or k not in value]
        msg = f"missing required key {_show(missing[0] if missing else '?')}"
    elif kind == "type":
        wanted: list[str] = expected if isinstance(expected, list) else [expected]  # JSON Schema `type`
        words = [_TYPE_WORDS.get(t, t) for t in wanted]
        msg = f"expected {_join_or(words)}, got {_show(value)}"
        if in_key_name:
            msg = f"map keys must be strings, got {_show(value)}"
    elif kind == "enum":
        options = ", ".join(str(o) for o in expected)
        msg = f"{_show(value)} is not one of {options}"
    elif kind == "const":
        msg = f"expected {_show(expected)}, got {_show(value)}"
    elif kind == "minimum":
        msg = f"expected a number >= {expected}, got {_show(value)}"
    elif kind == "maximum":
        msg = f"expected a number <= {expected}, got {_show(value)}"
    elif kind == "minItems":
        msg = f"expected at least {expected} item(s), got {len(value)}"
    elif kind == "minLength":
        msg = f"expected a non-empty string, got {_show(value)}"
    elif "x-message" in schema:
        msg = str(schema["x-message"]).format(value=_show(value))
    else:
        msg = err.message
    return _render(doc, path), msg


def _join_or(words: list[str]) -> str:
    if len(words) <= 1:
        return "".join(words)
    return ", ".join(words[:-1]) + " or " + words[-1]


def _show(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, str):
        return repr(value)
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return str(value)


def _render(doc: Any, path: Sequence[Any]) -> str:
    """Human key path: `.key` for keys, `[name]` or `[index]` for list elements."""
    out = ""
    node = doc
    for key in path:
        if isinstance(node, list) and isinstance(key, int):
            node = node[key] if 0 <= key < len(node) else None
            out += _elem("", node, key)
        else:
            text = str(key)
            out += (("." if out else "") + text) if _SIMPLE_KEY.match(text) else f"[{text}]"
            node = node.get(key) if isinstance(node, dict) else None
    return out


def _elem(where: str, item: Any, index: int) -> str:
    """`where[name]` for a list element with a usable name, else `where[index]`."""
    name = item.get("name") if isinstance(item, dict) else None
    if isinstance(name, str) and name and "[" not in name and "]" not in name:
        return f"{where}[{name}]"
    return f"{where}[{index}]"


# ---------------------------------------------------------------- references


class _Problem(Exception):
    def __init__(self, path: str, message: str) -> None:
        super().__init__(message)
        self.path = path
        self.message = message


def _check_references(doc: dict[str, Any]) -> tuple[str, str] | None:
    try:
        _check(doc)
    except _Problem as p:
        return p.path, p.message
    return None


def _declared(names: Iterable[str]) -> str:
    shown = sorted(set(names))
    if not shown:
        return "none declared"
    more = f", ... ({len(shown)} in all)" if len(shown) > 12 else ""
    return "declared: " + ", ".join(shown[:12]) + more


def _unique(items: list[dict[str, Any]], where: str, what: str, seen: dict[str, str]) -> None:
    for i, item in enumerate(items):
        name = item["name"]
        if name in seen:
            raise _Problem(f"{where}[{i}].name", f"duplicate {what} name {name!r} (also {seen[name]})")
        seen[name] = f"{where}[{i}]"


def _check(doc: dict[str, Any]) -> None:
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
    topo_levels: dict[str, list[str]] = {}
    _unique(topologies, "topologies", "topology", {})
    for topo in topologies:
        topo_levels[topo["name"]] = topo["levels"]
    _unique(jobs, "jobs", "job", {})

    task_names: dict[str, str] = {}
    for i, job in enumerate(jobs):
        _check_job(job, _elem("jobs", job, i), queue_names, node_names, topo_levels, task_names)
    # `expect` names are not cross-checked: the reference's tests name some tasks that do not
    # exist (their check is then vacuous), and the scenarios copy them faithfully.


def _check_queue_parents(queues: list[dict[str, Any]], queue_names: dict[str, str]) -> None:
    parents = {q["name"]: q.get("parent") for q in queues}
    for i, q in enumerate(queues):
        parent = q.get("parent")
        if parent is None:
            continue
        where = _elem("queues", q, i) + ".parent"
        if parent not in queue_names:
            raise _Problem(where, f"unknown queue {parent!r} ({_declared(queue_names)})")
        chain = [q["name"]]
        cur: str | None = parent
        while cur is not None:
            if cur in chain:
                loop = " -> ".join(chain[chain.index(cur):] + [cur])
                raise _Problem(where, f"queue parents form a cycle: {loop}")
            chain.append(cur)
            cur = parents.get(cur)


def _check_topology(tc: dict[str, Any] | None, where: str, topo_levels: dict[str, list[str]]) -> None:
    if tc is None:
        return
    name = tc["topology"]
    if name not in topo_levels:
        raise _Problem(f"{where}.topology", f"unknown topology {name!r} ({_declared(topo_levels)})")
    for key in ("requiredLevel", "preferredLevel"):
        level = tc.get(key)
        if level is not None and level not in topo_levels[name]:
            levels = ", ".join(topo_levels[name])
            raise _Problem(f"{where}.{key}", f"{level!r} is not a level of topology {name!r} ({levels})")


def _check_job(
    job: dict[str, Any],
    jwhere: str,
    queue_names: dict[str, str],
    node_names: dict[str, str],
    topo_levels: dict[str, list[str]],
    task_names: dict[str, str],
) -> None:
    jname = job["name"]
    _check_gpus(job.get("perTask"), f"{jwhere}.perTask")
    if job["queue"] not in queue_names:
        raise _Problem(f"{jwhere}.queue", f"unknown queue {job['queue']!r} ({_declared(queue_names)})")
    _check_topology(job.get("topologyConstraint"), f"{jwhere}.topologyConstraint", topo_levels)

    subgroups: list[dict[str, Any]] = job.get("subGroups") or []
    by_name: dict[str, dict[str, Any]] = {}
    _unique(subgroups, f"{jwhere}.subGroups", "subgroup", {})
    for sg in subgroups:
        by_name[sg["name"]] = sg
    for i, sg in enumerate(subgroups):
        swhere = _elem(f"{jwhere}.subGroups", sg, i)
        parent = sg.get("parent")
        if parent is not None:
            if parent not in by_name:
                raise _Problem(f"{swhere}.parent",
                               f"unknown subgroup {parent!r} in job {jname!r} ({_declared(by_name)})")
            chain = [sg["name"]]
            cur: str | None = parent
            while cur is not None:
                if cur in chain:
                    loop = " -> ".join(chain[chain.index(cur):] + [cur])
                    raise _Problem(f"{swhere}.parent", f"subgroup parents form a cycle: {loop}")
                chain.append(cur)
                cur = by_name[cur].get("parent")
        _check_topology(sg.get("topology"), f"{swhere}.topology", topo_levels)

    for i, task in enumerate(job["tasks"]):
        tname = task.get("name", f"{jname}-{i}")
        twhere = _elem(f"{jwhere}.tasks", task, i)
        if tname in task_names:
            how = "" if "name" in task else " (the default name)"
            raise _Problem(f"{twhere}.name" if "name" in task else twhere,
                           f"duplicate task name {tname!r}{how} (also {task_names[tname]})")
        task_names[tname] = twhere
        _check_task(task, twhere, jname, by_name, node_names)


def _check_task(
    task: dict[str, Any],
    twhere: str,
    jname: str,
    subgroups: dict[str, dict[str, Any]],
    node_names: dict[str, str],
) -> None:
    state = task["state"]
    node = task.get("node")
    _check_gpus(task.get("resources"), f"{twhere}.resources")
    if node is None and state in NODE_HOLDING_STATES:
        raise _Problem(twhere, f"a {state} task must name its 'node'")
    if node is not None and node not in node_names:
        raise _Problem(f"{twhere}.node", f"unknown node {node!r} ({_declared(node_names)})")
    sub = task.get("subGroup")
    if sub is None:
        if subgroups:
            raise _Problem(twhere, f"missing 'subGroup': job {jname!r} has subGroups, so every task names one")
        return
    if not subgroups:
        raise _Problem(f"{twhere}.subGroup", f"job {jname!r} declares no subGroups")
    if sub not in subgroups:
        raise _Problem(f"{twhere}.subGroup",
                       f"unknown subgroup {sub!r} in job {jname!r} ({_declared(subgroups)})")
    if "minAvailable" not in subgroups[sub]:
        raise _Problem(f"{twhere}.subGroup",
                       f"subgroup {sub!r} has no minAvailable: it only groups other subgroups "
                       "and cannot hold tasks")



def _check_gpus(resources: dict[str, Any] | None, where: str) -> None:
    """GPU portions are counted in hundredths (as the reference does): a smaller non-zero
    fraction would round to an empty GPU share."""
    gpus = (resources or {}).get("gpus")
    if isinstance(gpus, (int, float)) and 0 < gpus < 0.01:
        raise _Problem(f"{where}.gpus", f"expected 0 or at least 0.01 GPUs (hundredths), got {gpus}")
