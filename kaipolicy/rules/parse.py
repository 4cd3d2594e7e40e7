"""Stage 3, parse: CEL text -> `tree` nodes, with a LALR grammar of our own (lark).

Macros (`all`, `exists`, `exists_one`, `map`, `filter`, `has`) become their own nodes
here; which names and functions exist is the checker's business.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, cast

import lark

from kaipolicy.rules import tree as t

GRAMMAR = r"""
?start: expr
?expr: or_expr QMARK or_expr ":" expr -> cond
     | or_expr
?or_expr: or_expr OR and_expr -> binary
     | and_expr
?and_expr: and_expr AND relation -> binary
     | relation
?relation: relation (LT | LE | GT | GE | EQ | NE | IN) addition -> binary
     | addition
?addition: addition (PLUS | MINUS) multiplication -> binary
     | multiplication
?multiplication: multiplication (STAR | SLASH | PERCENT) unary -> binary
     | unary
?unary: member
     | (BANG | MINUS) unary -> unary
?member: primary
     | member "." (IDENT | QUOTED_FIELD) -> select
     | member "." IDENT "(" [args] ")" -> method
     | member LBRACK expr "]" -> index
?primary: IDENT -> ident
     | "."? IDENT "(" [args] ")" -> call
     | "(" expr ")" -> group
     | LBRACK [items] "]" -> list_lit
     | LBRACE [entries] "}" -> map_lit
     | UINT -> uint_lit
     | FLOAT -> float_lit
     | INT -> int_lit
     | STRING -> string_lit
     | BYTES -> bytes_lit
     | TRUE -> true_lit
     | FALSE -> false_lit
     | NULL -> null_lit
args: expr ("," expr)*
items: expr ("," expr)* ","?
entries: entry ("," entry)* ","?
entry: expr ":" expr

