"""The invariants every simulation of a valid scenario keeps, checked cycle by cycle.

`check(doc)` simulates the document and returns one `Failure` per broken invariant, each with a
`kind` stable enough to group failures into classes (a crash is named by exception type and the
innermost kaipolicy frame). A `KaipolicyError` is a refusal, not a failure.
"""

from __future__ import annotations

import copy
import traceback
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any
from unittest import mock

STATES = frozenset({"Pending", "Running", "Releasing", "Pipelined", "Binding", "Bound", "Allocated", "Succeeded",
                    "Failed", "Gated"})
NAMES_NODE = frozenset({"Allocated", "Binding", "Running", "Pipelined", "Releasing", "Bound"})
HOLDS_WHOLE = frozenset({"Allocated", "Binding", "Running", "Bound"})
HOLDS_DEVICE = HOLDS_WHOLE | {"Releasing"}
EPS = 1e-6


@dataclass(frozen=True)
class Failure:
    kind: str
    detail: str


@lru_cache(maxsize=1)
def bundle() -> Any:
    from kaipolicy.cli.bundle import load

    return load(None)


def crash_kind(e: BaseException, where: str = "") -> str:
    """`crash: KeyError at kaipolicy/x.py:12 (fn)`: the innermost frame inside the package."""
    frames = [f for f in traceback.extract_tb(e.__traceback__) if "/kaipolicy/" in f.filename
              and "/tests/" not in f.filename]
    at = ""
    if frames:
        f = frames[-1]
        at = f" at {f.filename[f.filename.rindex('/kaipolicy/') + 1:]}:{f.lineno} ({f.name})"
    return f"crash{where}: {type(e).__name__}{at}"


def _run(doc: dict[str, Any], vectorize: bool = True, watch: list[Failure] | None = None) -> Any:
    from kaipolicy.cache.scenario_source import scenario_from_doc
    from kaipolicy.simulate import simulate

    scn = scenario_from_doc(copy.deepcopy(doc), "fuzz")
    if watch is None:
        return simulate(scn, bundle(), vectorize=vectorize)
    with _watching(watch, strict="(chaos)" not in str(doc.get("name", ""))):
        return simulate(scn, bundle(), vectorize=vectorize)


def check(doc: dict[str, Any]) -> list[Failure]:
    from kaipolicy.errors import KaipolicyError

    failures: list[Failure] = []
    try:
        res = _run(doc, watch=failures)
        report = res.report()
    except KaipolicyError:
        return failures
    except Exception as e:  # noqa: BLE001 - any other exception is what the fuzzer looks for
        return [*failures, Failure(crash_kind(e), "".join(traceback.format_exception(e)[-12:]))]
    failures += _report_failures(report)
    try:
        from kaipolicy.simulate import without_timings

        again = without_timings(_run(doc).report())
        if again != without_timings(report):
            failures.append(Failure("nondeterministic report", _first_difference(without_timings(report), again)))
    except Exception as e:  # noqa: BLE001
        failures.append(Failure(crash_kind(e, " (second run)"), repr(e)))
    try:
        plain = _run(doc, vectorize=False).report()
        if _placements(plain) != _placements(report):
            failures.append(Failure("vectorize=False places differently",
                                    _first_difference(_placements(report), _placements(plain))))
    except Exception as e:  # noqa: BLE001
        failures.append(Failure(crash_kind(e, " (vectorize=False)"), repr(e)))
    return failures


def _placements(report: dict[str, Any]) -> dict[str, tuple[str, str | None]]:
    return {t["name"]: (t["status"], t["node"]) for t in report["tasks"]}


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for k in list(a) + [k for k in b if k not in a]:
            if a.get(k) != b.get(k):
                return _first_difference(a.get(k), b.get(k), f"{path}.{k}")
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b, strict=True)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
    return f"{path}: {a!r} != {b!r}"[:400]


def _report_failures(report: dict[str, Any]) -> list[Failure]:
    out = []
    for t in report["tasks"]:
        if t["status"] not in STATES:
            out.append(Failure("unknown task status", f"{t['name']}: {t['status']}"))
    seen = Counter((e["cycle"], e["task"]) for e in report["evictionReasons"])
    twice = [k for k, n in seen.items() if n > 1]
    if twice:
        out.append(Failure("pod evicted twice in a cycle", f"(cycle, task) {twice[:3]}"))
    if report["ruleErrors"]:
        out.append(Failure("rule errors in the report", "; ".join(report["ruleErrors"])[:400]))
    return out


