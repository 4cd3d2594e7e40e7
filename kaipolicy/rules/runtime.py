"""Helpers that generated rule code calls, and EvalError: CEL's run-time semantics in Python.

Integer arithmetic is 64-bit with overflow as an error, division truncates toward zero,
`&&`/`||` and the `all`/`exists` macros absorb errors the way CEL does. Everything a
rule can fail with at run time ends up as one EvalError naming the rule.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sized
from functools import lru_cache
from typing import Any, NoReturn

import numpy as np
import re2

from kaipolicy.errors import KaipolicyError
from kaipolicy.rules.cost import Meter, OverBudget

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
UINT_MAX = 2**64 - 1
REGEX_MAX_MEM = 4 << 20   # bytes RE2 may use for one pattern (128 cached: at most 512 MiB in all)
_NUMBERS = (int, float, np.integer, np.floating)


class EvalError(KaipolicyError, RuntimeError):
    """A rule failed while evaluating (missing key, division by zero, overflow, a function raised)."""

    def __init__(self, rule: str, file: str, line: int, message: str) -> None:
        self.rule = rule
        self.file = file
        self.line = line
        self.message = message
        super().__init__(f"{file}:{line}: rule {rule!r}: {message}")


def failure(rule: str, file: str, line: int) -> Callable[[BaseException], EvalError]:
    """The converter a compiled rule uses to turn any exception into its EvalError."""
    def convert(err: BaseException) -> EvalError:
        if isinstance(err, EvalError):
            return err
        return EvalError(rule, file, line, describe(err))
    return convert


def describe(err: BaseException) -> str:
    if isinstance(err, OverBudget):
        return str(err)
    if isinstance(err, RecursionError):
        return "the evaluation nested too deeply"
    if isinstance(err, KeyError):
        return f"no such key: {err.args[0]!r}" if err.args else "no such key"
    if isinstance(err, IndexError):
        return "index out of range"
    if isinstance(err, ZeroDivisionError):
        return str(err) or "division by zero"
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


def overflow() -> NoReturn:
    raise OverflowError("integer overflow")


def idiv(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("division by zero")
    q = abs(a) // abs(b)
    q = q if (a < 0) == (b < 0) else -q
    return q if q <= INT_MAX else overflow()


def imod(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("modulus by zero")
    r = abs(a) % abs(b)
    return -r if a < 0 else r


def fdiv(a: float, b: float) -> float:
    if b == 0:
        if a == 0 or math.isnan(a):
            return math.nan
        return math.copysign(math.inf, a) * math.copysign(1.0, b)
    return a / b


def neg(a: int) -> int:
    return -a if a != INT_MIN else overflow()


def kind(value: Any) -> str:
    """CEL kind of a run-time value, for the dynamically typed operators below."""
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int"
    if isinstance(value, float):
        return "double"
    return type(value).__name__


def arith(op: str, a: Any, b: Any) -> Any:
    """`a op b` when the checker could not tell the operand types apart (dyn)."""
    ka, kb = kind(a), kind(b)
    if ka != kb:
        raise TypeError(f"no such overload: {ka} {op} {kb}")
    if ka in ("int", "double") and op in "+-*":
        result = a + b if op == "+" else a - b if op == "-" else a * b
        return result if ka == "double" or INT_MIN <= result <= INT_MAX else overflow()
    if ka == "int" and op in "/%":
        return idiv(a, b) if op == "/" else imod(a, b)
    if ka == "double" and op == "/":
        return fdiv(a, b)
    if op == "+" and ka in ("str", "bytes", "list"):
        return a + b
    raise TypeError(f"no such overload: {ka} {op} {kb}")


def and_(left: Callable[[], Any], right: Callable[[], Any]) -> Any:
    """CEL `&&`: false wins over an error on either side (never over a spent budget)."""
    try:
        a = left()
    except OverBudget:
        raise
    except Exception:
        if right() is False:
            return False
        raise
    if a is False:
        return False
    b = right()
    return b if a is True else _not_bool(a)


def or_(left: Callable[[], Any], right: Callable[[], Any]) -> Any:
    """CEL `||`: true wins over an error on either side (never over a spent budget)."""
    try:
        a = left()
    except OverBudget:
        raise
    except Exception:
        if right() is True:
            return True
        raise
    if a is True:
        return True
    b = right()
    return b if a is False else _not_bool(a)


def _not_bool(value: Any) -> Any:
    raise TypeError(f"no such overload: {kind(value)} used as a bool")


def _quantify(items: Iterable[Any], pred: Callable[[Any], Any], decisive: bool) -> bool:
    """`decisive` as soon as one item gives it; an error counts only if none does (CEL)."""
    error: Exception | None = None
    for item in items:
        try:
            if pred(item) is decisive:
                return bool(decisive)
        except OverBudget:
            raise
        except Exception as err:  # noqa: BLE001 - CEL absorbs one branch's error if another decides
            error = error or err
    if error is not None:
        raise error
    return not decisive


def each(meter: Meter, unit: int, items: Sized) -> Any:
    """A comprehension's range, charged to the evaluation's budget before the walk starts."""
    meter.charge(items, unit)
    return items


def all_(meter: Meter, unit: int, items: Sized, pred: Callable[[Any], Any]) -> bool:
    return _quantify(each(meter, unit, items), pred, False)


def exists(meter: Meter, unit: int, items: Sized, pred: Callable[[Any], Any]) -> bool:
    return _quantify(each(meter, unit, items), pred, True)


def exists_one(meter: Meter, unit: int, items: Sized, pred: Callable[[Any], Any]) -> bool:
    return sum(1 for item in each(meter, unit, items) if pred(item) is True) == 1


def list_index(items: list[Any], i: int) -> Any:
    if isinstance(i, bool) or not 0 <= i < len(items):
        raise IndexError(i)
    return items[i]


class RegexError(ValueError):
    """A pattern RE2 refuses (CEL's `matches` is specified over RE2 syntax)."""


def _re2_options() -> re2.Options:
    options = re2.Options()
    options.log_errors = False          # RE2 would print parse errors to stderr itself
    options.max_mem = REGEX_MAX_MEM
    return options


@lru_cache(maxsize=128)
def regex(pattern: str) -> Any:
    """The compiled RE2 program of a pattern: linear time in the text, whatever the pattern."""
    try:
        return re2.compile(pattern, _re2_options())
    except re2.error as err:
        reason = err.args[0].decode("utf-8", "replace") if err.args and isinstance(err.args[0], bytes) else str(err)
        raise RegexError(f"invalid regular expression {pattern!r}: {reason}") from None
    except UnicodeEncodeError:
        raise RegexError(f"invalid regular expression {pattern!r}: not valid UTF-8") from None


def matches(text: str, pattern: str) -> bool:
    if not isinstance(text, str) or not isinstance(pattern, str):
        raise TypeError("no such overload: matches() takes strings")
    return regex(pattern).search(text) is not None


def neg_dyn(value: Any) -> Any:
    """Unary minus when the checker could not tell the operand's type (dyn)."""
    if isinstance(value, float):
        return -value
    if isinstance(value, int) and not isinstance(value, bool):
        return neg(value)
    raise TypeError(f"no such overload: -{kind(value)}")


def _convertible(name: str, value: Any, *types: type) -> None:
    """Conversions accept CEL values only: an object's repr never becomes a string."""
    if not isinstance(value, types) or isinstance(value, bool) and bool not in types:
        raise TypeError(f"no such overload: {name}({kind(value)})")


def to_int(value: Any) -> int:
    n: int
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError("cannot convert a non-finite double to int")
        n = math.trunc(value)
    elif isinstance(value, str):
        n = int(value, 10)
    elif isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"no such overload: int({kind(value)})")
    else:
        n = value
    return n if INT_MIN <= n <= INT_MAX else overflow()


