#!/usr/bin/env python3
"""Compare the reference's Go (K runs, Go map order varies between runs) with kaipolicy's plain path.

  compare.py SCENARIO.yaml [-k 10]
  compare.py --gen busy_three_levels --seeds 26385,17503 -k 30 [--old /tmp/goref/old]
  compare.py --gen busy_three_levels --seeds 0-300 -k 5 --jsonl out.jsonl   (sweep)

Outcome = each pod's final (status, node), as the reference's tests check them.
Library: compare(doc, k) -> dict.
"""
from __future__ import annotations

import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

sys.path.insert(0, "/tmp/goref")
from to_go import Unsupported, convert  # noqa: E402

GO_BIN = os.environ.get("GOREF_BIN", "/tmp/goref/harness.test")   # another build: a trial
PY = os.environ.get("GOREF_PY", sys.executable)   # the Python that runs kaipolicy
JOBS = int(os.environ.get("GOREF_PAR", "2"))


def go_once(json_path: str) -> dict[str, Any]:
    env = dict(os.environ, HARNESS_INPUT=json_path)
    p = subprocess.run(["nice", "-n", "10", GO_BIN, "-test.run", "^TestHarness$", "-test.count=1"],
                       env=env, capture_output=True, text=True, timeout=900, cwd="/tmp/goref")
    for line in p.stdout.splitlines():
        if line.startswith("HARNESS_RESULT:"):
            return json.loads(line[len("HARNESS_RESULT:"):])
    raise RuntimeError(f"go harness failed (rc {p.returncode}):\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}")


def go_runs(doc: dict[str, Any], k: int) -> list[dict[str, Any]]:
    g = convert(doc)
    with tempfile.NamedTemporaryFile("w", suffix=".json", dir="/tmp/goref/tmp", delete=False) as f:
        json.dump(g, f)
        path = f.name
    try:
        with ThreadPoolExecutor(JOBS) as ex:
            return list(ex.map(lambda _: go_once(path), range(k)))
    finally:
        os.unlink(path)


def go_outcome(res: dict[str, Any]) -> dict[str, tuple[str, str]]:
    out = {t["name"]: (t["status"], t["node"]) for t in res["tasks"]}
    if res.get("panic"):
        # the reference panicked: its outcome is the panic (the pods as the panic left them kept for reading)
        out["__PANIC__"] = (res["panic"], "")
    return out


def go_counts(res: dict[str, Any]) -> list[list[int]]:
    return [[len(c["binds"]), len(c["evictions"]), len(c["pipelined"])] for c in res["perCycle"]]


def key(outcome: dict[str, tuple[str, str]]) -> tuple:
    return tuple(sorted((n, s, nd) for n, (s, nd) in outcome.items()))


HEAD_TREE = os.environ.get("GOREF_HEAD", "/tmp/goref/head")   # git archive of /work/main HEAD


def kai_outcomes(docs: list[dict[str, Any]], tree: str = HEAD_TREE) -> list[dict[str, Any]]:
    env = dict(os.environ, KAI_TREE=tree, PYTHONPATH=tree)
    inp = "".join(json.dumps(d) + "\n" for d in docs)
    p = subprocess.run(["nice", "-n", "10", PY, "/tmp/goref/kai_outcome.py"], input=inp, env=env,
                       capture_output=True, text=True, timeout=7200)
    lines = [json.loads(x) for x in p.stdout.splitlines() if x.strip()]
    if len(lines) != len(docs):
        raise RuntimeError(f"kai_outcome failed: {p.stderr[-3000:]}")
    if tree not in p.stderr:
        raise RuntimeError(f"kaipolicy not imported from {tree}: {p.stderr[-500:]}")
    for r in lines:
        if "tasks" in r:
            r["tasks"] = {n: tuple(v) for n, v in r["tasks"].items()}
    return lines


def diff(a: dict[str, tuple[str, str]], b: dict[str, tuple[str, str]]) -> dict[str, Any]:
    return {n: {"a": a.get(n), "b": b.get(n)} for n in sorted(set(a) | set(b)) if a.get(n) != b.get(n)}


