"""Activation of T-SQL procedures: a queue whose PROCEDURE_NAME names a T-SQL procedure has
``sbroker.apps.tsql.activate:<name>`` as its activation procedure; activation imports this
module and reads the attribute ``<name>`` (``resolve_procedure``), which runs the stored
procedure in a session of its own whose @@SPID is the task's ``spid`` in
``sys.dm_broker_activated_tasks``.  Each RECEIVE that returns messages asks for another
reader at once (up to MAX_QUEUE_READERS), as the scheduler's executor does, instead of
waiting for the monitor's ramp of one reader per ``monitor_interval``.

A procedure interrupted because its broker stops (the end of a ``sbroker sql`` run, a
``serve`` stopped) rolls back its open transaction and returns quietly: one INFO line in the
log.  A procedure that fails raises its error as SQL Server's error log shows it ("The
activated proc ... output the following: ..."), with the error's number, procedure and line;
activation logs it and counts the failure (docs/tsql.md, "Activation procedures in
T-SQL")."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sbroker.apps.tsql import sqlexec
from sbroker.apps.tsql.errors import BREAK_OUTSIDE_LOOP, TSqlError
from sbroker.apps.tsql.session import Session
from sbroker.apps.tsql.statement import Break, Continue, execute
from sbroker.apps.tsql.statements.routines import ExecProc
from sbroker.core.errors import BrokerError

log = logging.getLogger("sbroker.tsql")


def run_activated(ctx: Any, name: str) -> None:
    """Run the T-SQL procedure ``name`` for an activated task (``ctx``: ActivationContext)."""
    broker = ctx.broker
    session = Session(broker, spid=broker.session_id * 100000 + ctx.task_id,
                      out=lambda text: log.info("%s: %s", name, text), stopping=ctx.stopping,
                      received=ctx.request_reader)
    try:
        _run(session, name, ctx.queue)
    finally:
        _close(session, name)


def _run(session: Session, name: str, queue: str) -> None:
    try:
        execute(sqlexec.new_frame(session), ExecProc(0, 0, name, (), None))
    except (Break, Continue):
        error = TSqlError("BREAK or CONTINUE outside a WHILE loop", BREAK_OUTSIDE_LOOP, 15,
                          procedure=name)
        raise _as_logged(name, queue, error) from None
    except TSqlError as exc:
        if session.stopping.is_set():
            log.info("activated procedure %s on queue %s stopped with its broker (%s); its"
                     " open transaction, if any, rolled back", name, queue, exc.message,
                     extra={"queue": queue, "procedure": name, "number": exc.number})
            return
        raise _as_logged(name, queue, exc) from None


class ActivatedProcedureError(BrokerError):
    """An activated T-SQL procedure's error as SQL Server's error log reports it."""


def _as_logged(name: str, queue: str, error: TSqlError) -> ActivatedProcedureError:
    return ActivatedProcedureError(f"The activated proc '{name}' running on queue '{queue}'"
                                   f" output the following: '{error}'", error.number)


def _close(session: Session, name: str) -> None:
    """End the session: roll back what is open (quietly when the broker is going away)."""
    try:
        session.close()
    except Exception:
        if not session.stopping.is_set():
            raise
        log.debug("activated procedure %s: rollback at stop failed", name, exc_info=True)


def __getattr__(name: str) -> Callable[[Any], None]:
    if name.startswith("__"):
        raise AttributeError(name)

    def procedure(ctx: Any) -> None:
        run_activated(ctx, name)

    procedure.__qualname__ = name
    return procedure
