"""Running a T-SQL script: sqlcmd's ``$(NAME)`` variables, batches split on GO, each batch
parsed then run on one session; an error of severity >= 11 ends its batch (docs/tsql.md,
"Running scripts")."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field

from sbroker.apps.tsql import sqlexec
from sbroker.apps.tsql.errors import BREAK_OUTSIDE_LOOP, USER, TSqlError
from sbroker.apps.tsql.ports import TSqlBroker
from sbroker.apps.tsql.session import ResultSet, Session
from sbroker.apps.tsql.statement import Break, Continue, Return, parse, run
from sbroker.apps.tsql.statements.variables import sweep_table_variables
from sbroker.apps.tsql.tokens import Token, split_batches

SCRIPT_SPIDS = 50000  # SPIDs of scripts start here within a broker session's range
_numbers = itertools.count(1)


def substitute(text: str, variables: Mapping[str, str]) -> str:
    """sqlcmd's scripting variables: ``$(NAME)`` replaced by its value (a text
    preprocessor, as in sqlcmd)."""
    out: list[str] = []
    i = 0
    while True:
        j = text.find("$(", i)
        if j < 0:
            out.append(text[i:])
            return "".join(out)
        k = text.find(")", j)
        name = text[j + 2:k] if k > 0 else ""
        if not name or not name.replace("_", "").isalnum():
            out.append(text[i:j + 2])
            i = j + 2
            continue
        if name not in variables:
            raise TSqlError(f"'{name}' scripting variable not defined.", USER, 16)
        out.append(text[i:j])
        out.append(variables[name])
        i = k + 1


@dataclass
class BatchOutcome:
    """What one batch did: its result sets and the error that ended it, if any."""

    number: int
    results: list[ResultSet] = field(default_factory=list)
    error: TSqlError | None = None


class Runner:
    """One session running the batches of scripts."""

    def __init__(self, broker: TSqlBroker, *, out: Callable[[str], None] | None = None,
                 variables: Mapping[str, str] | None = None) -> None:
        spid = broker.session_id * 100000 + SCRIPT_SPIDS + next(_numbers) % 50000
        self.session = Session(broker, spid=spid, out=out)
        sweep_table_variables(self.session)
        self.variables = dict(variables or {})

    def batches(self, text: str) -> Iterator[BatchOutcome]:
        """Run each batch of ``text`` in turn, yielding what it did."""
        try:
            batches = split_batches(substitute(text, self.variables))
        except TSqlError as exc:
            exc.batch = 1
            yield BatchOutcome(1, error=exc)
            return
        for batch in batches:
            yield self.run_batch(batch.number, batch.text, batch.tokens)

    def run_batch(self, number: int, text: str, tokens: list[Token] | None = None) -> BatchOutcome:
        outcome = BatchOutcome(number)
        self.session.results = outcome.results
        try:
            body = parse(text, tokens)
            run(sqlexec.new_frame(self.session), body)
        except Return:
            pass
        except (Break, Continue):
            outcome.error = TSqlError("BREAK or CONTINUE outside a WHILE loop",
                                      BREAK_OUTSIDE_LOOP, 15)
        except TSqlError as exc:
            exc.batch = number
            outcome.error = exc
            if self.session.xact_abort and self.session.tx is not None:
                self.session.rollback()
        return outcome

    def close(self) -> None:
        """End the session: roll back an open transaction, drop table variables' tables."""
        try:
            self.session.close()
        finally:
            frame = sqlexec.new_frame(self.session)
            for table in self.session.tables:
                sqlexec.run_sql(frame, f"DROP TABLE {table}")
            self.session.tables.clear()


def execute_tsql(broker: TSqlBroker, text: str, *,
                 out: Callable[[str], None] | None = None,
                 variables: Mapping[str, str] | None = None) -> list[list[dict[str, object]]]:
    """Run a T-SQL script; its result sets as lists of dicts.  The first error of severity
    >= 11 is raised (a ``TSqlError`` naming the batch, line and column)."""
    runner = Runner(broker, out=out, variables=variables)
    results: list[list[dict[str, object]]] = []
    try:
        for outcome in runner.batches(text):
            results.extend(r.dicts() for r in outcome.results)
            if outcome.error is not None:
                raise outcome.error
    finally:
        runner.close()
    return results