def summarize(doc: dict[str, Any], gos: list[dict[str, Any]], kai: dict[str, Any],
              olds: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    counter: collections.Counter = collections.Counter()
    reps: dict[tuple, dict[str, Any]] = {}
    for r in gos:
        o = go_outcome(r)
        k = key(o)
        counter[k] += 1
        reps.setdefault(k, {"outcome": o, "counts": go_counts(r)})
    distinct = [{"n": n, **reps[k]} for k, n in counter.most_common()]
    out: dict[str, Any] = {"name": doc.get("name"), "go_distinct": distinct, "go_runs": len(gos)}

    def judge(kr: dict[str, Any]) -> dict[str, Any]:
        if "error" in kr:
            return {"error": kr["error"]}
        ko = kr["tasks"]
        match = [i for i, d in enumerate(distinct) if d["outcome"] == ko]
        res: dict[str, Any] = {"outcome": ko, "counts": kr["counts"], "matches_go": bool(match),
                               "match_index": match[0] if match else None}
        if match:
            res["counts_equal"] = distinct[match[0]]["counts"] == kr["counts"]
        else:
            # the differing pods against each distinct Go outcome (a = Go, b = kaipolicy)
            res["diff_vs_go"] = [diff(d["outcome"], ko) for d in distinct]
        return res

    out["kai"] = judge(kai)
    for name, kr in (olds or {}).items():
        out[name] = judge(kr)
    return out


def compare(doc: dict[str, Any], k: int = 10, trees: dict[str, str] | None = None) -> dict[str, Any]:
    gos = go_runs(doc, k)
    trees = trees or {}
    kai = kai_outcomes([doc])[0]
    olds = {name: kai_outcomes([doc], tree)[0] for name, tree in trees.items()}
    return summarize(doc, gos, kai, olds)


def show(s: dict[str, Any], verbose: bool = True) -> None:
    print(f"== {s['name']}: {len(s['go_distinct'])} distinct Go outcome(s) in {s['go_runs']} runs")
    base = s["go_distinct"][0]["outcome"]
    for i, d in enumerate(s["go_distinct"]):
        extra = "" if i == 0 else f" differs from #0 in {diff(base, d['outcome'])}"
        print(f"  Go #{i}: x{d['n']} counts(binds,evict,pipe)/cycle={d['counts']}{extra}")
    for name in [n for n in s if n == "kai" or n.startswith("old")]:
        r = s[name]
        if "error" in r:
            print(f"  {name}: ERROR {r['error']}")
            continue
        if r["matches_go"]:
            print(f"  {name}: MATCHES Go #{r['match_index']} (counts equal: {r['counts_equal']}) counts={r['counts']}")
        else:
            print(f"  {name}: NOT among Go outcomes; counts={r['counts']}")
            for i, d in enumerate(r["diff_vs_go"]):
                print(f"     vs Go #{i} (a=Go, b={name}): {d}")
    if verbose:
        print("  Go #0 outcome:", {n: v for n, v in sorted(base.items())})


def parse_seeds(text: str) -> list[int]:
    out: list[int] = []
    for part in text.split(","):
        if "-" in part:
            a, b = part.split("-")
            out += list(range(int(a), int(b) + 1))
        elif part:
            out.append(int(part))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("scenario", nargs="?")
    ap.add_argument("-k", type=int, default=10)
    ap.add_argument("--gen")
    ap.add_argument("--seeds")
    ap.add_argument("--old", action="append", default=[], help="NAME=TREE or TREE: an older kaipolicy tree")
    ap.add_argument("--jsonl")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()
    os.makedirs("/tmp/goref/tmp", exist_ok=True)
    trees = {}
    for i, o in enumerate(a.old):
        name, _, tree = o.partition("=") if "=" in o else (f"old{i}", "", o)
        trees[name if name.startswith("old") else "old_" + name] = tree
    if a.scenario:
        import yaml
        with open(a.scenario) as f:
            doc = yaml.safe_load(f)
        show(compare(doc, a.k, trees), not a.quiet)
        return
    sys.path.insert(0, HEAD_TREE)
    from generators import generator
    make = generator(a.gen)
    seeds = parse_seeds(a.seeds)
    sink = open(a.jsonl, "a") if a.jsonl else None
    # kaipolicy in batches (one import per batch), Go per seed
    batch = 10
    for start in range(0, len(seeds), batch):
        chunk = seeds[start:start + batch]
        docs = [make(s) for s in chunk]
        kais = kai_outcomes(docs)
        oldk = {name: kai_outcomes(docs, tree) for name, tree in trees.items()}
        for i, (seed, doc) in enumerate(zip(chunk, docs)):
            t0 = time.time()
            try:
                gos = go_runs(doc, a.k)
            except Unsupported as e:
                print(f"seed {seed}: UNSUPPORTED {e}")
                continue
            s = summarize(doc, gos, kais[i], {n: v[i] for n, v in oldk.items()})
            s["seed"] = seed
            s["go_seconds"] = round(time.time() - t0, 1)
            if sink:
                sink.write(json.dumps(s, default=list) + "\n")
                sink.flush()
            if a.quiet:
                k = s["kai"]
                flag = "ok" if k.get("matches_go") else ("ERROR" if "error" in k else "DIFF")
                print(f"seed {seed}: go_distinct={len(s['go_distinct'])} kai={flag} ({s['go_seconds']}s)", flush=True)
                if flag == "DIFF":
                    for j, d in enumerate(k["diff_vs_go"]):
                        print(f"     vs Go #{j}: {d}", flush=True)
            else:
                show(s, False)


if __name__ == "__main__":
    main()
