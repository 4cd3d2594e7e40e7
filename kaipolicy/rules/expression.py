"""One CEL expression outside a rule file: parse, check and compile it in one call.

For tests, benchmarks and tools (`kaipolicy explain` may evaluate ad-hoc expressions);
problems raise RuleError with diagnostics placed in the expression text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kaipolicy.errors import InputError, RuleError
from kaipolicy.rules.check import Checker
from kaipolicy.rules.compile import compile_expression
from kaipolicy.rules.diagnostics import ERROR, Diagnostic
from kaipolicy.rules.parse import ParseError, parse
from kaipolicy.rules.vocabulary import Vocabulary


@dataclass(frozen=True)
class Expression:
    text: str
    type: str
    variables: tuple[str, ...]
    scalar: Callable[..., Any]
    vector: Callable[..., Any] | None   # None when not vectorizable or no per-node variable
    note: str = ""                       # why it cannot be vectorised


def _diagnostic(text: str, code: str, pos: int, message: str) -> Diagnostic:
    return Diagnostic(code, ERROR, "<expression>", 1, pos + 1, message, "", text.splitlines()[0] if text else "")


def compile_text(text: str, variables: Mapping[str, str], vocabulary: Vocabulary | None = None, *,
                 vector_names: frozenset[str] = frozenset()) -> Expression:
    """Compile `text` over typed `variables` (name -> type); callables take them in that order."""
    vocabulary = vocabulary or Vocabulary()
    for name in variables:
        if not name.isidentifier() or not name.isascii():
            raise InputError(f"variable {name!r}: a variable's name must be a CEL identifier")
    try:
        tree = parse(text)
    except ParseError as err:
        message = f"syntax error: {err.message}" if err.code == "E201" else err.message
        raise RuleError([_diagnostic(text, err.code, err.pos, message)]) from None
    checked = Checker(vocabulary, variables, vector_names=vector_names).check(tree)
    if checked.problems:
        raise RuleError([_diagnostic(text, p.code, p.pos, p.message) for p in checked.problems])
    names = tuple(variables)
    scalar, vector = compile_expression(tree, names, vocabulary, vocabulary.types,
                                        vector_names=vector_names if checked.not_vectorizable is None
                                        else frozenset())
    note = checked.not_vectorizable.message if checked.not_vectorizable else ""
    return Expression(text, checked.type, names, scalar, vector, note)
