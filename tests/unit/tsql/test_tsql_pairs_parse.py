"""Statement boundaries as SQL Server finds them: every statement of docs/tsql.md followed by
every other, on one line without a semicolon (and a plain statement with one too), parses
into the same two statements as each alone (the table is tests/support/tsql_pairs.py)."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

import pytest
from support.tsql_pairs import BATCH_ONLY, PLAIN, SCENARIO, Entry, pair

import sbroker.apps.tsql  # noqa: F401  (enters every statement)
from sbroker.apps.tsql.statement import Statement, parse

FIRSTS = (*PLAIN, *SCENARIO)
SECONDS = (*PLAIN, *SCENARIO, *BATCH_ONLY)


def shape(value: Any) -> Any:
    """A statement without the positions of its statements (line and column), to compare."""
    if isinstance(value, Statement):
        return (type(value).__name__, *(shape(getattr(value, f.name))
                                        for f in dataclasses.fields(value)
                                        if f.name not in ("line", "column")))
    if isinstance(value, tuple):
        return tuple(shape(item) for item in value)
    return value


@functools.cache
def alone(entry: Entry) -> Any:
    return shape(parse(entry.text.format(k=0)))


@pytest.mark.parametrize("first", FIRSTS, ids=lambda e: e.text[:40])
def test_a_statement_ends_where_the_next_begins(first: Entry) -> None:
    expected_first = alone(first)
    for second in SECONDS:
        got = shape(parse(pair(first, second, " ")))
        assert got == (*expected_first, *alone(second)), second.text


@pytest.mark.parametrize("first", PLAIN, ids=lambda e: e.text[:40])
def test_a_semicolon_ends_a_plain_statement_too(first: Entry) -> None:
    expected_first = alone(first)
    for second in SECONDS:
        got = shape(parse(pair(first, second, ";")))
        assert got == (*expected_first, *alone(second)), second.text


def test_the_plain_select_before_an_if_else_no_longer_swallows_it() -> None:
    body = parse("select count(*) from t\n"
                 "if exists (select * from t) select 'yes' else select 'no'")
    assert [type(s).__name__ for s in body] == ["Select", "If"]
