"""Helpers that generated rule code calls, and EvalError: CEL's run-time semantics in Python.

Integer arithmetic is 64-bit with overflow as an error, division truncates toward zero,
`&&`/`||` and the `all`/`exists` macros absorb errors the way CEL does. Everything a
rule can fail with at run time ends up as one EvalError naming the rule.
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Callable, Iterable, Sized
from decimal import Decimal
from functools import lru_cache
from typing import Any, NoReturn

import re2

from kaipolicy.errors import KaipolicyError
from kaipolicy.rules import kinds
from kaipolicy.rules.cost import Meter, OverBudget
from kaipolicy.rules.kinds import NUMBERS, UInt, kind

INT_MIN, INT_MAX = -(2**63), 2**63 - 1
UINT_MAX = 2**64 - 1
REGEX_MAX_MEM = 4 << 20   # bytes RE2 may use for one pattern (128 cached: at most 512 MiB in all)
# The cross-kind operators generated code calls as _rt.* where the checker saw dyn.
equals, compare, contains, new_map = kinds.equals, kinds.compare, kinds.contains, kinds.new_map


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
    # Past INT_MAX only as -2^63 / -1 (an int overflow) or as a uint quotient (a uint divisor is positive)
    return q if q <= INT_MAX or b > 0 else overflow()


def imod(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("modulus by zero")
    if b == -1 and a == INT_MIN:  # as -2^63 / -1 overflows, so does its remainder (cel-go, cel-cpp)
        overflow()
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


def arith(op: str, a: Any, b: Any) -> Any:
    """`a op b` when the checker could not tell the operand types apart (dyn)."""
    ka, kb = kind(a), kind(b)
    if ka != kb:
        raise TypeError(f"no such overload: {ka} {op} {kb}")
    if ka in NUMBERS and op in "+-*":
        result = a + b if op == "+" else a - b if op == "-" else a * b
        if ka == "uint":
            return uint_check(result)
        return result if ka == "double" or INT_MIN <= result <= INT_MAX else overflow()
    if ka in ("int", "uint") and op in "/%":
        result = idiv(a, b) if op == "/" else imod(a, b)
        return UInt(result) if ka == "uint" else result
    if ka == "double" and op == "/":
        return fdiv(a, b)
    if op == "+" and ka in ("string", "bytes", "list"):
        return a + b
    raise TypeError(f"no such overload: {ka} {op} {kb}")


def and_(left: Callable[[], Any], right: Callable[[], Any]) -> bool:
    """CEL `&&`: false on either side wins over an error (or a non-bool) on the other."""
    return _logic(left, right, False)


def or_(left: Callable[[], Any], right: Callable[[], Any]) -> bool:
    """CEL `||`: true on either side wins over an error (or a non-bool) on the other."""
    return _logic(left, right, True)


def _logic(left: Callable[[], Any], right: Callable[[], Any], decisive: bool) -> bool:
    first = _operand(left)
    if first is decisive:
        return decisive
    second = _operand(right)
    if second is decisive:
        return decisive
    for side in (first, second):
        if isinstance(side, Exception):
            raise side
    return not decisive


def _operand(side: Callable[[], Any]) -> bool | Exception:
    """One side of `&&` or `||`: its bool, or the error it stands for (never a spent budget)."""
    try:
        value = side()
    except OverBudget:
        raise
    except Exception as err:  # noqa: BLE001 - CEL absorbs it if the other side decides
        return err
    try:
        return truth(value)
    except TypeError as err:
        return err


def truth(value: Any) -> bool:
    """A value CEL uses as a bool (an operand of `&&`, `||`, `?:`, a macro's predicate): a
    bool, never Python's truthiness of a number, string or list behind dyn."""
    if value is True or value is False:
        return value
    if kind(value) == "bool":  # numpy's bool from a vocabulary function
        return bool(value)
    raise TypeError(f"no such overload: {kind(value)} used as a bool")


def _quantify(items: Iterable[Any], pred: Callable[[Any], Any], decisive: bool) -> bool:
    """`decisive` as soon as one item gives it; an error (or a non-bool) counts only if none does (CEL)."""
    error: Exception | None = None
    for item in items:
        try:
            if truth(pred(item)) is decisive:
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
    return sum(1 for item in each(meter, unit, items) if truth(pred(item))) == 1


def list_index(items: list[Any], i: Any) -> Any:
    if isinstance(i, float):  # a dyn index: CEL takes a double that holds a whole number
        if not i.is_integer():
            raise TypeError(f"invalid list index {i!r}")
        i = int(i)
    if isinstance(i, bool) or not isinstance(i, numbers.Integral) or not 0 <= int(i) < len(items):
        raise IndexError(i)
    return items[int(i)]


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


# Decimal digits, as cel-go reads them (Go's ParseInt and ParseUint): a uint takes no sign at all.
_WHOLE_TEXT = {"int": re.compile(r"[+-]?[0-9]+"), "uint": re.compile(r"[0-9]+")}
_DOUBLE_TEXT = re.compile(r"[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?|[+-]?(inf|infinity|nan)", re.IGNORECASE)


def _no_overload(name: str, value: Any) -> NoReturn:
    raise TypeError(f"no such overload: {name}({kind(value)})")


def _out_of_range(value: Any, name: str) -> NoReturn:
    raise OverflowError(f"integer overflow: {value!r} is out of {name} range")


def _parse_whole(text: str, name: str) -> int:
    if _WHOLE_TEXT[name].fullmatch(text) is None:
        raise ValueError(f"invalid {name} text {text!r}")
    return int(text, 10)


def to_int(value: Any) -> int:
    k = kind(value)
    if k == "double":
        # -2^63 and 2^63 themselves are out: as doubles they stand for wider values too (cel-spec)
        return math.trunc(float(value)) if -9.223372036854775808e18 < value < 9.223372036854775808e18 else \
            _out_of_range(value, "int")
    n = _parse_whole(value, "int") if k == "string" else int(value) if k in ("int", "uint") else \
        _no_overload("int", value)
    return n if INT_MIN <= n <= INT_MAX else overflow()


def to_uint(value: Any) -> int:
    k = kind(value)
    if k == "double":
        return UInt(math.trunc(value)) if 0.0 <= value < 1.8446744073709551616e19 else _out_of_range(value, "uint")
    n = _parse_whole(value, "uint") if k == "string" else int(value) if k in ("int", "uint") else \
        _no_overload("uint", value)
    return uint_check(n)


def to_double(value: Any) -> float:
    k = kind(value)
    if k == "string":
        if _DOUBLE_TEXT.fullmatch(value) is None:
            raise ValueError(f"invalid double text {value!r}")
        return float(value)
    if k in NUMBERS:
        return float(value)
    return _no_overload("double", value)


def to_string(value: Any) -> str:
    k = kind(value)
    if k == "bool":
        return "true" if value else "false"
    if k == "bytes":
        return str(value.decode("utf-8"))  # invalid UTF-8 is an error, as in CEL
    if k == "double":
        return double_text(float(value))
    if k in ("int", "uint"):
        return str(int(value))
    if k == "string":
        return str(value)
    return _no_overload("string", value)


def double_text(value: float) -> str:
    """A double as cel-go prints it (Go's %g): the fewest digits that read back as the same
    double, in exponent form below 1e-4 and from 1e6 on: 1, 0.5, 100000, 1e+06, 1.5e-05, NaN, +Inf."""
    if not math.isfinite(value):
        return "NaN" if math.isnan(value) else "+Inf" if value > 0 else "-Inf"
    sign = "-" if math.copysign(1.0, value) < 0 else ""
    if value == 0:
        return sign + "0"
    shortest = Decimal(repr(abs(value))).normalize().as_tuple()
    digits = "".join(map(str, shortest.digits))
    point = len(digits) + int(shortest.exponent)   # digits before the decimal point
    if not -4 <= point - 1 < 6:
        mantissa = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
        return f"{sign}{mantissa}e{'-' if point < 1 else '+'}{abs(point - 1):02d}"
    if point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    if point >= len(digits):
        return sign + digits + "0" * (point - len(digits))
    return f"{sign}{digits[:point]}.{digits[point:]}"


def to_bool(value: Any) -> bool:
    k = kind(value)
    if k == "bool":
        return bool(value)
    if k != "string":
        _no_overload("bool", value)
    if value in ("true", "True", "TRUE", "t", "1"):
        return True
    if value in ("false", "False", "FALSE", "f", "0"):
        return False
    raise ValueError(f"cannot convert {value!r} to bool")


def to_bytes(value: Any) -> bytes:
    k = kind(value)
    if k == "bytes":
        return bytes(value)
    if k == "string":
        return str(value).encode("utf-8")
    return _no_overload("bytes", value)


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


def uint_check(value: int) -> UInt:
    """A uint result: in range, and typed as a uint at run time."""
    return UInt(value) if 0 <= value <= UINT_MAX else overflow()


def int_check(value: int) -> int:
    return value if INT_MIN <= value <= INT_MAX else overflow()
