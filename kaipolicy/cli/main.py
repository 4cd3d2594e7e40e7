"""`kaipolicy` entry point: dispatches to the subcommand modules; errors print without tracebacks."""

from __future__ import annotations

import argparse
import os
import sys

from kaipolicy.cli import binder, diff, explain, lint, run, simulate, snapshot, test
from kaipolicy.cli.text import internal_error, printable_lines, tolerant_streams
from kaipolicy.errors import KaipolicyError


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kaipolicy", description="A policy-driven GPU scheduler (KAI semantics).")
    sub = ap.add_subparsers(dest="command", required=True)
    simulate.register(sub)
    lint.register(sub)
    explain.register(sub)
    test.register(sub)
    diff.register(sub)
    snapshot.register(sub)
    run.register(sub)
    binder.register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    tolerant_streams()
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except KaipolicyError as e:
        print(f"kaipolicy: {printable_lines(str(e))}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    except Exception as e:  # a bug must still end in one line, not a traceback
        if os.environ.get("KAIPOLICY_TRACEBACK"):
            raise
        print(f"kaipolicy: {internal_error(e)}", file=sys.stderr)
        return 70


if __name__ == "__main__":
    sys.exit(main())
