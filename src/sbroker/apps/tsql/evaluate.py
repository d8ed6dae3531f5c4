"""Evaluation of T-SQL expressions in Python (procedural statements, RECEIVE columns):
three-valued logic, T-SQL's conversions, and the built-in functions scripts use."""

from __future__ import annotations

import datetime as dt
import operator
import re
import uuid
from collections.abc import Callable
from decimal import Decimal
from typing import Any, Protocol

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql import values
from sbroker.apps.tsql.errors import (
    CONVERSION_FAILED,
    DIVIDE_BY_ZERO,
    INVALID_COLUMN,
    UNKNOWN_FUNCTION,
    TSqlError,
    unsupported,
)


class Scope(Protocol):
    """What an expression can see: variables, @@ values, the current row, the error being
    handled, the clock, and the database for subqueries."""

    row: dict[str, Any] | None

    def variable(self, name: str) -> Any: ...

    def sysvar(self, name: str) -> Any: ...

    def caught(self) -> TSqlError | None: ...

    def now(self) -> dt.datetime: ...

    def scope_identity(self) -> Any: ...

    def subquery(self, select: n.Query) -> Any: ...

    def exists(self, select: n.Query) -> bool: ...

    def object_id(self, name: str) -> int | None: ...


def evaluate(expr: n.Expr, scope: Scope) -> Any:
    """The value of ``expr`` in ``scope``."""
    rule = RULES.get(type(expr))
    if rule is None:
        raise unsupported(f"evaluating {type(expr).__name__}")
    return rule(expr, scope)


def truth(value: Any) -> bool:
    """A condition's outcome: UNKNOWN (None) is false."""
    return bool(value) if value is not None else False


def _column(expr: n.Column, scope: Scope) -> Any:
    row = scope.row
    if row is None or expr.name not in row:
        raise TSqlError(f"Invalid column name '{expr.name}'", INVALID_COLUMN)
    return row[expr.name]


def _numeric(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            try:
                return float(value)
            except ValueError:
                raise TSqlError(f"Conversion failed when converting the value {value!r} to a"
                                " number", CONVERSION_FAILED) from None
    return value


def _arith(op: str, left: Any, right: Any) -> Any:
    if left is None or right is None:
        return None
    if op == "+" and isinstance(left, str) and isinstance(right, str):
        return left + right
    if op == "+" and isinstance(left, (bytes, bytearray)) and isinstance(right, bytes):
        return bytes(left) + right
    a, b = _numeric(left), _numeric(right)
    if isinstance(a, float) and isinstance(b, Decimal):
        b = float(b)
    if isinstance(b, float) and isinstance(a, Decimal):
        a = float(a)
    if op in ("/", "%") and b == 0:
        raise TSqlError("Divide by zero error encountered.", DIVIDE_BY_ZERO)
    if op == "/" and isinstance(a, int) and isinstance(b, int):
        quotient = abs(a) // abs(b)
        return quotient if (a >= 0) == (b >= 0) else -quotient
    if op == "%" and isinstance(a, int) and isinstance(b, int):
        return abs(a) % abs(b) * (1 if a >= 0 else -1)
    return ARITH[op](a, b)


ARITH: dict[str, Callable[[Any, Any], Any]] = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "%": operator.mod, "&": operator.and_, "|": operator.or_, "^": operator.xor,
}
COMPARE: dict[str, Callable[[Any, Any], Any]] = {
    "=": operator.eq, "<>": operator.ne, "<": operator.lt, ">": operator.gt,
    "<=": operator.le, ">=": operator.ge,
}


def _comparable(left: Any, right: Any) -> tuple[Any, Any]:
    if isinstance(left, str) and not isinstance(right, str) and right is not None:
        return _numeric(left), right
    if isinstance(right, str) and not isinstance(left, str) and left is not None:
        return left, _numeric(right)
    if isinstance(left, str) and isinstance(right, str):  # default collation: CI, trailing
        return left.rstrip(" ").lower(), right.rstrip(" ").lower()
    return left, right


