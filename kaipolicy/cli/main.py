"""`kaipolicy` entry point: dispatches to the subcommand modules; errors print without tracebacks."""

from __future__ import annotations

import argparse
import sys

from kaipolicy.cli import lint, simulate, snapshot
from kaipolicy.errors import KaipolicyError


def build_parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="kaipolicy", description="A policy-driven GPU scheduler (KAI semantics).")
    sub = ap.add_subparsers(dest="command", required=True)
    simulate.register(sub)
    lint.register(sub)
    snapshot.register(sub)
    return ap


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.run(args))
    except KaipolicyError as e:
        print(f"kaipolicy: {e}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main())
