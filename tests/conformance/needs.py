"""What a CEL expression needs, read from its tokens alone (no parser of ours takes part).

`scan(expr, variables)` lists the calls it makes (name, receiver or not, argument count,
qualified name), the identifiers it reads as values, struct literals and optional syntax.
`subset.py` turns that into the feature a conformance case needs.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

# Literals come first so that their words never count; `?` is kept alone (ternary or optional).
_TOKEN = re.compile(r"""
    (?P<space>\s+|//[^\n]*)
  | (?P<literal>[rRbB]{0,2}("{3}(.|\n)*?"{3}|'{3}(.|\n)*?'{3}|"([^"\\\n]|\\.)*"|'([^'\\\n]|\\.)*')
               |0[xX][0-9a-fA-F]+[uU]?|[0-9]*\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|[0-9]+[uU]?)
  | (?P<quoted>`[^`]*`)
  | (?P<ident>[_a-zA-Z][_a-zA-Z0-9]*)
  | (?P<punct>&&|\|\||==|!=|<=|>=|[-+*/%!<>?:.,()\[\]{}])
  | (?P<other>.)
""", re.VERBOSE)
MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
KEYWORDS = frozenset({"in", "true", "false", "null"})


@dataclass(frozen=True)
class Call:
    name: str            # the function's own name: `contains` in `x.contains(y)` and `sets.contains(a, b)`
    receiver: bool       # called as `target.name(...)` on a value (not on a namespace)
    args: int
    namespace: str = ""  # `sets` in `sets.contains(a, b)`: the target is a name no variable has


@dataclass
class Needs:
    calls: list[Call] = field(default_factory=list)
    names: set[str] = field(default_factory=set)          # identifiers read as values (roots of selections)
    bound: set[str] = field(default_factory=set)          # names its macros bind
    structs: bool = False                                  # `Name{...}`: a message literal
    optional_syntax: bool = False                          # `x.?f`, `l[?0]`, `{?k: v}`, `[?x]`


def _tokens(expr: str) -> list[tuple[str, str]]:
    out = []
    for match in _TOKEN.finditer(expr):
        kind = match.lastgroup or "other"
        if kind != "space":
            out.append((kind, match.group()))
    return out


def _arguments(tokens: list[tuple[str, str]], open_at: int) -> int:
    """How many arguments the call whose `(` is at `open_at` passes (top-level commas + 1)."""
    depth, commas = 0, 0
    for kind, text in tokens[open_at:]:
        if kind == "punct" and text in "([{":
            depth += 1
        elif kind == "punct" and text in ")]}":
            depth -= 1
            if depth == 0:
                break
        elif kind == "punct" and text == "," and depth == 1:
            commas += 1
    empty = open_at + 1 < len(tokens) and tokens[open_at + 1] == ("punct", ")")
    return 0 if empty else commas + 1


def _macro_variables(tokens: list[tuple[str, str]]) -> set[str]:
    """Names a macro binds (`x` in `l.all(x, p)`, `k` and `v` in `m.all(k, v, p)`), wherever they are."""
    bound = set()
    for i in range(len(tokens) - 3):
        if tokens[i] == ("punct", ".") and tokens[i + 1][0] == "ident" and tokens[i + 2] == ("punct", "("):
            j = i + 3
            while j + 1 < len(tokens) and tokens[j][0] == "ident" and tokens[j + 1] == ("punct", ","):
                bound.add(tokens[j][1])
                j += 2
    return bound


def _chain_root(tokens: list[tuple[str, str]], i: int) -> int:
    """The index of the first identifier of the `a.b.c` chain that ends at identifier i."""
    while i >= 2 and tokens[i - 1] == ("punct", ".") and tokens[i - 2][0] == "ident":
        i -= 2
    return i


def scan(expr: str, variables: set[str]) -> Needs:
    """The needs of `expr` where `variables` are the names the case declares or binds."""
    tokens = _tokens(expr)
    needs = Needs(bound=_macro_variables(tokens))
    known = variables | needs.bound
    for i, (kind, text) in enumerate(tokens):
        before = tokens[i - 1] if i else ("", "")
        after = tokens[i + 1] if i + 1 < len(tokens) else ("", "")
        if text == "?" and before[1] in (".", "[", "{", ","):
            needs.optional_syntax = True
        if kind != "ident" or text in KEYWORDS:
            continue
        if after == ("punct", "{"):
            needs.structs = True
        if after == ("punct", "("):
            needs.calls.append(_call(tokens, i, known))
        elif before != ("punct", "."):
            needs.names.add(text)
    return needs


def _call(tokens: list[tuple[str, str]], i: int, known: set[str]) -> Call:
    name, args = tokens[i][1], _arguments(tokens, i + 1)
    if tokens[i - 1:i] != [("punct", ".")]:
        return Call(name, False, args)
    root = _chain_root(tokens, i - 2) if i >= 2 and tokens[i - 2][0] == "ident" else i
    opens_chain = root == 0 or tokens[root - 1][1] not in (".", ")", "]", "}")
    if root < i and opens_chain and tokens[root][1] not in known:
        namespace = ".".join(text for kind, text in tokens[root:i - 1] if kind == "ident")
        return Call(name, False, args, namespace)
    return Call(name, True, args)