# ---- per cycle -----------------------------------------------------------------------------
@contextmanager
def _watching(failures: list[Failure], strict: bool) -> Iterator[None]:
    """Check every cycle's outcome: wrap the `run_cycle` that `simulate` calls."""
    import kaipolicy.simulate as sim

    original = sim.run_cycle

    def watched(cluster: Any, *args: Any, **kwargs: Any) -> Any:
        before = _usage(cluster, pipelined=True)
        was_pipelined = {t.name: t.node for job in cluster.jobs.values() for t in job.tasks.values()
                         if t.status.value == "Pipelined"}
        # nodes already below zero (a deleted job's evicted Pipelined pod stays Releasing) are not judged
        negative = {n.name for n in cluster.nodes.values() if n.idle.gpus < -EPS or n.idle.cpu < -EPS}
        was_pipelined.update((name, name) for name in negative)
        result = original(cluster, *args, **kwargs)
        failures.extend(_cycle_failures(cluster, result.session, before, was_pipelined if strict else None))
        return result

    with mock.patch.object(sim, "run_cycle", watched):
        yield


def _usage(cluster: Any, pipelined: bool = False) -> dict[tuple[str, str], float]:
    """Per (node, what): whole GPUs of non-shared tasks, devices in use, CPU, MIG slices.

    Before a cycle, `pipelined` counts Pipelined tasks as holding what they wait for: an
    eviction turns one into a Releasing task that does hold it (the reference does the same)."""
    from kaipolicy.api.resources import RequestType

    use: Counter[tuple[str, str]] = Counter()
    groups: dict[str, set[str]] = {}
    for job in cluster.jobs.values():
        for t in job.tasks.values():
            status = t.status.value
            if pipelined and status == "Pipelined":
                status = "Running"
            if status not in HOLDS_DEVICE or t.node not in cluster.nodes:
                continue
            req = t.request
            if req.kind == RequestType.REGULAR:
                if status in HOLDS_WHOLE:
                    use[(t.node, "whole GPUs")] += req.count
                use[(t.node, "GPU devices")] += req.count
            elif req.is_shared:
                groups.setdefault(t.node, set()).update(t.gpu_groups)
            for name, n in req.mig:
                use[(t.node, name)] += n
            use[(t.node, "cpu")] += req.cpu
    for node, g in groups.items():
        use[(node, "GPU devices")] += len(g)
    return dict(use)


def _capacity(node: Any, what: str) -> float:
    if what in ("whole GPUs", "GPU devices"):
        return float(node.allocatable.gpus)
    if what == "cpu":
        return float(node.allocatable.cpu)
    return float(node.allocatable.mig.get(what, 0))


def _cycle_failures(cluster: Any, ssn: Any, before: dict[tuple[str, str], float],
                    was_pipelined: dict[str, str] | None) -> list[Failure]:
    out: list[Failure] = []
    for job in cluster.jobs.values():
        for t in job.tasks.values():
            status = t.status.value
            if status not in STATES:
                out.append(Failure("unknown task status", f"{t.name}: {status}"))
            if status in NAMES_NODE and t.node not in cluster.nodes:
                out.append(Failure(f"{status} task without an existing node", f"{t.name}: node {t.node!r}"))
    # A pod evicted twice (reported below) is left Releasing on the node it was pipelined to,
    # where it never ran: the nodes involved are not judged again here.
    evictions = Counter(e.task for e in ssn.evictions)
    twice = {e.node for e in ssn.evictions if evictions[e.task] > 1}
    for (node, what), used in _usage(cluster).items():
        cap = _capacity(cluster.nodes[node], what)
        if node not in twice and used > max(cap, before.get((node, what), 0.0)) + EPS:
            out.append(Failure(f"node over capacity: {what}",
                               f"{node}: {used} {what} held, capacity {cap}, before the cycle "
                               f"{before.get((node, what), 0.0)}"))
    if was_pipelined is not None:   # a consistent starting state: no idle amount goes below zero...
        # ... unless the node has a Pipelined task (counted in `used`, it skews the reference's
        # shared-GPU arithmetic) or an evicted one (as Releasing it holds idle resources again;
        # a real cluster has no Pipelined pods when a cycle starts)
        skip = twice | set(was_pipelined.values())   # (their nodes, and nodes already negative)
        skip |= {t.node for job in cluster.jobs.values() for t in job.tasks.values()
                 if t.status.value == "Pipelined"}
        for node in cluster.nodes.values():
            if node.name in skip:
                continue
            if node.idle.gpus < -EPS or node.idle.cpu < -EPS:
                out.append(Failure("node idle resources negative", f"{node.name}: idle {node.idle}"))
    if ssn.errors:
        rules = sorted({e.rule for e in ssn.errors})
        out.append(Failure(f"rule errors: {', '.join(rules)[:120]}",
                           "; ".join(sorted({f'{e.rule}: {e.message}' for e in ssn.errors}))[:400]))
    return out