def to_uint(value: Any) -> int:
    n: int
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError("cannot convert a non-finite double to uint")
        n = math.trunc(value)
    elif isinstance(value, str):
        n = int(value, 10)
    else:
        _convertible("uint", value, int, np.integer)
        n = int(value)
    return n if 0 <= n <= UINT_MAX else overflow()


def to_double(value: Any) -> float:
    _convertible("double", value, *_NUMBERS, str)
    return float(value)


def to_string(value: Any) -> str:
    _convertible("string", value, bool, np.bool_, *_NUMBERS, str, bytes)
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, (float, np.floating)):
        return repr(float(value))
    return str(value)


def to_bool(value: Any) -> bool:
    if isinstance(value, bool):
        return value
    _convertible("bool", value, str)
    text = str(value)
    if text in ("true", "True", "TRUE", "t", "1"):
        return True
    if text in ("false", "False", "FALSE", "f", "0"):
        return False
    raise ValueError(f"cannot convert {text!r} to bool")


def to_bytes(value: Any) -> bytes:
    _convertible("bytes", value, str, bytes)
    return value if isinstance(value, bytes) else value.encode("utf-8")


def min_(*values: Any) -> Any:
    items = values[0] if len(values) == 1 else values
    if not items:
        raise ValueError("min() of an empty list")
    return min(items)


def max_(*values: Any) -> Any:
    items = values[0] if len(values) == 1 else values
    if not items:
        raise ValueError("max() of an empty list")
    return max(items)


def uint_check(value: int) -> int:
    return value if 0 <= value <= UINT_MAX else overflow()


def int_check(value: int) -> int:
    return value if INT_MIN <= value <= INT_MAX else overflow()
