#!/usr/bin/env python3
"""Classify a sweep's seeds (compare.py --jsonl output): where kaipolicy's outcome is not among the
Go outcomes, why.

  classify.py tmp/sweep.jsonl [--gen busy_three_levels]

Classes:
  go-panic-all    every Go run panicked (the reference has no outcome; kaipolicy cannot match)
  go-panic-some   some Go runs panicked, kaipolicy matches none of the others
  moved-victim    kaipolicy with its documented "a pod evicted in this session is not a victim again"
                  rule switched off (diagnostic patch) gives one of the Go outcomes
  other           none of the above (the pods that differ are listed against the closest Go outcome)
"""
from __future__ import annotations

import argparse
import json
import os
import sys

sys.path.insert(0, "/tmp/goref")
from compare import HEAD_TREE, diff, kai_outcomes  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("--gen", default="busy_three_levels")
    a = ap.parse_args()
    rows = [json.loads(x) for x in open(a.jsonl) if x.strip()]
    sys.path.insert(0, HEAD_TREE)
    from generators import generator
    make = generator(a.gen)
    varies = [r["seed"] for r in rows if len(r["go_distinct"]) > 1]
    bad = [r for r in rows if not r["kai"].get("matches_go")]
    need = []
    for r in bad:
        outs = [d["outcome"] for d in r["go_distinct"]]
        panics = [o for o in outs if "__PANIC__" in o]
        r["_outs"] = [{k: tuple(v) for k, v in o.items()} for o in outs]
        r["_panic_runs"] = sum(d["n"] for d in r["go_distinct"] if "__PANIC__" in d["outcome"])
        if panics and len(panics) == len(outs):
            r["_class"] = "go-panic-all"
        else:
            need.append(r)
    if need:
        os.environ["KAI_MOVED_VICTIMS"] = "1"
        alt = kai_outcomes([make(r["seed"]) for r in need])
        os.environ["KAI_MOVED_VICTIMS"] = "0"
        for r, k in zip(need, alt):
            nonpanic = [o for o in r["_outs"] if "__PANIC__" not in o]
            if "tasks" in k and any(o == k["tasks"] for o in nonpanic):
                r["_class"] = "moved-victim"
            elif r["_panic_runs"]:
                r["_class"] = "go-panic-some"
            else:
                r["_class"] = "other"
    print(f"{len(rows)} seeds; kaipolicy among Go outcomes: {len(rows) - len(bad)}; not: {len(bad)}")
    print(f"Go itself varies (>1 distinct outcome in its runs): {len(varies)} seeds: {varies}")
    by: dict[str, list[int]] = {}
    for r in bad:
        by.setdefault(r["_class"], []).append(r["seed"])
    for c, seeds in sorted(by.items()):
        print(f"{c}: {len(seeds)}: {seeds}")
    print()
    for r in bad:
        kt = {k: tuple(v) for k, v in r["kai"]["outcome"].items()}
        best = min(r["_outs"], key=lambda o: len(diff(o, kt)))
        d = diff(best, kt)
        panic = best.get("__PANIC__", ("",))[0]
        d.pop("__PANIC__", None)
        pods = {n: f"Go {v['a'][0]}@{v['a'][1] or '-'} / kai {v['b'][0]}@{v['b'][1] or '-'}" if v["a"] and v["b"]
                else str(v) for n, v in d.items()}
        extra = f" [Go panic: {panic.split(':')[0]}]" if panic else ""
        print(f"seed {r['seed']} [{r['_class']}] go_distinct={len(r['go_distinct'])} "
              f"panic_runs={r['_panic_runs']}/{r['go_runs']}{extra}: {len(pods)} pods differ (vs closest Go outcome)")
        print("    " + "; ".join(f"{n}: {v}" for n, v in sorted(pods.items())))


if __name__ == "__main__":
    main()
