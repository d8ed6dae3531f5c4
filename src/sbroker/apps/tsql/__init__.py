"""T-SQL for Service Broker scripts (docs/tsql.md): a tokenizer and a parser whose every
statement is a class with its parse rule and its execution (``statements/``), run on the
broker's public API, and plain SQL translated by sqlglot."""

from __future__ import annotations

from sbroker.apps.tsql import statements  # enters every statement in statement.SYNTAX
from sbroker.apps.tsql.errors import TSqlError, TSqlSyntaxError
from sbroker.apps.tsql.script import BatchOutcome, Runner, execute_tsql
from sbroker.apps.tsql.session import ResultSet

__all__ = ["BatchOutcome", "ResultSet", "Runner", "TSqlError", "TSqlSyntaxError",
           "execute_tsql", "statements"]
