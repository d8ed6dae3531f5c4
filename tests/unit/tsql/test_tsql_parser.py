"""The T-SQL parser: each construct of docs/tsql.md gives its statement; errors name line
and column; the seed 002 scripts parse whole."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sbroker.apps.tsql import nodes as n
from sbroker.apps.tsql.errors import TSqlSyntaxError
from sbroker.apps.tsql.statement import Statement, parse
from sbroker.apps.tsql.statements import (
    cursors,
    dialogs,
    endpoint,
    flow,
    queries,
    queues,
    receive,
    routines,
    routing,
    variables,
)
from sbroker.apps.tsql.tokens import split_batches

SEEDS = Path(__file__).resolve().parents[3] / "examples" / "tsql"


def one(text: str) -> Statement:
    [stmt] = parse(text)
    return stmt


def test_declare_set_and_select_assignment() -> None:
    declare = one("declare @a int = 1, @b nvarchar(max)")
    assert isinstance(declare, variables.Declare)
    assert [(name, t.name, t.args) for name, t, _ in declare.items] == [
        ("a", "INT", ()), ("b", "NVARCHAR", ("MAX",))]
    assert one("set @a += 2") == variables.SetVar(1, 1, "a", "+=", n.Literal(2))
    select = one("select @a = 1, @b = 'x'")
    assert isinstance(select, queries.Select)
    assert [i.target for i in select.query.items] == ["a", "b"] and select.query.rest == ""


def test_statements_need_no_semicolons() -> None:
    body = parse("declare @x int set @x = 1 if @x is null print 'null' else print 'set'"
                 " update T set a = 1 where b = 2 select * from T")
    assert [type(s).__name__ for s in body] == ["Declare", "SetVar", "If", "PlainSql", "Select"]
    update = body[3]
    assert isinstance(update, queries.PlainSql)
    assert update.sql == "update T set a = 1 where b = 2"


def test_try_catch_while_and_end_conversation_inside_a_block() -> None:
    body = parse("""
        while (1=1)
        begin
            begin try
                end conversation @h;
                break
            end try
            begin catch
                continue
            end catch
        end""")
    [loop] = body
    assert isinstance(loop, flow.While) and isinstance(loop.body, flow.Block)
    [trycatch] = loop.body.body
    assert isinstance(trycatch, flow.TryCatch)
    assert isinstance(trycatch.body[0], dialogs.EndConversation)
    assert trycatch.handler == (flow.Leave(9, 17, flow.Continue),)


def test_service_broker_statements() -> None:
    body = parse("""
        create queue Q with status = on, activation (status = on, procedure_name = P,
            max_queue_readers = 4, execute as self)
        begin dialog conversation @h from service A to service 'B', 'CURRENT DATABASE'
            on contract [C] with related_conversation_group = @g, lifetime = 60, encryption = off
        send on conversation (@h, @k) message type [M] (@body)
        waitfor (receive top (1) @t = message_type_name from Q where conversation_handle = @h),
            timeout 500
        get conversation group @g from Q
        begin conversation timer (@h) timeout = 5
        move conversation @h to @g
        end conversation @h with error = 1 description = 'no'
        create broker priority P1 for conversation set (contract_name = C, priority_level = 3)
    """)
    assert [type(s) for s in body] == [
        queues.CreateQueue, dialogs.BeginDialog, dialogs.Send, receive.Waitfor,
        receive.GetConversationGroup, dialogs.BeginConversationTimer,
        dialogs.MoveConversation, dialogs.EndConversation, routing.CreateBrokerPriority]
    queue = body[0]
    assert isinstance(queue, queues.CreateQueue)
    assert queue.options["ACTIVATION"] == {
        "STATUS": "ON", "PROCEDURE_NAME": "P", "MAX_QUEUE_READERS": n.Literal(4),
        "EXECUTE": "SELF"}
    waitfor = body[3]
    assert isinstance(waitfor, receive.Waitfor) and waitfor.timeout == n.Literal(500)
    assert isinstance(waitfor.inner, receive.Receive)
    assert waitfor.inner.where == ("conversation_handle", n.Var("h"))
    assert body[5] == dialogs.BeginConversationTimer(10, 9, n.Var("h"), n.Literal(5))


def test_endpoint_options_as_sql_server_writes_them() -> None:
    stmt = one("create endpoint E state = started as tcp (listener_port = 4022,"
               " listener_ip = (10.0.0.7)) for service_broker (authentication ="
               " windows kerberos certificate [C 1] encryption = required algorithm rc4 aes,"
               " message_forward_size = 5)")
    assert isinstance(stmt, endpoint.CreateEndpoint)
    assert stmt.options == {
        "STATE": "STARTED", "LISTENER_PORT": n.Literal(4022), "LISTENER_IP": "10.0.0.7",
        "AUTHENTICATION": {"WINDOWS": "KERBEROS", "CERTIFICATE": "C 1"},
        "ENCRYPTION": "REQUIRED", "MESSAGE_FORWARD_SIZE": n.Literal(5)}
    stmt = one("alter endpoint E as tcp (listener_ip = ('::1'))")
    assert isinstance(stmt, endpoint.AlterEndpoint) and stmt.options == {"LISTENER_IP": "::1"}
    with pytest.raises(TSqlSyntaxError, match="ENDPOINT AS HTTP is not supported"):
        parse("create endpoint E as http (path = '/x') for soap ()")
    with pytest.raises(TSqlSyntaxError, match="expected WINDOWS or CERTIFICATE"):
        parse("create endpoint E as tcp (listener_port = 1)"
              " for service_broker (authentication = none)")


def test_cursor_statements() -> None:
    body = parse("declare c cursor local fast_forward read_only for select a from T"
                 " order by a for read only\nopen c fetch next from c into @a, @b"
                 " fetch c close c deallocate c")
    declare = body[0]
    assert isinstance(declare, cursors.DeclareCursor) and declare.local and declare.name == "c"
    assert [(s.action, s.targets) for s in body[1:] if isinstance(s, cursors.CursorOp)] == [
        ("OPEN", ()), ("FETCH", ("a", "b")), ("FETCH", ()), ("CLOSE", ()),
        ("DEALLOCATE", ())]
    with pytest.raises(TSqlSyntaxError, match="SCROLL cursors"):
        parse("declare c scroll cursor for select 1")
    with pytest.raises(TSqlSyntaxError, match="FETCH PRIOR"):
        parse("fetch prior from c")
    with pytest.raises(TSqlSyntaxError, match="cursor variables"):
        parse("declare @c cursor")


def test_create_procedure_keeps_its_text_and_parameters() -> None:
    proc = one("create procedure dbo.P @a int = 3, @b uniqueidentifier output as\n"
               "begin select @a end")
    assert isinstance(proc, routines.CreateProcedure)
    assert proc.name == "P"
    assert [(p.name, p.type.name, p.output) for p in proc.params] == [
        ("a", "INT", False), ("b", "UNIQUEIDENTIFIER", True)]
    assert proc.source.startswith("create procedure dbo.P") and proc.source.endswith("end")


def test_a_syntax_error_names_line_and_column() -> None:
    with pytest.raises(TSqlSyntaxError) as caught:
        parse("declare @x int\nset @x 1")
    assert (caught.value.line, caught.value.column) == (2, 8)
    assert "expected = after SET @variable near '1'" in caught.value.message


def test_unsupported_statements_are_named() -> None:
    with pytest.raises(TSqlSyntaxError, match="the statement GRANT is not supported"):
        parse("grant select on T to someone")
    with pytest.raises(TSqlSyntaxError, match="BEGIN DISTRIBUTED TRANSACTION"):
        parse("begin distributed transaction")


@pytest.mark.parametrize("name", ["seed002_scheduler.sql", "seed002_test.sql"])
def test_the_seed_002_scripts_parse(name: str) -> None:
    text = (SEEDS / name).read_text("utf-8")
    for batch in split_batches(text):
        assert parse(text, batch.tokens)


WORDS = ["select", "@x", "=", "1", "'a'", "from", "T", "begin", "end", "if", "else", "while",
         "(", ")", ",", ";", "declare", "int", "set", "exec", "receive", "waitfor", "send",
         "on", "conversation", "try", "catch", "create", "procedure", "as", "queue", "with",
         "for", "xml", "path", "top", "case", "when", "then", "null", "is", "not", "\n"]


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(WORDS), max_size=30))
def test_the_parser_raises_only_syntax_errors(words: list[str]) -> None:
    text = " ".join(words)
    try:
        parse(text)
    except TSqlSyntaxError as exc:
        assert exc.line is not None
