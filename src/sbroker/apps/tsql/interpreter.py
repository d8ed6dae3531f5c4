"""The T-SQL interpreter: runs parsed statements on a session, one method per statement
kind (the table ``EXECUTORS``).  Errors of severity >= 11 stop the batch unless a CATCH
block handles them; they carry the statement's line."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

from sbroker.apps.tsql import cursors, procedures, sbexec, sqlexec, values
from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql.errors import USER, TSqlError
from sbroker.apps.tsql.evaluate import evaluate, truth
from sbroker.apps.tsql.session import Frame
from sbroker.core.errors import BrokerError

#: SET options accepted; the ones sbroker acts on are XACT_ABORT and NOCOUNT.
SET_OPTIONS = frozenset((
    "XACT_ABORT", "NOCOUNT", "ANSI_NULLS", "QUOTED_IDENTIFIER", "ANSI_WARNINGS", "ARITHABORT",
    "ANSI_PADDING", "CONCAT_NULL_YIELDS_NULL", "NUMERIC_ROUNDABORT", "TRANSACTION",
    "DEADLOCK_PRIORITY", "LOCK_TIMEOUT", "DATEFORMAT", "ANSI_NULL_DFLT_ON", "IMPLICIT_TRANSACTIONS",
))
NOT_IN_CATCH = 10704


class Break(Exception):
    """BREAK: leave the innermost WHILE."""


class Continue(Exception):
    """CONTINUE: next round of the innermost WHILE."""


class Return(Exception):
    """RETURN: leave the procedure or batch with a value."""

    def __init__(self, value: Any) -> None:
        super().__init__(value)
        self.value = value


def run(frame: Frame, body: tuple[n.Stmt, ...]) -> None:
    """Run statements in order."""
    for stmt in body:
        execute(frame, stmt)


def execute(frame: Frame, stmt: n.Stmt) -> None:
    """Run one statement; an error gets the statement's position."""
    try:
        EXECUTORS[type(stmt)](frame, stmt)
    except TSqlError as exc:
        if exc.line is None:
            exc.line, exc.column = stmt.line, stmt.column
            exc.procedure = exc.procedure or frame.procedure
        raise
    except BrokerError as exc:
        raise TSqlError(str(exc), exc.number, 16, line=stmt.line, column=stmt.column,
                        procedure=frame.procedure) from exc


def _declare(frame: Frame, stmt: n.Declare) -> None:
    for name, type_name, value in stmt.items:
        frame.declare(name, type_name, None if value is None else evaluate(value, frame))


def _set(frame: Frame, stmt: n.SetVar) -> None:
    value = evaluate(stmt.value, frame)
    if stmt.op != "=":
        value = evaluate(n.Binary(stmt.op[0], n.Literal(frame.variable(stmt.name)),
                                  n.Literal(value)), frame)
    frame.assign(stmt.name, value)


def _set_option(frame: Frame, stmt: n.SetOption) -> None:
    if stmt.option not in SET_OPTIONS:
        raise TSqlError(f"SET {stmt.option} is not supported by sbroker", 40517, 15)
    if stmt.option == "XACT_ABORT":
        frame.session.xact_abort = stmt.value == "ON"
    elif stmt.option == "NOCOUNT":
        frame.session.nocount = stmt.value == "ON"


def _if(frame: Frame, stmt: n.If) -> None:
    if truth(evaluate(stmt.condition, frame)):
        execute(frame, stmt.then)
    elif stmt.otherwise is not None:
        execute(frame, stmt.otherwise)


def _while(frame: Frame, stmt: n.While) -> None:
    while truth(evaluate(stmt.condition, frame)):
        if frame.session.stopping.is_set():
            raise TSqlError("the session was stopped (the broker is stopping)", 3980)
        try:
            execute(frame, stmt.body)
        except Break:
            return
        except Continue:
            continue


def _try_catch(frame: Frame, stmt: n.TryCatch) -> None:
    try:
        run(frame, stmt.body)
    except TSqlError as exc:
        if exc.severity < 11:
            raise
        frame.session.error_number = exc.number
        if frame.session.xact_abort and frame.session.tx is not None:
            frame.session.rollback()
        frame.handling.append(exc)
        try:
            run(frame, stmt.handler)
        finally:
            frame.handling.pop()


def _raiserror(frame: Frame, stmt: n.Raiserror) -> None:
    message = evaluate(stmt.message, frame)
    severity = int(evaluate(stmt.severity, frame))
    state = int(evaluate(stmt.state, frame))
    if isinstance(message, int):
        raise TSqlError(f"RAISERROR with a message number ({message}) needs sys.messages,"
                        " which sbroker does not have: give the text", 40517, 15)
    text = printf(values.text_of(message), [evaluate(a, frame) for a in stmt.args])
    if severity <= 10:
        frame.session.out(text)
        return
    raise TSqlError(text, USER, severity, state)