QMARK: "?"
OR: "||"
AND: "&&"
LT: "<"
LE: "<="
GT: ">"
GE: ">="
EQ: "=="
NE: "!="
IN: "in"
PLUS: "+"
MINUS: "-"
STAR: "*"
SLASH: "/"
PERCENT: "%"
BANG: "!"
LBRACK: "["
LBRACE: "{"
TRUE: "true"
FALSE: "false"
NULL: "null"
IDENT: /[_a-zA-Z][_a-zA-Z0-9]*/
QUOTED_FIELD: /`[_a-zA-Z0-9.\-\/ ]+`/
FLOAT.3: /([0-9]+\.[0-9]+([eE][+-]?[0-9]+)?|[0-9]+[eE][+-]?[0-9]+|\.[0-9]+([eE][+-]?[0-9]+)?)/
UINT.3: /(0x[0-9a-fA-F]+|[0-9]+)[uU]/
INT.2: /0x[0-9a-fA-F]+|[0-9]+/
STRING: /[rR]?("{3}(.|\n)*?"{3}|'{3}(.|\n)*?'{3}|"([^"\\\n]|\\.)*"|'([^'\\\n]|\\.)*')/
BYTES: /([bB][rR]?|[rR][bB])("{3}(.|\n)*?"{3}|'{3}(.|\n)*?'{3}|"([^"\\\n]|\\.)*"|'([^'\\\n]|\\.)*')/
COMMENT: /\/\/[^\n]*/
%ignore /[ \t\n\r\f]+/
%ignore COMMENT
"""
MACROS = frozenset({"all", "exists", "exists_one", "map", "filter"})
INT64_MAX = 2**63 - 1
# Limits that keep every later stage (and the Python compiler under the generated code) far from
# its own recursion and nesting limits; docs/policy-language.md states them with their codes.
MAX_EXPRESSION_LENGTH = 10_000   # code points (E203)
MAX_DEPTH = 50                   # levels of the expression tree; `a || b || c` is 3 deep (E202)
_HEX = frozenset("0123456789abcdefABCDEF")
_SIMPLE_ESCAPES = {"a": "\a", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
                   "\\": "\\", "'": "'", '"': '"', "`": "`", "?": "?"}


class ParseError(Exception):
    """A syntax error (or a limit passed, `code`) at character offset `pos` of the expression."""

    def __init__(self, pos: int, message: str, code: str = "E201") -> None:
        super().__init__(message)
        self.pos = pos
        self.message = message
        self.code = code


@lru_cache(maxsize=1)
def _parser() -> lark.Lark:
    return lark.Lark(GRAMMAR, parser="lalr", lexer="contextual", maybe_placeholders=True)


def parse(text: str) -> t.Expr:
    """The tree of one CEL expression; raises ParseError with the offset of the problem."""
    if len(text) > MAX_EXPRESSION_LENGTH:
        raise ParseError(0, f"the expression is {len(text)} characters long, over the limit of "
                            f"{MAX_EXPRESSION_LENGTH}", "E203")
    node = _build(text, _syntax(text))
    _check_depth(node)
    for item in t.walk(node):
        if isinstance(item, t.Literal) and item.kind == "int" and not -INT64_MAX - 1 <= item.value <= INT64_MAX:
            raise ParseError(item.pos, "integer literal out of range")
        if isinstance(item, t.Literal) and item.kind == "uint" and not 0 <= item.value < 2**64:
            raise ParseError(item.pos, "uint literal out of range")
    return node


def _syntax(text: str) -> lark.Tree[lark.Token]:
    try:
        return _parser().parse(text)
    except lark.UnexpectedCharacters as err:
        # lark declares `pos_in_stream = None` on the base class; the lexer always sets it here.
        pos = cast(int, err.pos_in_stream)
        raise ParseError(pos, f"unexpected character {text[pos]!r}") from None
    except lark.UnexpectedEOF:
        raise ParseError(len(text.rstrip()), "unexpected end of expression") from None
    except lark.UnexpectedToken as err:
        pos = err.token.start_pos if err.token.start_pos is not None else len(text)
        what = "end of expression" if err.token.type == "$END" else repr(str(err.token))
        raise ParseError(pos, f"unexpected {what}") from None
    except lark.exceptions.LarkError as err:
        raise ParseError(0, f"cannot parse: {err}") from None


def _build(text: str, raw: lark.Tree[lark.Token]) -> t.Expr:
    """lark's tree -> ours, without recursion (depth is checked after). A literal the builder
    cannot read (`010`, `'\\xZZ'`, an escape past U+10FFFF) is a syntax error at its token."""
    try:
        return _Build().transform(raw)
    except lark.exceptions.VisitError as err:
        if isinstance(err.orig_exc, ParseError):
            raise err.orig_exc from None
        token = next((x for x in _tokens(err.obj)), None)
        pos = _pos(token) if token is not None else 0
        shown = str(token) if token is not None else text
        raise ParseError(pos, f"invalid literal {shown[:40]!r}: {err.orig_exc}") from None


def _tokens(obj: Any) -> Any:
    stack = [obj]
    while stack:
        item = stack.pop()
        if isinstance(item, lark.Token):
            yield item
        elif isinstance(item, lark.Tree):
            stack.extend(reversed(item.children))


def _check_depth(root: t.Expr) -> None:
    """Refuse a tree deeper than MAX_DEPTH before any recursive stage walks it."""
    stack = [(root, 1)]
    while stack:
        node, depth = stack.pop()
        if depth > MAX_DEPTH:
            raise ParseError(node.pos, f"the expression nests deeper than {MAX_DEPTH} levels (a chain of "
                                       "`||` or `&&` counts one level per operator: prefer `x in [...]` "
                                       "or exists())", "E202")
        stack.extend((child, depth + 1) for child in node.children())


def _pos(token: Any) -> int:
    return int(token.start_pos) if isinstance(token, lark.Token) and token.start_pos is not None else 0


class _Build(lark.visitors.Transformer_NonRecursive[lark.Token, t.Expr]):
    """Bottom-up: lark's parse tree -> tree nodes.

    One method per grammar alias; a rule's children are typed `list[Any]` because their shape
    is fixed by the grammar, not by lark's types. Literal aliases end in `_lit`, so that no
    method shadows the builtin `list` the annotations use.
    """

    def __init__(self) -> None:
        super().__init__()
        # Facts about nodes, keyed by id(); each entry holds its node, so a freed node's id cannot
        # lend the fact to a later node.
        self._grouped: dict[int, t.Expr] = {}   # written in parentheses
        self._bare: dict[int, t.Expr] = {}      # left by a cancelled pair of operators (`--5`)
        self._signed: dict[int, tuple[t.Literal, t.Literal]] = {}  # `-5` as one literal: (itself, `5`)

    def group(self, c: list[Any]) -> t.Expr:
        self._grouped[id(c[0])] = c[0]
        return cast(t.Expr, c[0])

    def cond(self, c: list[Any]) -> t.Expr:
        return t.Cond(_pos(c[1]), c[0], c[2], c[3])

    def binary(self, c: list[Any]) -> t.Expr:
        return t.Binary(_pos(c[1]), str(c[1]), c[0], c[2])

    def unary(self, c: list[Any]) -> t.Expr:
        """As in CEL's grammar, a chain of one operator cancels in pairs (`--x` is x, `!!!x` is
        `!x`), and one minus right before a number is its sign (`-9223372036854775808` is an int
        literal), but not a minus before `(5)` nor one left over from a chain (`---5` is `-(5)`)."""
        op, operand, pos = str(c[0]), cast(t.Expr, c[1]), _pos(c[0])
        if id(operand) in self._grouped and self._grouped[id(operand)] is operand:
            return t.Unary(pos, op, operand)
        if isinstance(operand, t.Unary) and operand.op == op:
            return self._left_bare(operand.operand)
        signed = self._signed.get(id(operand))
        if op == "-" and signed is not None and signed[0] is operand:
            return self._left_bare(signed[1])
        if (op == "-" and isinstance(operand, t.Literal) and operand.kind in ("int", "double")
                and self._bare.get(id(operand)) is not operand):
            literal = t.Literal(pos, -operand.value, operand.kind)
            self._signed[id(literal)] = (literal, operand)
            return literal
        return t.Unary(pos, op, operand)

    def _left_bare(self, node: t.Expr) -> t.Expr:
        self._bare[id(node)] = node
        return node

    def select(self, c: list[Any]) -> t.Expr:
        name = str(c[1])  # a backquoted name (`content-type`) selects a map key that is no identifier
        return t.Select(_pos(c[1]), c[0], name[1:-1] if name.startswith("`") else name)

    def index(self, c: list[Any]) -> t.Expr:
        return t.Index(_pos(c[1]), c[0], c[2])

    def ident(self, c: list[Any]) -> t.Expr:
        return t.Ident(_pos(c[0]), str(c[0]))

    def args(self, c: list[Any]) -> list[t.Expr]:
        return list(c)

    def items(self, c: list[Any]) -> list[t.Expr]:
        return [item for item in c if isinstance(item, t.Expr)]

    def entries(self, c: list[Any]) -> list[tuple[t.Expr, t.Expr]]:
        return [item for item in c if isinstance(item, tuple)]

    def entry(self, c: list[Any]) -> tuple[t.Expr, t.Expr]:
        return (c[0], c[1])

    def list_lit(self, c: list[Any]) -> t.Expr:
        return t.ListLit(_pos(c[0]), c[1] or [])

    def map_lit(self, c: list[Any]) -> t.Expr:
        return t.MapLit(_pos(c[0]), c[1] or [])

    def call(self, c: list[Any]) -> t.Expr:
        name, args = c[0], c[1] or []
        if str(name) == "has":
            if len(args) != 1 or not isinstance(args[0], t.Select):
                raise ParseError(_pos(name), "has() takes one field selection, like has(x.f)")
            return t.Has(_pos(name), args[0].operand, args[0].field)
        return t.Call(_pos(name), str(name), None, args)

    def method(self, c: list[Any]) -> t.Expr:
        target, name, args = c[0], str(c[1]), c[2] or []
        if name in MACROS and args and isinstance(args[0], t.Ident):
            return self._macro(_pos(c[1]), name, target, args)
        return t.Call(_pos(c[1]), name, target, args)

    def _macro(self, pos: int, name: str, target: t.Expr, args: list[t.Expr]) -> t.Expr:
        var = args[0].name if isinstance(args[0], t.Ident) else ""
        if name == "map" and len(args) in (2, 3):
            pred = args[1] if len(args) == 3 else None
            return t.Comprehension(pos, name, target, var, pred, args[-1])
        if len(args) != 2:
            raise ParseError(pos, f"macro {name}() takes a variable and one expression")
        return t.Comprehension(pos, name, target, var, args[1], None)

    def int_lit(self, c: list[Any]) -> t.Expr:
        return t.Literal(_pos(c[0]), int(str(c[0]), 0), "int")

    def uint_lit(self, c: list[Any]) -> t.Expr:
        return t.Literal(_pos(c[0]), int(str(c[0])[:-1], 0), "uint")

    def float_lit(self, c: list[Any]) -> t.Expr:
        return t.Literal(_pos(c[0]), float(str(c[0])), "double")

    def string_lit(self, c: list[Any]) -> t.Expr:
        return t.Literal(_pos(c[0]), _unquote(str(c[0]), _pos(c[0])), "string")

    def bytes_lit(self, c: list[Any]) -> t.Expr:
        text = str(c[0])  # b'..', br'..' or rb'..': keep the r, drop the b
        body, pos = (text[1:], _pos(c[0]) + 1) if text[0] in "bB" else (text[0] + text[2:], _pos(c[0]))
        return t.Literal(_pos(c[0]), _unquote(body, pos, as_bytes=True), "bytes")

    def true_lit(self, c: list[Any]) -> t.Expr:
        return t.Literal(_pos(c[0]), True, "bool")

    def false_lit(self, c: list[Any]) -> t.Expr:
        return t.Literal(_pos(c[0]), False, "bool")

    def null_lit(self, c: list[Any]) -> t.Expr:
        return t.Literal(_pos(c[0]), None, "null")


def _unquote(text: str, pos: int, as_bytes: bool = False) -> str | bytes:
    """The value of a string or bytes literal token (prefix letters already removed from `text`
    except `r`); `pos` is the token's offset, for errors."""
    raw = text[0] in "rR"
    start = 1 if raw else 0
    quote = 3 if text[start:start + 3] in ('"""', "'''") else 1
    body = text[start + quote:-quote]
    if raw:
        return body.encode("utf-8") if as_bytes else body
    return _unescape(body, pos + start + quote, as_bytes)


