"""T-SQL procedures kept in the broker database (their CREATE text, by lower-cased name),
called with positional, named, OUTPUT and default arguments; and table variables."""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable
from typing import Any

from sbroker.apps.sql import statements
from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql import sqlexec
from sbroker.apps.tsql.errors import NO_PROCEDURE, TSqlError
from sbroker.apps.tsql.evaluate import evaluate
from sbroker.apps.tsql.parser import parse
from sbroker.apps.tsql.session import Frame, Session

EXISTS = 2714
MISSING_PARAMETER = 201
TOO_MANY_ARGUMENTS = 8144
_table_numbers = itertools.count(1)


@functools.lru_cache(maxsize=256)
def parse_text(text: str) -> tuple[n.Stmt, ...]:
    """A batch's statements, parsed once per text (procedures, EXEC (@sql))."""
    return parse(text)


def definition(session: Session, name: str) -> n.CreateProcedure | None:
    """The stored procedure ``name``, parsed, or None."""
    queries = statements(session.broker, "sbroker.apps.tsql")
    with session.work() as tx:
        row = tx.execute(queries["procedure_definition"], (name.lower(),)).fetchone()
    if row is None:
        return None
    [stmt] = parse_text(row[0])
    assert isinstance(stmt, n.CreateProcedure)
    return stmt


def create(frame: Frame, stmt: n.CreateProcedure) -> None:
    """CREATE / ALTER PROCEDURE: keep its text in the broker database."""
    session = frame.session
    queries = statements(session.broker, "sbroker.apps.tsql")
    if not stmt.alter and definition(session, stmt.name) is not None:
        raise TSqlError(f"There is already an object named '{stmt.name}' in the database.",
                        EXISTS)
    block = "procedure_alter" if stmt.alter else "procedure_create"
    with session.work() as tx:
        tx.execute(queries[block], (stmt.name.lower(), stmt.source, session.broker.clock.now()))


def drop(frame: Frame, name: str, if_exists: bool) -> None:
    session = frame.session
    queries = statements(session.broker, "sbroker.apps.tsql")
    with session.work() as tx:
        gone = tx.execute(queries["procedure_drop"], (name.lower(),)).rowcount
    if not gone and not if_exists:
        raise TSqlError(f"Cannot drop the procedure '{name}', because it does not exist or"
                        " you do not have permission.", 3701)


def call(frame: Frame, stmt: n.ExecProc, run: Callable[[Frame, tuple[n.Stmt, ...]], None],
         returned: type[Exception]) -> Any:
    """EXEC proc: bind the arguments, run the body in a frame of its own, copy OUTPUT
    arguments back; the RETURN value (0 when none)."""
    proc = definition(frame.session, stmt.name)
    if proc is None:
        raise TSqlError(f"Could not find stored procedure '{stmt.name}'.", NO_PROCEDURE)
    inner = sqlexec.new_frame(frame.session, proc.name)
    pairs = _pairs(proc, stmt)
    for param in proc.params:
        inner.declare(param.name, param.type, _value(frame, proc, param, pairs.get(param.name)))
    result: Any = 0
    try:
        run(inner, proc.body)
    except returned as exc:
        value = getattr(exc, "value", None)
        result = 0 if value is None else value
    for param in proc.params:
        arg = pairs.get(param.name)
        if arg is not None and arg.output and param.output and isinstance(arg.value, n.Var):
            frame.assign(arg.value.name, inner.vars[param.name])
    return result


def _pairs(proc: n.CreateProcedure, stmt: n.ExecProc) -> dict[str, n.ExecArg]:
    """Parameter name -> its argument, positional ones first, then named ones."""
    params = list(proc.params)
    named = {p.name for p in params}
    positional = [a for a in stmt.args if a.name is None]
    if len(positional) > len(params):
        raise TSqlError(f"Procedure or function {proc.name} has too many arguments"
                        " specified.", TOO_MANY_ARGUMENTS)
    pairs = {param.name: arg for param, arg in zip(params, positional, strict=False)}
    for arg in stmt.args:
        if arg.name is not None:
            if arg.name not in named:
                raise TSqlError(f"@{arg.name} is not a parameter for procedure {proc.name}.",
                                8145)
            pairs[arg.name] = arg
    return pairs


def _value(frame: Frame, proc: n.CreateProcedure, param: n.Param,
           arg: n.ExecArg | None) -> Any:
    """The value a parameter starts with: its argument's, or its default."""
    if arg is not None and not (isinstance(arg.value, n.Call) and arg.value.name == "DEFAULT"):
        return evaluate(arg.value, frame)
    if param.default is None and arg is None:
        raise TSqlError(f"Procedure or function '{proc.name}' expects parameter"
                        f" '@{param.name}', which was not supplied.", MISSING_PARAMETER)
    return None if param.default is None else evaluate(param.default, frame)


def declare_table(frame: Frame, stmt: n.DeclareTable) -> None:
    """DECLARE @t TABLE (...): a table of the database that holds the variable's rows until
    the session ends."""
    session = frame.session
    table = f"tsql_tv_{session.spid}_{next(_table_numbers)}"
    sqlexec.run_sql(frame, f"CREATE TABLE {table} {stmt.columns_sql}")
    frame.tables[stmt.name] = table
    session.tables.append(table)


def _spid_of(table: str) -> int | None:
    """The SPID in a table variable's table name ``tsql_tv_<spid>_<n>``, else None."""
    spid, _, number = table.removeprefix("tsql_tv_").partition("_")
    return int(spid) if spid.isdigit() and number.isdigit() else None


def sweep_table_variables(session: Session) -> int:
    """Drop the tables of table variables whose session's process is gone (a process that
    crashed could not drop them); how many it dropped."""
    broker = session.broker
    queries = statements(broker, "sbroker.apps.tsql")
    with broker.transaction() as tx:
        tables = [str(row[0]) for row in tx.execute(queries["table_variable_tables"], ())]
    owned = {table: _spid_of(table) for table in tables}
    if not any(spid is not None for spid in owned.values()):
        return 0
    alive = {int(row["session_id"]) for row in broker.view("dm_broker_sessions")}  # reaps
    dead = [t for t, spid in owned.items() if spid is not None and spid // 100000 not in alive]
    for table in dead:
        with broker.transaction() as tx:
            tx.execute(f"DROP TABLE IF EXISTS {table}", ())
    return len(dead)
