"""Diagnostics: one problem found in a rule file, with a stable code and a place.

Codes: E0xx file and YAML, E1xx structure (schema, hooks, arguments), E2xx CEL syntax,
E3xx names and types, E4xx cost, W5xx vectorisation notes, E6xx argument overrides.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any

ERROR = "error"
WARNING = "warning"
MAX_DIAGNOSTICS = 100


@dataclass(frozen=True)
class Diagnostic:
    code: str
    severity: str
    file: str
    line: int          # 1-based; 0 when the problem has no place in a file
    column: int        # 1-based
    message: str
    rule: str = ""
    source_line: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}:{self.column}" if self.line else self.file
        rule = f" [{self.rule}]" if self.rule else ""
        return f"{where}: {self.severity} {self.code}{rule}: {self.message}"

    def render(self) -> str:
        """The one-line form, then the source line with a caret under the column."""
        if not self.source_line:
            return str(self)
        caret = " " * (max(self.column, 1) - 1) + "^"
        return f"{self}\n    {self.source_line}\n    {caret}"

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @property
    def is_error(self) -> bool:
        return self.severity == ERROR


def sort_and_cap(diagnostics: Iterable[Diagnostic], limit: int = MAX_DIAGNOSTICS) -> list[Diagnostic]:
    """Sorted by file, line, column, code; duplicates removed; at most `limit` kept."""
    unique = set(diagnostics)
    ordered = sorted(unique, key=lambda d: (d.file, d.line, d.column, d.code, d.message))
    return ordered[:limit]


def has_errors(diagnostics: Iterable[Diagnostic]) -> bool:
    return any(d.is_error for d in diagnostics)
