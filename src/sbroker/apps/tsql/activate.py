"""Activation of T-SQL procedures: a queue whose PROCEDURE_NAME names a T-SQL procedure has
``sbroker.apps.tsql.activate:<name>`` as its activation procedure; activation imports this
module and reads the attribute ``<name>`` (``resolve_procedure``), which runs the stored
procedure in a session of its own whose @@SPID is the task's ``spid`` in
``sys.dm_broker_activated_tasks``.  Each RECEIVE that returns messages asks for another
reader at once (up to MAX_QUEUE_READERS), as the scheduler's executor does, instead of
waiting for the monitor's ramp of one reader per ``monitor_interval``."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from sbroker.apps.tsql import sqlexec
from sbroker.apps.tsql.session import Session
from sbroker.apps.tsql.statement import execute
from sbroker.apps.tsql.statements.routines import ExecProc

log = logging.getLogger("sbroker.tsql")


def run_activated(ctx: Any, name: str) -> None:
    """Run the T-SQL procedure ``name`` for an activated task (``ctx``: ActivationContext)."""
    broker = ctx.broker
    session = Session(broker, spid=broker.session_id * 100000 + ctx.task_id,
                      out=lambda text: log.info("%s: %s", name, text), stopping=ctx.stopping,
                      received=ctx.request_reader)
    frame = sqlexec.new_frame(session)
    try:
        execute(frame, ExecProc(0, 0, name, (), None))
    finally:
        session.close()


def __getattr__(name: str) -> Callable[[Any], None]:
    if name.startswith("__"):
        raise AttributeError(name)

    def procedure(ctx: Any) -> None:
        run_activated(ctx, name)

    procedure.__qualname__ = name
    return procedure
