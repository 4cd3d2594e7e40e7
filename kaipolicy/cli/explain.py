"""`kaipolicy explain JOB-or-POD (--audit FILE | SCENARIO)`: why it is pending, placed or evicted."""

from __future__ import annotations

import argparse
import json
from typing import Any

from kaipolicy.cli import bundle as bundles
from kaipolicy.cli import flags
from kaipolicy.errors import InputError
from kaipolicy.framework.audit import Audit
from kaipolicy.simulate import simulate_file
from kaipolicy.timelimit import time_limit
from kaipolicy.workflow.explain import explain, explain_run
from kaipolicy.workflow.records import load_records


def register(sub: Any) -> None:
    p = sub.add_parser("explain", help="say why a job or pod is pending, placed where it is, or was evicted")
    p.add_argument("name", metavar="JOB-or-POD", help="a job or pod name, optionally namespace/name")
    p.add_argument("scenario", nargs="?", metavar="SCENARIO", help="run this scenario file and explain from its log")
    p.add_argument("--audit", metavar="FILE", help="explain from this audit log (JSON lines) instead")
    p.add_argument("--policies", action="append", metavar="DIR",
                   help="rule files or folders for SCENARIO (default: the bundled policies)")
    p.add_argument("--output", choices=("text", "json"), default="text")
    flags.time_limit_argument(p)
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    if (args.audit is None) == (args.scenario is None):
        raise InputError("explain needs exactly one of --audit FILE or a SCENARIO file")
    if args.audit is not None:
        answer = explain(load_records(args.audit), args.name)
    else:
        audit = Audit(enabled=True)
        with time_limit(args.time_limit):
            result = simulate_file(args.scenario, bundles.load(args.policies), audit=audit)
        answer = explain_run(audit.records, result.report(), args.name)
    print(json.dumps(answer.to_dict(), indent=1) if args.output == "json" else answer.render())
    return 0