def _binary(expr: n.Binary, scope: Scope) -> Any:
    op = expr.op
    if op in ("AND", "OR"):
        left = evaluate(expr.left, scope)
        if op == "AND" and left is not None and not left:
            return False
        if op == "OR" and left:
            return True
        right = evaluate(expr.right, scope)
        if op == "AND":
            return None if left is None or right is None else bool(right)
        return True if right else (None if left is None or right is None else False)
    left = evaluate(expr.left, scope)
    right = evaluate(expr.right, scope)
    if op in COMPARE:
        if left is None or right is None:
            return None
        return COMPARE[op](*_comparable(left, right))
    if op == "LIKE":
        if left is None or right is None:
            return None
        return _like(values.text_of(left), values.text_of(right))
    return _arith(op, left, right)


def _like(text: str, pattern: str) -> bool:
    parts = []
    for ch in pattern:
        parts.append(".*" if ch == "%" else "." if ch == "_" else re.escape(ch))
    return re.fullmatch("".join(parts), text, re.IGNORECASE | re.DOTALL) is not None


def _unary(expr: n.Unary, scope: Scope) -> Any:
    value = evaluate(expr.operand, scope)
    if value is None:
        return None
    if expr.op == "NOT":
        return not value
    if expr.op == "-":
        return -_numeric(value)
    if expr.op == "~":
        return ~int(value)
    return _numeric(value)


def _in(expr: n.InList, scope: Scope) -> Any:
    value = evaluate(expr.operand, scope)
    if value is None:
        return None
    found = any(v is not None and COMPARE["="](*_comparable(value, v))
                for v in (evaluate(item, scope) for item in expr.items))
    return found != expr.negated


def _between(expr: n.Between, scope: Scope) -> Any:
    value = evaluate(expr.operand, scope)
    low, high = evaluate(expr.low, scope), evaluate(expr.high, scope)
    if value is None or low is None or high is None:
        return None
    inside = bool(COMPARE["<="](*_comparable(low, value))
                  and COMPARE["<="](*_comparable(value, high)))
    return inside != expr.negated


def _case(expr: n.Case, scope: Scope) -> Any:
    subject = evaluate(expr.operand, scope) if expr.operand is not None else None
    for when, then in expr.whens:
        if expr.operand is None:
            hit = truth(evaluate(when, scope))
        else:
            other = evaluate(when, scope)
            hit = subject is not None and other is not None and bool(
                COMPARE["="](*_comparable(subject, other)))
        if hit:
            return evaluate(then, scope)
    return evaluate(expr.default, scope) if expr.default is not None else None


def _cast(expr: n.Cast, scope: Scope) -> Any:
    return values.convert(evaluate(expr.operand, scope), expr.type)


def _method(expr: n.Method, scope: Scope) -> Any:
    target = evaluate(expr.target, scope)
    args = [evaluate(a, scope) for a in expr.args]
    if expr.name == "value" and len(args) == 2:
        return values.xml_value(target, values.text_of(args[0]), values.text_of(args[1]))
    raise unsupported(f"the XML method {expr.name}()")


def _call(expr: n.Call, scope: Scope) -> Any:
    fn = FUNCTIONS.get(expr.name)
    if fn is None:
        raise TSqlError(f"'{expr.name}' is not a recognized built-in function name (not"
                        " supported by sbroker in a procedural expression)", UNKNOWN_FUNCTION)
    return fn(scope, [evaluate(a, scope) for a in expr.args])


def _error_part(part: str) -> Callable[[Scope, list[Any]], Any]:
    def read(scope: Scope, args: list[Any]) -> Any:
        error = scope.caught()
        if error is None:
            return None
        return {"NUMBER": error.number, "MESSAGE": error.message,
                "SEVERITY": error.severity, "STATE": error.state, "LINE": error.line,
                "PROCEDURE": error.procedure}[part]
    return read


def _first_not_null(scope: Scope, args: list[Any]) -> Any:
    return next((a for a in args if a is not None), None)


def _text_fn(fn: Callable[[str], Any]) -> Callable[[Scope, list[Any]], Any]:
    return lambda scope, args: None if args[0] is None else fn(values.text_of(args[0]))


