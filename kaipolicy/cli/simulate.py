"""`kaipolicy simulate FILE... [--output text|json|jsonl]`: run scenarios, print what happened."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from kaipolicy.cli import bundle as bundles
from kaipolicy.errors import KaipolicyError
from kaipolicy.simulate import simulate_file


def register(sub: Any) -> None:
    p = sub.add_parser("simulate", help="run scenario files through the scheduler")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--output", choices=("text", "json", "jsonl"), default="text")
    p.add_argument("--policies", action="append", metavar="DIR",
                   help="rule files or folders (default: the bundled policies)")
    p.add_argument("--audit", metavar="FILE", help="append the audit log (JSON lines) here")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    bundle = bundles.load(args.policies)
    failed = 0
    for path in args.files:
        try:
            res = simulate_file(path, bundle)
        except KaipolicyError as e:
            failed += 1
            if args.output == "jsonl":
                print(json.dumps({"scenario": path, "error": str(e)}), flush=True)
                continue
            if len(args.files) == 1:
                raise
            print(f"{path}: error: {e}", file=sys.stderr)
            continue
        report = res.report()
        if args.audit:
            with open(args.audit, "a") as fh:
                fh.writelines(line + "\n" for line in res.audit.lines())
        if args.output == "jsonl":
            print(json.dumps({"scenario": path, **report}), flush=True)
        elif args.output == "json":
            print(json.dumps(report, indent=1))
        else:
            print(render_text(path, report))
    return 1 if failed else 0


def render_text(path: str, report: dict[str, Any]) -> str:
    lines = [f"{path}: {report['cycles']} cycle(s)"]
    for i, c in enumerate(report["perCycle"], 1):
        lines.append(f"  cycle {i}: {c['binds']} bind(s), {c['evictions']} eviction(s), {c['pipelined']} pipelined"
                     f" in {c['seconds']['total']:.3f} s")
    lines.append("  after the last cycle:")
    by_job: dict[str, list[dict[str, Any]]] = {}
    for t in report["tasks"]:
        by_job.setdefault(t["job"], []).append(t)
    for job in report["jobs"]:
        tasks = by_job.get(job["name"], [])
        states: dict[str, int] = {}
        for t in tasks:
            states[t["status"]] = states.get(t["status"], 0) + 1
        nodes = sorted({t["node"] for t in tasks if t["node"]})
        summary = ", ".join(f"{n} {s}" for s, n in sorted(states.items()))
        line = f"  {job['name']} [{job['queue']}]: {summary}"
        if nodes:
            line += f" on {', '.join(nodes)}"
        lines.append(line)
        if job["fitError"] and any(t["status"] == "Pending" for t in tasks):
            lines.append(f"      pending because: {job['fitError']}")
    for e in report.get("evictionReasons", []):
        message = e["message"].replace("\n", "\n      ")
        lines.append(f"  cycle {e['cycle']}: evicted {e['task']} ({e['action']}, for {e.get('job', '?')}): {message}")
    return "\n".join(lines)
