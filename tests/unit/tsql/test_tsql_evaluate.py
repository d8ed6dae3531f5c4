"""Expressions evaluated in Python: three-valued logic, T-SQL arithmetic and conversions,
built-in functions, XML."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql.errors import TSqlError
from sbroker.apps.tsql.evaluate import evaluate
from sbroker.apps.tsql.exprparse import ExprParser
from sbroker.apps.tsql.tokens import tokenize
from sbroker.apps.tsql.values import for_xml_path, xml_value


class Scope:
    row: dict[str, Any] | None = None

    def __init__(self, **variables: Any) -> None:
        self.vars = variables

    def variable(self, name: str) -> Any:
        return self.vars[name]

    def sysvar(self, name: str) -> Any:
        return 7

    def caught(self) -> TSqlError | None:
        return TSqlError("boom", 8134, 16, 2)

    def now(self) -> dt.datetime:
        return dt.datetime(2026, 1, 2, 3, 4, 5)

    def scope_identity(self) -> Any:
        return 3

    def subquery(self, select: n.Query) -> Any:
        raise AssertionError("no subquery here")

    def exists(self, select: n.Query) -> bool:
        raise AssertionError("no subquery here")

    def object_id(self, name: str) -> int | None:
        return 11 if name == "Known" else None


def value(text: str, **variables: Any) -> Any:
    parser = ExprParser(tokenize(text), text)
    expr = parser.expression()
    return evaluate(expr, Scope(**variables))


@pytest.mark.parametrize(("text", "expected"), [
    ("7 / 2", 3), ("-7 / 2", -3), ("-7 % 3", -1), ("7.0 / 2", 3.5), ("'a' + 'b'", "ab"),
    ("null + 1", None), ("null = null", None), ("1 = 1 or null = 1", True),
    ("1 = 0 and null = 1", False), ("not (null = 1)", None), ("'ABC ' = 'abc'", True),
    ("3 in (1, 2, 3)", True), ("null in (1)", None), ("2 between 1 and 3", True),
    ("'abc' like 'a%'", True), ("'abc' not like '_b'", True),
    ("case when 1 = 2 then 'x' when 2 = 2 then 'y' end", "y"),
    ("case 3 when 1 then 'one' else 'other' end", "other"),
    ("isnull(null, 5)", 5), ("coalesce(null, null, 'z')", "z"), ("len('ab  ')", 2),
    ("cast('12' as int) + 1", 13), ("convert(nvarchar(10), 5)", "5"),
    ("cast(N'x' as varbinary(max))", b"x"), ("cast(0x6869 as nvarchar(10))", "hi"),
    ("error_number()", 8134), ("error_message()", "boom"), ("error_state()", 2),
    ("@@spid", 7), ("scope_identity()", 3), ("db_id()", 1), ("db_id('other')", None),
    ("object_id('Known')", 11), ("object_id('Unknown')", None),
    ("upper(substring('hello', 2, 3))", "ELL"), ("replace('a-b', '-', '+')", "a+b"),
])
def test_expressions(text: str, expected: Any) -> None:
    assert value(text) == expected


def test_variables_and_errors() -> None:
    assert value("@a + @b", a=1, b=2) == 3
    with pytest.raises(TSqlError) as caught:
        value("1 / 0")
    assert caught.value.number == 8134
    with pytest.raises(TSqlError) as caught:
        value("'x' + 1")
    assert caught.value.number == 245
    with pytest.raises(TSqlError, match="NOSUCH"):
        value("nosuch(1)")


def test_xml_value_and_for_xml_path() -> None:
    xml = for_xml_path("Command", [[("@LogID", 5), ("@SQL", "a < 'b'"), ("Note", "x&y")]])
    assert xml == "<Command LogID=\"5\" SQL=\"a &lt; 'b'\"><Note>x&amp;y</Note></Command>"
    assert xml_value(xml, "(/Command/@LogID)[1]", "int") == 5
    assert xml_value(xml, "(/Command/@SQL)[1]", "nvarchar(max)") == "a < 'b'"
    assert xml_value(xml, "(/Command/Note)[1]", "nvarchar(10)") == "x&y"
    assert xml_value(xml, "(/Other/@LogID)[1]", "int") is None
    assert value("@m.value('(/a/@n)[1]', 'int')", m="<a n='4'/>") == 4
