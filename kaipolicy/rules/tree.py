"""The expression tree: small dataclasses made by `parse`, annotated by `check`.

`pos` is the character offset inside the expression text (for diagnostics); `type` and
`vector` are filled in by the checker and read by the code generators.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any


@dataclass(eq=False)
class Expr:
    pos: int
    type: str = field(default="dyn", init=False)
    vector: bool = field(default=False, init=False)

    def children(self) -> Iterator[Expr]:
        return iter(())


@dataclass(eq=False)
class Literal(Expr):
    value: Any
    kind: str  # int, uint, double, string, bytes, bool, null


@dataclass(eq=False)
class Ident(Expr):
    name: str


@dataclass(eq=False)
class Select(Expr):
    operand: Expr
    field: str

    def children(self) -> Iterator[Expr]:
        yield self.operand


@dataclass(eq=False)
class Index(Expr):
    operand: Expr
    index: Expr

    def children(self) -> Iterator[Expr]:
        yield self.operand
        yield self.index


@dataclass(eq=False)
class Call(Expr):
    name: str
    target: Expr | None
    args: list[Expr]

    @property
    def function(self) -> str:
        """The called function's full name: its name, or `namespace.name` when called on an
        identifier (the checker resolves a vocabulary call to its full name); "" for a method of
        some other value."""
        if self.target is None:
            return self.name
        return f"{self.target.name}.{self.name}" if isinstance(self.target, Ident) else ""

    def children(self) -> Iterator[Expr]:
        if self.target is not None:
            yield self.target
        yield from self.args


@dataclass(eq=False)
class ListLit(Expr):
    items: list[Expr]

    def children(self) -> Iterator[Expr]:
        yield from self.items


@dataclass(eq=False)
class MapLit(Expr):
    entries: list[tuple[Expr, Expr]]

    def children(self) -> Iterator[Expr]:
        for key, value in self.entries:
            yield key
            yield value


@dataclass(eq=False)
class Unary(Expr):
    op: str  # "!" or "-"
    operand: Expr

    def children(self) -> Iterator[Expr]:
        yield self.operand


@dataclass(eq=False)
class Binary(Expr):
    op: str  # + - * / % < <= > >= == != in && ||
    left: Expr
    right: Expr

    def children(self) -> Iterator[Expr]:
        yield self.left
        yield self.right


@dataclass(eq=False)
class Cond(Expr):
    cond: Expr
    then: Expr
    other: Expr

    def children(self) -> Iterator[Expr]:
        yield self.cond
        yield self.then
        yield self.other


@dataclass(eq=False)
class Has(Expr):
    operand: Expr
    field: str

    def children(self) -> Iterator[Expr]:
        yield self.operand


@dataclass(eq=False)
class Comprehension(Expr):
    macro: str  # all, exists, exists_one, filter, map
    range: Expr
    var: str
    pred: Expr | None
    result: Expr | None

    def children(self) -> Iterator[Expr]:
        yield self.range
        if self.pred is not None:
            yield self.pred
        if self.result is not None:
            yield self.result


def walk(node: Expr) -> Iterator[Expr]:
    """Every node, parents before children."""
    yield node
    for child in node.children():
        yield from walk(child)
