#!/usr/bin/env python3
"""Validate the Go harness on the shared scenarios: each Go run's outcome against the scenario's
`expect` block (statuses/nodes as the reference's tests check them, plus the bind/eviction/pipeline
counts), and kaipolicy's (HEAD, plain path) outcome against the Go outcomes.

  validate.py [-k 3] [GLOB ...]     (default: every convertible scenario under /work/shared/scenarios/kai)
"""
from __future__ import annotations

import argparse
import glob
import json
import sys

import yaml

sys.path.insert(0, "/tmp/goref")
from compare import go_counts, go_outcome, go_runs, kai_outcomes, key  # noqa: E402
from to_go import Unsupported  # noqa: E402


def check_expect(doc, res) -> list[str]:
    exp = doc.get("expect") or {}
    tasks = {t["name"]: t for t in res["tasks"]}
    by_job: dict[str, list] = {}
    for t in res["tasks"]:
        by_job.setdefault(t["job"], []).append(t)
    errs = []
    for job, e in (exp.get("jobs") or {}).items():
        for t in by_job.get(job, []):
            if "status" in e and t["status"] != e["status"]:
                errs.append(f"{t['name']}: status {t['status']} != {e['status']}")
            if e.get("node") and t["node"] != e["node"]:
                errs.append(f"{t['name']}: node {t['node']} != {e['node']}")
        if job not in by_job:
            errs.append(f"job {job} missing")
    for name, e in (exp.get("tasks") or {}).items():
        t = tasks.get(name)
        if t is None:
            continue   # the reference's check skips expected tasks that do not exist
        if "status" in e and t["status"] != e["status"]:
            errs.append(f"{name}: status {t['status']} != {e['status']}")
        if e.get("node") and t["node"] != e["node"]:
            errs.append(f"{name}: node {t['node']} != {e['node']}")
    counts = go_counts(res)
    last = counts[-1]
    for i, what in enumerate(("binds", "evictions", "pipelined")):
        if what in exp and last[i] != exp[what]:
            errs.append(f"{what} {last[i]} != {exp[what]}")
        if what + "AtMost" in exp and any(c[i] > exp[what + "AtMost"] for c in counts):
            errs.append(f"{what} per cycle {[c[i] for c in counts]} > {exp[what + 'AtMost']}")
    return errs


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("globs", nargs="*", default=["/work/shared/scenarios/kai/*/*.yaml"])
    ap.add_argument("-k", type=int, default=3)
    a = ap.parse_args()
    files = sorted({f for g in a.globs for f in glob.glob(g)})
    docs, names = [], []
    for f in files:
        with open(f) as fh:
            docs.append(yaml.safe_load(fh))
        names.append(f.split("/kai/")[-1])
    kais = kai_outcomes(docs)
    summary = {"pass": 0, "fail": 0, "unsupported": 0, "kai_match": 0, "kai_nomatch": 0, "go_varies": 0}
    for name, doc, kai in zip(names, docs, kais):
        try:
            runs = go_runs(doc, a.k)
        except Unsupported as e:
            summary["unsupported"] += 1
            print(f"SKIP {name}: {e}")
            continue
        except Exception as e:  # noqa: BLE001
            summary["fail"] += 1
            print(f"CRASH {name}: {str(e)[:2000]}")
            continue
        fails = [check_expect(doc, r) for r in runs]
        outs = {key(go_outcome(r)): go_outcome(r) for r in runs}
        km = "error" not in kai and any(o == kai["tasks"] for o in outs.values())
        summary["kai_match" if km else "kai_nomatch"] += 1
        if len(outs) > 1:
            summary["go_varies"] += 1
        nfail = sum(1 for f in fails if f)
        if nfail:
            summary["fail"] += 1
        else:
            summary["pass"] += 1
        status = "PASS" if not nfail else f"FAIL({nfail}/{len(runs)})"
        print(f"{status} {name} go_distinct={len(outs)} kai_matches_go={km}", flush=True)
        for f in fails:
            if f:
                print("     ", "; ".join(f[:8]))
                break
        if not km and "error" not in kai:
            o = next(iter(outs.values()))
            d = {n: (o.get(n), kai['tasks'].get(n)) for n in sorted(set(o) | set(kai['tasks']))
                 if o.get(n) != kai['tasks'].get(n)}
            print("      kai vs Go#0 (go, kai):", d)
        elif "error" in kai:
            print("      kai error:", kai["error"][:300])
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
