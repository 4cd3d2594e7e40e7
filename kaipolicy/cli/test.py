"""`kaipolicy test PATH... [--coverage] [-v] [-k TEXT]`: run policy test suites (*_test.yaml)."""

from __future__ import annotations

import argparse
from typing import Any

from kaipolicy.workflow.runner import render, run_suites
from kaipolicy.workflow.suite import find_suites


def register(sub: Any) -> None:
    p = sub.add_parser("test", help="run policy test suites (*_test.yaml) and say which pass")
    p.add_argument("paths", nargs="+", metavar="PATH", help="suite files, or folders searched for *_test.yaml")
    p.add_argument("--coverage", action="store_true", help="list the rules of each bundle that decided nothing")
    p.add_argument("-v", "--verbose", action="store_true", help="one line per test")
    p.add_argument("-k", metavar="TEXT", default="", help="run only the tests whose name contains TEXT")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    suites = [str(p) for p in find_suites(args.paths)]
    result = run_suites(suites, keyword=args.k, with_coverage=args.coverage)
    print(render(result, verbose=args.verbose))
    return 1 if result.failed else 0
