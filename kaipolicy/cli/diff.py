"""`kaipolicy diff [--policies OLD] --against NEW SCENARIO...`: what a bundle change would change."""

from __future__ import annotations

import argparse
import json
from typing import Any

from kaipolicy.cli import bundle as bundles
from kaipolicy.workflow.diff import changed_rules, diff_scenario, render


def register(sub: Any) -> None:
    p = sub.add_parser("diff", help="run scenarios under two bundles and list every decision that differs")
    p.add_argument("scenarios", nargs="+", metavar="SCENARIO")
    p.add_argument("--policies", action="append", metavar="DIR",
                   help="the current bundle's rule files or folders (default: the bundled policies)")
    p.add_argument("--against", action="append", metavar="DIR", required=True,
                   help="the proposed bundle's rule files or folders (repeat to combine several)")
    p.add_argument("--output", choices=("text", "json"), default="text")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    old, new = bundles.load(args.policies), bundles.load(args.against)
    diffs = [diff_scenario(path, old, new) for path in args.scenarios]
    changed = changed_rules(old, new)
    if args.output == "json":
        print(json.dumps({"rules": changed, "scenarios": [
            {"scenario": d.scenario, "differences": [x.to_dict() for x in d.differences]} for d in diffs]}, indent=1))
    else:
        print(render(diffs, changed))
    return 1 if any(d.differences for d in diffs) else 0
