"""`kaipolicy simulate FILE... [--output text|json|jsonl]`: run scenarios, print what happened."""

from __future__ import annotations

import argparse
import json
import sys
from typing import IO, Any

from kaipolicy.cli import bundle as bundles
from kaipolicy.cli import flags
from kaipolicy.cli.text import internal_error, printable, printable_lines
from kaipolicy.errors import InputError, KaipolicyError
from kaipolicy.framework.audit import Audit
from kaipolicy.simulate import simulate_file
from kaipolicy.timelimit import time_limit

MAX_ERRORS_SHOWN = 20


def register(sub: Any) -> None:
    p = sub.add_parser("simulate", help="run scenario files through the scheduler")
    p.add_argument("files", nargs="+", metavar="FILE")
    p.add_argument("--output", choices=("text", "json", "jsonl"), default="text")
    p.add_argument("--policies", action="append", metavar="DIR",
                   help="rule files or folders (default: the bundled policies)")
    p.add_argument("--audit", metavar="FILE", help="append the audit log (JSON lines) here")
    flags.time_limit_argument(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    bundle = bundles.load(args.policies)
    audit = _open_audit(args.audit)
    failed = 0
    try:
        for path in args.files:
            try:
                with time_limit(args.time_limit):
                    res = simulate_file(path, bundle, audit=Audit(enabled=audit is not None))
            except Exception as e:  # one file's failure never stops the others
                failed += 1
                if len(args.files) == 1 and args.output != "jsonl":
                    raise
                message = str(e) if isinstance(e, KaipolicyError) else f"{path}: {internal_error(e)}"
                if args.output == "jsonl":
                    print(json.dumps({"scenario": path, "error": message}), flush=True)
                else:
                    print(f"{printable(path)}: error: {printable_lines(message)}", file=sys.stderr)
                continue
            report = res.report()
            if audit is not None:
                audit.writelines(line + "\n" for line in res.audit.lines())
            if args.output == "jsonl":
                print(json.dumps({"scenario": path, **report}), flush=True)
            elif args.output == "json":
                print(json.dumps(report, indent=1))
            else:
                print(render_text(path, report))
    finally:
        if audit is not None:
            audit.close()
    return 1 if failed else 0


def _open_audit(path: str | None) -> IO[str] | None:
    """Open the audit log before any scenario runs, so a bad path costs nothing."""
    if path is None:
        return None
    try:
        return open(path, "a", encoding="utf-8")
    except OSError as e:
        raise InputError(f"--audit {printable(path)}: cannot append to it: {e.strerror or e}") from None


def render_text(path: str, report: dict[str, Any]) -> str:
    """The short human summary. Every name and message is passed through `printable`: they come
    from the scenario, and a name holding terminal escapes must not rewrite the output."""
    lines = [f"{printable(path)}: {report['cycles']} cycle(s)"]
    lines.extend(f"  warning: {printable(w)}" for w in report.get("warnings", []))
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
        line = f"  {printable(job['name'])} [{printable(job['queue'])}]: {summary}"
        if nodes:
            line += f" on {', '.join(printable(n) for n in nodes)}"
        lines.append(line)
        if job["fitError"] and any(t["status"] in ("Pending", "Gated") for t in tasks):
            lines.append(f"      pending because: {printable(job['fitError'])}")
    for e in report.get("evictionReasons", []):
        message = "\n      ".join(printable(part) for part in e["message"].split("\n"))
        lines.append(f"  cycle {e['cycle']}: evicted {printable(e['task'])} ({e['action']}, "
                     f"for {printable(str(e.get('job', '?')))}): {message}")
    if report.get("ruleErrors"):
        # a rule that failed is not a denial: say so, with the rule's file:line (in the message)
        lines.append("  rule errors (rules that failed while evaluating; not denials):")
        errors = report["ruleErrors"]
        lines.extend(f"    {printable(error)}" for error in errors[:MAX_ERRORS_SHOWN])
        if len(errors) > MAX_ERRORS_SHOWN:
            lines.append(f"    ... and {len(errors) - MAX_ERRORS_SHOWN} more (--output json lists them all)")
    return "\n".join(lines)
