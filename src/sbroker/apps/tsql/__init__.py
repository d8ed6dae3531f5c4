"""T-SQL for Service Broker scripts (SPEC §14): a tokenizer and recursive-descent parser,
an interpreter on the broker's public API, and plain SQL translated by sqlglot."""

from __future__ import annotations

from sbroker.apps.tsql.errors import TSqlError, TSqlSyntaxError
from sbroker.apps.tsql.script import BatchOutcome, Runner, execute_tsql
from sbroker.apps.tsql.session import ResultSet

__all__ = ["BatchOutcome", "ResultSet", "Runner", "TSqlError", "TSqlSyntaxError",
           "execute_tsql"]
