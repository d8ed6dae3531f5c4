"""Statement boundaries on both backends: each plain statement (the kind whose end the parser
finds by looking ahead) written before every statement of docs/tsql.md, on the next line and
without a semicolon, runs as two statements: the batch runs through and gives every result
set it should (the table is tests/support/tsql_pairs.py)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from support.tsql_pairs import PLAIN, SETUP, Entry, script

Run = Callable[..., list[list[dict[str, Any]]]]


@pytest.mark.parametrize("first", PLAIN, ids=lambda e: e.text[:40])
def test_a_plain_statement_before_every_statement_runs_as_two(tsql: Run, first: Entry) -> None:
    tsql(SETUP)
    text, results = script(first)
    printed: list[str] = []
    got = tsql(text, out=printed.append)
    assert len(got) == results
    assert printed.count("caught") == 2 and "printed" in printed