FUNCTIONS: dict[str, Callable[[Scope, list[Any]], Any]] = {
    **{f"ERROR_{part}": _error_part(part)
       for part in ("NUMBER", "MESSAGE", "SEVERITY", "STATE", "LINE", "PROCEDURE")},
    "ISNULL": _first_not_null, "COALESCE": _first_not_null,
    "NULLIF": lambda s, a: None if a[0] == a[1] else a[0],
    "GETDATE": lambda s, a: s.now(), "SYSDATETIME": lambda s, a: s.now(),
    "GETUTCDATE": lambda s, a: s.now(), "SYSUTCDATETIME": lambda s, a: s.now(),
    "CURRENT_TIMESTAMP": lambda s, a: s.now(),
    "NEWID": lambda s, a: str(uuid.uuid4()).upper(),
    "SCOPE_IDENTITY": lambda s, a: s.scope_identity(),
    "DB_ID": lambda s, a: 1 if not a else None,  # the one database has no other name
    "DB_NAME": lambda s, a: "sbroker",
    "LEN": _text_fn(lambda t: len(t.rstrip(" "))),
    "DATALENGTH": lambda s, a: None if a[0] is None else len(
        a[0] if isinstance(a[0], bytes) else values.text_of(a[0]).encode("utf-8")),
    "UPPER": _text_fn(str.upper), "LOWER": _text_fn(str.lower),
    "LTRIM": _text_fn(str.lstrip), "RTRIM": _text_fn(str.rstrip), "TRIM": _text_fn(str.strip),
    "REVERSE": _text_fn(lambda t: t[::-1]),
    "SUBSTRING": lambda s, a: None if a[0] is None else values.text_of(a[0])[
        max(int(a[1]) - 1, 0):max(int(a[1]) - 1 + int(a[2]), 0)],
    "LEFT": lambda s, a: None if a[0] is None else values.text_of(a[0])[:int(a[1])],
    "RIGHT": lambda s, a: None if a[0] is None else values.text_of(a[0])[-int(a[1]):],
    "REPLACE": lambda s, a: None if None in a else values.text_of(a[0]).replace(
        values.text_of(a[1]), values.text_of(a[2])),
    "CHARINDEX": lambda s, a: None if None in a[:2] else values.text_of(a[1]).find(
        values.text_of(a[0])) + 1,
    "CONCAT": lambda s, a: "".join(values.text_of(v) for v in a if v is not None),
    "ABS": lambda s, a: None if a[0] is None else abs(_numeric(a[0])),
    "STR": _text_fn(str),
    "REPLICATE": lambda s, a: None if a[0] is None else values.text_of(a[0]) * int(a[1]),
    "DATEDIFF": lambda s, a: _datediff(values.text_of(a[0]), a[1], a[2]),
    "XACT_STATE": lambda s, a: s.sysvar("XACT_STATE"),
    "OBJECT_ID": lambda s, a: None if a[0] is None else s.object_id(values.text_of(a[0])),
}


def _datediff(part: str, start: Any, end: Any) -> Any:
    if start is None or end is None:
        return None
    delta = values.convert(end, "DATETIME2") - values.convert(start, "DATETIME2")
    seconds = delta.total_seconds()
    units = {"MILLISECOND": 0.001, "MS": 0.001, "SECOND": 1, "SS": 1, "S": 1, "MINUTE": 60,
             "MI": 60, "HOUR": 3600, "HH": 3600, "DAY": 86400, "DD": 86400}
    return int(seconds / units.get(part.upper(), 1))


RULES: dict[type, Callable[[Any, Scope], Any]] = {
    n.Literal: lambda e, s: e.value,
    n.Var: lambda e, s: s.variable(e.name),
    n.SysVar: lambda e, s: s.sysvar(e.name),
    n.Column: _column,
    n.Binary: _binary,
    n.Unary: _unary,
    n.IsNull: lambda e, s: (evaluate(e.operand, s) is None) != e.negated,
    n.InList: _in,
    n.Between: _between,
    n.Case: _case,
    n.Cast: _cast,
    n.Method: _method,
    n.Call: _call,
    n.Subquery: lambda e, s: s.subquery(e.select),
    n.Exists: lambda e, s: s.exists(e.select),
}