def _unescape(body: str, pos: int, as_bytes: bool) -> str | bytes:
    """CEL escapes: in bytes, \\x, \\X and octal escapes are single octets (not UTF-8 of a
    code point) and \\u, \\U are not allowed; in strings they are code points, no surrogates."""
    out = bytearray() if as_bytes else None
    text: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c != "\\":
            j = body.find("\\", i)
            chunk = body[i:] if j < 0 else body[i:j]
            if out is not None:
                out += chunk.encode("utf-8")
            else:
                text.append(chunk)
            i += len(chunk)
            continue
        code, width, octet = _escape(body, i, pos, as_bytes)
        if out is not None:
            out += bytes([code]) if octet else chr(code).encode("utf-8")
        else:
            text.append(chr(code))
        i += width
    return bytes(out) if out is not None else "".join(text)


def _escape(body: str, i: int, pos: int, as_bytes: bool) -> tuple[int, int, bool]:
    """(code, length of the escape, whether the code is one octet) for the escape at body[i]."""
    nxt = body[i + 1:i + 2]
    where = pos + i
    if nxt in _SIMPLE_ESCAPES:
        return ord(_SIMPLE_ESCAPES[nxt]), 2, False
    if nxt in ("x", "X", "u", "U"):
        width = {"x": 2, "X": 2, "u": 4, "U": 8}[nxt]
        digits = body[i + 2:i + 2 + width]
        if len(digits) != width or any(d not in _HEX for d in digits):
            raise ParseError(where, f"'\\{nxt}' needs {width} hexadecimal digits")
        if as_bytes and nxt in "uU":
            raise ParseError(where, f"'\\{nxt}' escapes are not allowed in bytes literals")
        code = int(digits, 16)
        if nxt in "uU" and (0xD800 <= code <= 0xDFFF or code > 0x10FFFF):
            raise ParseError(where, f"'\\{nxt}{digits}' is not a Unicode code point")
        return code, 2 + width, as_bytes and nxt in "xX"
    digits = body[i + 1:i + 4]
    if len(digits) == 3 and digits[0] in "0123" and all(d in "01234567" for d in digits[1:]):
        return int(digits, 8), 4, as_bytes
    if nxt.isdigit():
        raise ParseError(where, "an octal escape is three digits from \\000 to \\377")
    raise ParseError(where, f"invalid escape sequence '\\{nxt}'")
