"""`kaipolicy lint [PATH...] [--format text|json]`: check rule files without running anything."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from kaipolicy.cli import bundle as bundles
from kaipolicy.cli.text import printable_lines


def register(sub: Any) -> None:
    p = sub.add_parser("lint", help="check rule files: syntax, names, types, cost")
    p.add_argument("paths", nargs="*", metavar="PATH", help="rule files or folders (default: the bundled policies)")
    p.add_argument("--format", choices=("text", "json"), default="text")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    from kaipolicy.rules import lint
    from kaipolicy.rules.standard import VOCABULARY

    paths = [Path(p) for p in args.paths] if args.paths else [bundles.default_policies()]
    diags = lint(paths, VOCABULARY)
    if args.format == "json":
        print(json.dumps([d.to_dict() for d in diags], indent=1))
    else:
        for d in diags:
            # messages and source lines come from the files: their control characters are escaped
            print(printable_lines(d.render() if hasattr(d, "render") else str(d)))
        errors = sum(1 for d in diags if getattr(d, "severity", "error") == "error")
        print(f"{len(diags)} problem(s), {errors} error(s)" if diags else "no problems")
    return 1 if any(getattr(d, "severity", "error") == "error" for d in diags) else 0
