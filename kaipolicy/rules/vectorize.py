"""Vector code generation: one call evaluates an expression for every candidate node.

Per-node variables are objects whose attributes are numpy arrays; everything the checker
marked scalar is emitted by the scalar emitter, so task-only parts run once per call.
Errors are not absorbed element by element: any failure raises, and the caller falls
back to scalar evaluation node by node (see docs/policy-language.md).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kaipolicy.rules import runtime as rt
from kaipolicy.rules import tree as t
from kaipolicy.rules.emit import Emitter, truth


def _checked_int(result: Any) -> Any:
    if np.any((result < rt.INT_MIN) | (result > rt.INT_MAX)):
        raise OverflowError("integer overflow")
    return np.asarray(result, dtype=np.int64)


def vint(op: str, a: Any, b: Any) -> Any:
    """64-bit integer arithmetic on arrays, computed exactly (object dtype) only when it may overflow."""
    a64, b64 = np.asarray(a, dtype=np.int64), np.asarray(b, dtype=np.int64)
    if op in "/%":
        if np.any(b64 == 0):
            raise ZeroDivisionError("division by zero")
        q = np.abs(a64) // np.abs(b64)
        if op == "/":
            return _checked_int(np.where((a64 < 0) != (b64 < 0), -q, q))
        r = np.abs(a64) % np.abs(b64)
        return np.where(a64 < 0, -r, r)
    approx = {"+": np.add, "-": np.subtract, "*": np.multiply}[op](a64.astype(float), b64.astype(float))
    if np.any(np.abs(approx) >= 9.2e18):
        exact = {"+": np.add, "-": np.subtract, "*": np.multiply}[op](a64.astype(object), b64.astype(object))
        return _checked_int(exact)
    return {"+": np.add, "-": np.subtract, "*": np.multiply}[op](a64, b64)


def vneg(a: Any) -> Any:
    a64 = np.asarray(a, dtype=np.int64)
    if np.any(a64 == rt.INT_MIN):
        raise OverflowError("integer overflow")
    return -a64


def vto_int(a: Any) -> Any:
    arr = np.asarray(a)
    if arr.dtype.kind == "f":
        if not np.all(np.isfinite(arr)) or np.any(np.abs(arr) >= 9.223372036854775807e18):
            raise OverflowError("integer overflow")
        return np.trunc(arr).astype(np.int64)
    return arr.astype(np.int64)


def vresult(value: Any, n: int) -> Any:
    """A per-node array of length n (a scalar result is broadcast)."""
    arr = np.asarray(value)
    return np.full(n, arr[()]) if arr.ndim == 0 else arr


VECTOR_HELPERS: dict[str, Any] = {"_np": np, "_vint": vint, "_vneg": vneg, "_vto_int": vto_int,
                                  "_vres": vresult}


class VectorEmitter(Emitter):
    """Like Emitter, but nodes the checker marked `vector` become numpy operations."""

    def emit(self, node: t.Expr) -> str:
        if not node.vector:
            return super().emit(node)
        method = getattr(self, "_v" + type(node).__name__.lower(), None)
        if method is None:
            raise NotImplementedError(f"{type(node).__name__} cannot be vectorised")
        return str(method(node))

    def _vident(self, node: t.Ident) -> str:
        return self._ident(node)

    def _vselect(self, node: t.Select) -> str:
        return self._select(node)

    def _vunary(self, node: t.Unary) -> str:
        operand = self.emit(node.operand)
        if node.op == "!":
            return f"_np.logical_not({operand})"
        return f"_vneg({operand})" if node.operand.type == "int" else f"(-{operand})"

    def _vcond(self, node: t.Cond) -> str:
        cond, then, other = self.emit(node.cond), self.emit(node.then), self.emit(node.other)
        if node.cond.vector:
            return f"_np.where({cond}, {then}, {other})"
        return f"({then} if {truth(node.cond, cond)} else {other})"

    def _vbinary(self, node: t.Binary) -> str:
        left, right = self.emit(node.left), self.emit(node.right)
        op = node.op
        if op == "&&":
            return f"({right} if {left} else False)" if not node.left.vector else \
                f"_np.logical_and({left}, {right})"
        if op == "||":
            return f"(True if {left} else {right})" if not node.left.vector else \
                f"_np.logical_or({left}, {right})"
        if op in ("==", "!=", "<", "<=", ">", ">="):
            return f"({left} {op} {right})"
        if "int" in (node.left.type, node.right.type) and node.type == "int":
            return f"_vint({op!r}, {left}, {right})"
        if op == "/":
            return f"_np.true_divide({left}, {right})"
        return f"({left} {op} {right})"

    def _vcall(self, node: t.Call) -> str:
        args = [self.emit(a) for a in node.args]
        spec = self.vocabulary.functions.get(node.name) if node.target is None else None
        if spec is not None and spec.vector_impl is not None:
            return f"{self.ns.bind('_fv', spec.vector_impl)}({', '.join(args)})"
        if node.name == "double":
            return f"_np.asarray({args[0]}, dtype=float)"
        if node.name == "int":
            return f"_vto_int({args[0]})"
        raise NotImplementedError(f"{node.name}() cannot be vectorised")
