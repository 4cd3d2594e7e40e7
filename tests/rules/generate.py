"""Random well-typed CEL expressions over `task` and `node` (the rule tests' vocabulary) that mix
regexes, non-finite constants, comprehensions, ternaries, string building, run-time errors, lists of
doubles (NaN included) and values behind dyn (across kinds, and non-bools where CEL wants a bool).

`expression(rng, type)` returns CEL text of that type; the differential test evaluates it with
our scalar and vector forms and with the celpy and cel-expr-python oracles.
"""

from __future__ import annotations

import random
from collections.abc import Callable

REGEXES = ["^a", "^b", "a.*c", "[0-9]+$", "^(a|b)*$", "node-[12]", "^$", "x|y", "^n"]
STRINGS = ["'a'", "'b'", "'abc'", "''", "'node-1'", "'x1'", "'n'"]
DOUBLES = ["0.0", "1.0", "2.5", "-1.5", "1e999", "-1e999", "1e-300", "0.5", "8.0"]
INTS = ["0", "1", "2", "-3", "7", "9223372036854775807", "-9223372036854775807"]
LABEL_KEYS = ["'zone'", "'tier'", "'missing'"]


class Generator:
    def __init__(self, rng: random.Random, max_depth: int = 4) -> None:
        self.rng = rng
        self.max_depth = max_depth
        self.scopes: list[tuple[str, str]] = []   # comprehension variables in scope: (name, type)

    def expression(self, typ: str, depth: int = 0) -> str:
        makers: dict[str, Callable[[int], str]] = {"double": self.double, "int": self.int_, "bool": self.bool_,
                                                   "string": self.string}
        return makers[typ](depth)

    def _leaf_or(self, depth: int, leaves: list[str], compound: list[Callable[[int], str]]) -> str:
        if depth >= self.max_depth or self.rng.random() < 0.3:
            return self.rng.choice(leaves)
        return self.rng.choice(compound)(depth + 1)

    def _scoped(self, typ: str) -> list[str]:
        return [name for name, t in self.scopes if t == typ]

    def double(self, depth: int) -> str:
        leaves = DOUBLES + ["task.gpus", "node.idleGpus", "node.allocatableGpus"] + self._scoped("double")
        return self._leaf_or(depth, leaves, [
            lambda d: f"({self.double(d)} {self.rng.choice('+-*/')} {self.double(d)})",
            lambda d: f"-{self.double(d)}",
            lambda d: f"({self.bool_(d)} ? {self.double(d)} : {self.double(d)})",
            lambda d: f"double({self.int_(d)})",
        ])

    def int_(self, depth: int) -> str:
        leaves = INTS + ["node.pods", "task.priority"] + self._scoped("int")
        return self._leaf_or(depth, leaves, [
            lambda d: f"({self.int_(d)} {self.rng.choice('+-*/%')} {self.int_(d)})",
            lambda d: f"-{self.int_(d)}",
            lambda d: f"({self.bool_(d)} ? {self.int_(d)} : {self.int_(d)})",
            lambda d: f"size({self.string(d)})",
            lambda d: f"{self.int_list(d)}.size()",
            lambda d: f"{self.int_list(d)}[{self.int_(d)}]",
        ])

    def int_list(self, depth: int) -> str:
        items = ", ".join(self.int_(self.max_depth) for _ in range(self.rng.randint(0, 3)))
        if depth >= self.max_depth or self.rng.random() < 0.5:
            return f"[{items}]"
        var = f"v{len(self.scopes)}"
        inner = f"[{items}]"
        self.scopes.append((var, "int"))
        try:
            if self.rng.random() < 0.5:
                return f"{inner}.map({var}, {self.int_(depth + 1)})"
            return f"{inner}.filter({var}, {self.bool_(depth + 1)})"
        finally:
            self.scopes.pop()

    def string(self, depth: int) -> str:
        leaves = STRINGS + ["task.name", "node.name"]
        return self._leaf_or(depth, leaves, [
            lambda d: f"({self.string(d)} + {self.string(d)})",
            lambda d: f"({self.bool_(d)} ? {self.string(d)} : {self.string(d)})",
            lambda d: f"string({self.int_(d)})",
            lambda d: f"task.labels[{self.rng.choice(LABEL_KEYS)}]",
            lambda d: f"node.labels[{self.rng.choice(LABEL_KEYS)}]",
        ])

    def bool_(self, depth: int) -> str:
        leaves = ["true", "false"] + self._scoped("bool")
        return self._leaf_or(depth, leaves, [
            lambda d: f"({self.double(d)} {self.rng.choice(['<', '<=', '>', '>=', '==', '!='])} {self.double(d)})",
            lambda d: f"({self.int_(d)} {self.rng.choice(['<', '>=', '==', '!='])} {self.int_(d)})",
            lambda d: f"({self.string(d)} {self.rng.choice(['<', '==', '!='])} {self.string(d)})",
            lambda d: f"({self.bool_(d)} {self.rng.choice(['&&', '||'])} {self.bool_(d)})",
            lambda d: f"!{self.bool_(d)}",
            lambda d: f"({self.bool_(d)} ? {self.bool_(d)} : {self.bool_(d)})",
            lambda d: f"{self.string(d)}.matches('{self.rng.choice(REGEXES)}')",
            lambda d: f"{self.string(d)}.{self.rng.choice(['startsWith', 'endsWith', 'contains'])}"
                      f"({self.string(d)})",
            lambda d: f"({self.rng.choice(LABEL_KEYS)} in {self.rng.choice(['task', 'node'])}.labels)",
            lambda d: f"({self.int_(d)} in {self.int_list(d)})",
            lambda d: self._quantifier(d),
            lambda d: self._dynamic(d),
            lambda d: f"({self.double_list(d)} {self.rng.choice(['==', '!='])} {self.double_list(d)})",
            lambda d: f"({self.double(d)} in {self.double_list(d)})",
        ])

    def double_list(self, depth: int) -> str:
        return "[" + ", ".join(self.double(self.max_depth) for _ in range(self.rng.randint(0, 2))) + "]"

    def _dynamic(self, depth: int) -> str:
        """Values behind dyn: equality across kinds, and non-bools where CEL wants a bool."""
        value = self.rng.choice([self.int_, self.double, self.bool_, self.string])(depth)
        return self.rng.choice([
            lambda: f"(dyn({value}) == {self.rng.choice([self.int_, self.double])(depth)})",
            lambda: f"(dyn({value}) {self.rng.choice(['&&', '||'])} {self.bool_(depth)})",
            lambda: f"({self.bool_(depth)} {self.rng.choice(['&&', '||'])} dyn({value}))",
            lambda: f"(dyn({value}) ? {self.bool_(depth)} : {self.bool_(depth)})",
            lambda: f"!dyn({value})",
        ])()

    def _quantifier(self, depth: int) -> str:
        var = f"v{len(self.scopes)}"
        macro = self.rng.choice(["all", "exists", "exists_one"])
        target = self.int_list(depth)
        self.scopes.append((var, "int"))
        try:
            return f"{target}.{macro}({var}, {self.bool_(depth)})"
        finally:
            self.scopes.pop()
