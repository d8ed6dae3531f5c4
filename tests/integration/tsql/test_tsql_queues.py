"""A queue as the source of a SELECT, as in SQL Server (docs/tsql.md, "Querying a queue"):
by its name with or without dbo. and hints, in joins, subqueries and EXISTS, with SQL
Server's queue columns; reading receives and locks nothing; INSERT, UPDATE, DELETE and
TRUNCATE are refused with error 416. On both backends."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import sbroker
from sbroker.apps.tsql import TSqlError

Run = Callable[..., list[list[dict[str, Any]]]]

SETUP = """
create message type Request validation = well_formed_xml
create contract RequestReply (Request sent by initiator)
create queue InitQueue
create queue TargetQueue
create service InitService on queue InitQueue
create service TargetService on queue TargetQueue (RequestReply)
go
declare @h uniqueidentifier
begin dialog @h from service InitService to service 'TargetService' on contract RequestReply
    with encryption = off
send on conversation @h message type Request (N'<a/>')
send on conversation @h message type Request (N'<b/>')
"""
QUEUE_COLUMNS = [
    "status", "priority", "queuing_order", "conversation_group_id", "conversation_handle",
    "message_sequence_number", "service_name", "service_id", "service_contract_name",
    "service_contract_id", "message_type_name", "message_type_id", "validation",
    "message_body", "message_enqueue_time"]


def test_a_queue_reads_like_a_table_with_sql_servers_columns(tsql: Run) -> None:
    tsql(SETUP)
    [count, everything, bodies, joined, inside] = tsql("""
        select count(*) as n from dbo.TargetQueue with (nolock)
        select * from TargetQueue order by queuing_order
        select cast(message_body as nvarchar(max)) as body, q.message_sequence_number as n
            from targetqueue q where service_name = 'TargetService' order by n
        select e.state_desc, count(*) as n from TargetQueue q
            join sys.conversation_endpoints e on e.conversation_handle = q.conversation_handle
            group by e.state_desc
        select (select count(*) from dbo.TargetQueue) as waiting,
               (select count(*) from InitQueue) as replies
        if exists (select * from TargetQueue where message_type_name = 'Request')
            print 'requests waiting'
    """, out=lambda text: None)
    assert count == [{"n": 2}]
    assert list(everything[0]) == QUEUE_COLUMNS
    first = everything[0]
    assert (first["status"], first["message_type_name"], first["validation"],
            bytes(first["message_body"])) == (1, "Request", "X", b"<a/>")
    assert bodies == [{"body": "<a/>", "n": 0}, {"body": "<b/>", "n": 1}]
    assert joined == [{"state_desc": "CONVERSING", "n": 2}]
    assert inside == [{"waiting": 2, "replies": 0}]


def test_reading_a_queue_receives_and_locks_nothing(tsql: Run,
                                                    broker: sbroker.Broker) -> None:
    tsql(SETUP)
    with broker.transaction() as tx:  # holds the conversation group, a message received
        [taken] = tx.receive("TargetQueue", top=1)
        [[row]] = tsql("select count(*) as n from TargetQueue")  # another session: at once
        assert row == {"n": 2}  # the receive has not committed
        tx.rollback()
    [[row]] = tsql("if exists (select * from TargetQueue) select count(*) as n from"
                   " TargetQueue")
    assert row == {"n": 2}
    [received] = tsql("receive cast(message_body as nvarchar(max)) as body from TargetQueue")
    assert [r["body"] for r in received] == ["<a/>", "<b/>"] and taken.message_body == b"<a/>"


@pytest.mark.parametrize("statement", [
    "insert into TargetQueue (status) values (1)",
    "update dbo.TargetQueue set status = 0",
    "update q set status = 0 from TargetQueue q",
    "delete from TargetQueue where status = 1",
    "truncate table TargetQueue",
])
def test_changing_a_queue_is_error_416(tsql: Run, statement: str) -> None:
    tsql(SETUP)
    with pytest.raises(TSqlError) as caught:
        tsql(statement)
    assert caught.value.number == 416
    assert caught.value.message == 'The service queue "TargetQueue" cannot be directly updated.'
    [[row]] = tsql("select count(*) as n from TargetQueue")
    assert row == {"n": 2}


def test_a_queue_made_in_the_same_batch_reads_at_once_and_names_no_table(tsql: Run) -> None:
    [[row]] = tsql("create queue Fresh\nselect count(*) as n from Fresh")
    assert row == {"n": 0}
    with pytest.raises(TSqlError, match="Msg 2714.*already an object named 'Fresh'"):
        tsql("create table Fresh (a int)")
    tsql("drop queue Fresh\ncreate table Fresh (a int)\ninsert into Fresh values (1)")
    [[row]] = tsql("select count(*) as n from Fresh")
    assert row == {"n": 1}
