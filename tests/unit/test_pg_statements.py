"""The PostgreSQL backend's handling of statement text, without a server: SQLite-style
placeholders in application statements, and the literals of batched engine statements."""

from __future__ import annotations

import json

import pytest

from sbroker.storage.ports import Direct
from sbroker.storage.postgres.connection import render, translate
from sbroker.storage.postgres.sends import _rows


@pytest.mark.parametrize(("sql", "expected"), [
    ("INSERT INTO t(a, b) VALUES (?, ?)", "INSERT INTO t(a, b) VALUES (%s, %s)"),
    ("SELECT '?', \"a?\" FROM t WHERE x = ? -- why?\n",
     "SELECT '?', \"a?\" FROM t WHERE x = %s -- why?\n"),
    ("SELECT $$ ? $$, ? /* ? */", "SELECT $$ ? $$, %s /* ? */"),
    ("SELECT x::int FROM t WHERE y LIKE 'a%' AND z = ?",
     "SELECT x::int FROM t WHERE y LIKE 'a%%' AND z = %s"),
    ("SELECT doc ?| array['a'] FROM t WHERE id = ?",
     "SELECT doc ?| array['a'] FROM t WHERE id = %s"),
])
def test_question_marks_outside_quotes_and_comments_become_psycopg_placeholders(
        sql: str, expected: str) -> None:
    assert translate(sql, False) == expected


def test_named_parameters_and_casts() -> None:
    assert translate("SELECT x::text FROM t WHERE a = :a AND b = :b", True) == \
        "SELECT x::text FROM t WHERE a = %(a)s AND b = %(b)s"


def test_a_statement_without_placeholders_is_left_alone() -> None:
    sql = "SELECT 'no ? here' WHERE x LIKE 'a%'"
    assert translate(sql, False) == sql


def test_common_parameters_are_rendered_as_literals() -> None:
    text = render("SELECT %s, %s, %s, %s, %s, %s, mod(x, 2) %% 3",
                  (7, None, "it's", b"\x00\xff", 1.5, True))
    assert text == "SELECT 7, NULL, 'it''s', '\\x00ff'::bytea, 1.5, '1', mod(x, 2) % 3"


@pytest.mark.parametrize(("sql", "params"), [
    ("SELECT %(a)s", (1,)),          # named: psycopg's
    ("SELECT %s", ([1, 2],)),        # a list: psycopg's
    ("SELECT %s", ("nul\x00",)),     # not a valid text literal: psycopg says so
    ("SELECT %s, %s", (1,)),         # the count differs: psycopg says so
    ("SELECT %s", (float("nan"),)),
])
def test_anything_else_is_left_to_psycopg(sql: str, params: tuple[object, ...]) -> None:
    assert render(sql, params) is None


TRACE = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"


def test_the_rows_of_many_direct_sends_are_the_json_the_function_reads() -> None:
    odd = 'type "quoted" \\ é'
    sends = [Direct(7, "H1", 9, 2, "DEFAULT", "N", b"ab", "ID-1"),
             Direct(8, "H2", 10, 3, odd, "X", b"", "ID-2"),
             Direct(7, "H1", 9, 2, "DEFAULT", "N", b"cde", "ID-3", TRACE)]
    rows, bodies = _rows(sends)
    assert json.loads(rows) == [[7, 9, "DEFAULT", "N", "ID-1", 1, 2, None],
                                [8, 10, odd, "X", "ID-2", 3, 0, None],
                                [7, 9, "DEFAULT", "N", "ID-3", 3, 3, TRACE]]
    assert bodies == b"abcde"
