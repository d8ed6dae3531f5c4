"""Every T-SQL statement sbroker runs, one class each (``statement.Statement``), grouped by
concept.  Importing this package enters them all in ``statement.SYNTAX``; the package
``sbroker.apps.tsql`` imports it first, so any parse sees every statement.

To add a statement: write its class, with ``@statement("ITS KEYWORDS")``, its fields, its
``parse`` and its ``run``, in the module of its concept (or a new module imported below),
and its test."""

from __future__ import annotations

from sbroker.apps.tsql.statements import (
    catalog,
    cursors,
    databases,
    dialogs,
    endpoint,
    flow,
    queries,
    queues,
    receive,
    refused,
    routines,
    routing,
    transactions,
    variables,
)

__all__ = ["catalog", "cursors", "databases", "dialogs", "endpoint", "flow", "queries",
           "queues", "receive", "refused", "routines", "routing", "transactions", "variables"]