def printf(template: str, args: list[Any]) -> str:
    """RAISERROR's substitution of %s, %d, %i, %u, %x (with an optional width)."""
    out: list[str] = []
    i = 0
    queue = list(args)
    while i < len(template):
        ch = template[i]
        if ch != "%" or i + 1 >= len(template):
            out.append(ch)
            i += 1
            continue
        j = i + 1
        while j < len(template) and (template[j].isdigit() or template[j] in "-+ #.*l"):
            j += 1
        kind = template[j] if j < len(template) else ""
        if kind == "%":
            out.append("%")
        elif kind in "sdiuxXo" and kind:
            value = queue.pop(0) if queue else None
            text = "(null)" if value is None else values.text_of(value)
            if kind in "xX" and value is not None:
                text = format(int(value), kind)
            out.append(text)
        else:
            out.append(template[i:j + 1])
        i = j + 1
    return "".join(out)


def _throw(frame: Frame, stmt: n.Throw) -> None:
    if stmt.number is None:
        caught = frame.caught()
        if caught is None:
            raise TSqlError("THROW without parameters should be inside a CATCH block",
                            NOT_IN_CATCH)
        raise caught
    number = int(evaluate(stmt.number, frame))
    if number < 50000:
        raise TSqlError(f"Error number {number} in the THROW statement is outside the valid"
                        " range. Specify an error number in the valid range of 50000 to"
                        " 2147483647.", 35100)
    message = values.text_of(evaluate(stmt.message, frame)) if stmt.message else ""
    state = int(evaluate(stmt.state, frame)) if stmt.state else 1
    raise TSqlError(message, number, 16, state)


def _return(frame: Frame, stmt: n.Return) -> None:
    raise Return(None if stmt.value is None else evaluate(stmt.value, frame))


def _print(frame: Frame, stmt: n.Print) -> None:
    value = evaluate(stmt.value, frame)
    frame.session.out("" if value is None else values.text_of(value))


def _tran(frame: Frame, stmt: n.TranControl) -> None:
    session = frame.session
    {"BEGIN": session.begin, "COMMIT": session.commit,
     "ROLLBACK": session.rollback}[stmt.action]()


def _select(frame: Frame, stmt: n.Select) -> None:
    result = sqlexec.run_select(frame, stmt)
    if result is not None:
        frame.session.results.append(result)


def _plain(frame: Frame, stmt: n.PlainSql) -> None:
    result = sqlexec.run_sql(frame, stmt.sql)
    if result is not None:
        frame.session.results.append(result)


def _waitfor(frame: Frame, stmt: n.WaitforDelay) -> None:
    value = evaluate(stmt.delay, frame)
    if stmt.until:
        raise TSqlError("WAITFOR TIME is not supported by sbroker (use WAITFOR DELAY)",
                        40517, 15)
    frame.session.sleep(values.delay_seconds(value))


def _exec_dynamic(frame: Frame, stmt: n.ExecDynamic) -> None:
    text = evaluate(stmt.sql, frame)
    if text is None:
        return
    body = procedures.parse_text(values.text_of(text))
    inner = sqlexec.new_frame(frame.session, frame.procedure)
    with contextlib.suppress(Return):
        run(inner, body)


def _exec_proc(frame: Frame, stmt: n.ExecProc) -> None:
    result = procedures.call(frame, stmt, run, Return)
    if stmt.result is not None:
        frame.assign(stmt.result, result)


def _block(frame: Frame, stmt: n.Block) -> None:
    run(frame, stmt.body)


def _signal(kind: type[Exception]) -> Callable[[Frame, n.Stmt], None]:
    def raise_it(frame: Frame, stmt: n.Stmt) -> None:
        raise kind()
    return raise_it


def _declare_table(frame: Frame, stmt: n.DeclareTable) -> None:
    procedures.declare_table(frame, stmt)


def _database(frame: Frame, stmt: n.Database) -> None:
    if stmt.action == "DROP":
        raise TSqlError(f"DROP DATABASE {stmt.name}: sbroker does not drop the broker"
                        " database it runs on (delete the file, or DROP DATABASE on the"
                        " server)", 3702)
    # USE, CREATE DATABASE, ALTER DATABASE ... SET ENABLE_BROKER / SINGLE_USER: the one open
    # broker database is the database, and its broker is always enabled (docs/tsql.md).


EXECUTORS: dict[type, Callable[[Frame, Any], None]] = {
    n.Declare: _declare, n.DeclareTable: _declare_table, n.SetVar: _set,
    n.SetOption: _set_option, n.If: _if, n.While: _while, n.Block: _block,
    n.Break: _signal(Break), n.Continue: _signal(Continue), n.TryCatch: _try_catch,
    n.Raiserror: _raiserror, n.Throw: _throw, n.Return: _return, n.Print: _print,
    n.TranControl: _tran, n.Select: _select, n.PlainSql: _plain, n.WaitforDelay: _waitfor,
    n.ExecDynamic: _exec_dynamic, n.ExecProc: _exec_proc, n.Database: _database,
    n.CreateProcedure: procedures.create, n.DropObject: sbexec.drop,
    n.Broker: sbexec.execute, n.DeclareCursor: cursors.declare, n.CursorOp: cursors.operate,
}


new_frame = sqlexec.new_frame
