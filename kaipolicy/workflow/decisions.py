"""Decisions: the audit records flattened to one entry per rule verdict, which policy tests match.

Each decision has `rule`, `verdict` (deny, allow, error), `mode` (enforce, warn, audit), `cycle`,
`action` and what it was about (`job`, `namespace`, `task`, `node`, `victim`, `for`: the job an
eviction served or a victim filter judged for) and `message`.
A rejection group lists every node only when the audit log was kept with `detail`; the message
of a grouped node is its group's sample message.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

Decision = dict[str, Any]
ABOUT = ("job", "namespace", "task", "node", "victim")


def decisions(records: list[dict[str, Any]]) -> list[Decision]:
    return [d for r in records for d in _of(r)]


def _of(r: dict[str, Any]) -> Iterator[Decision]:
    base: Decision = {"cycle": r["cycle"], "action": r["action"], "mode": "enforce"}
    base.update((k, r[k]) for k in ("job", "namespace", "task") if k in r)
    kind = r["kind"]
    if kind in ("task", "job") and r.get("deniedBy"):
        yield {**base, "rule": r["deniedBy"]["rule"], "verdict": "deny", "message": r["deniedBy"]["message"]}
    if kind == "job":
        for rule, count in (r.get("refusals") or {}).items():
            yield {**base, "rule": rule, "verdict": "deny", "count": count,
                   "message": f"refused {count} time(s) while {r['action']} looked for room"}
    if kind == "task":
        for g in r.get("rejected") or []:
            for node in g.get("nodes") or [g["sampleNode"]]:
                yield {**base, "rule": g["rule"], "verdict": "deny", "node": node, "message": g["message"]}
    elif kind == "eviction":
        for rule in r["allowedBy"]:
            yield {**base, "rule": rule, "verdict": "allow", "node": r["node"], "for": r["servedJob"],
                   "message": r["message"]}
    elif kind == "shadow":
        about = {k: r[k] for k in ABOUT if k in r}
        if "victim" in r and "job" in r:     # a victim filter: the job it judged for is the one served
            about["for"] = f"{r.get('namespace', 'default')}/{r['job']}"
        yield {**base, **about, "rule": r["rule"], "verdict": "deny", "mode": r["mode"], "message": r["message"]}
    elif kind == "error":
        yield {**base, "rule": r["rule"], "verdict": "error", "message": r["message"]}


def matches(expected: dict[str, Any], d: Decision) -> bool:
    for key, want in expected.items():
        if key == "messageContains":
            ok = want in d.get("message", "")
        elif key in ("job", "victim", "for"):
            ok = _same_job(want, d.get(key), d.get("namespace"))
        else:
            ok = d.get(key) == want
        if not ok:
            return False
    return True


def _same_job(want: str, got: str | None, namespace: str | None) -> bool:
    if got is None:
        return False
    if "/" in got:                      # `for` carries namespace/name
        return want in (got, got.rpartition("/")[2])
    return want in (got, f"{namespace}/{got}")


def show(d: Decision) -> str:
    keys = ("rule", "verdict", "mode", "action", "job", "task", "node", "victim", "for")
    text = ", ".join(f"{k}: {d[k]}" for k in keys if d.get(k) is not None and not (k == "mode" and d[k] == "enforce"))
    return f"{{{text}}} cycle {d['cycle']}" + (f": {d['message'].splitlines()[0]}" if d.get("message") else "")
