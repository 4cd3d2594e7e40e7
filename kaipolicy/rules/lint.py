"""What `kaipolicy lint` runs: every diagnostic of some rule files, as text or JSON."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from kaipolicy.rules.bundle import DEFAULT_VECTOR_NAMES, compile_paths
from kaipolicy.rules.cost import DEFAULT_COST_LIMIT
from kaipolicy.rules.diagnostics import Diagnostic
from kaipolicy.rules.vocabulary import Vocabulary


def lint(paths: Sequence[str | Path], vocabulary: Vocabulary, *,
         vector_names: frozenset[str] = DEFAULT_VECTOR_NAMES,
         cost_limit: int = DEFAULT_COST_LIMIT) -> list[Diagnostic]:
    """Errors and warnings of the files, sorted and capped; empty when all is well."""
    _, diags = compile_paths(paths, vocabulary, vector_names=vector_names, cost_limit=cost_limit)
    return diags


def format_text(diagnostics: Sequence[Diagnostic]) -> str:
    if not diagnostics:
        return "no problems found"
    errors = sum(d.is_error for d in diagnostics)
    body = "\n".join(d.render() for d in diagnostics)
    return f"{body}\n{errors} error(s), {len(diagnostics) - errors} warning(s)"


def format_json(diagnostics: Sequence[Diagnostic]) -> str:
    return json.dumps([d.to_dict() for d in diagnostics], indent=2)


def format_diagnostics(diagnostics: Sequence[Diagnostic], fmt: str = "text") -> str:
    if fmt == "json":
        return format_json(diagnostics)
    if fmt == "text":
        return format_text(diagnostics)
    raise ValueError(f"unknown format {fmt!r} (text or json)")
