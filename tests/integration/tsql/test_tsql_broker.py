"""Service Broker statements in T-SQL (docs/tsql.md) on the broker's API, with SQL Server's
error numbers, and a T-SQL procedure started by activation."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import sbroker
from sbroker.apps.tsql import TSqlError

Run = Callable[..., list[list[dict[str, Any]]]]

SETUP = """
create message type Request validation = well_formed_xml
create message type Reply validation = none
create contract RequestReply (Request sent by initiator, Reply sent by target)
create queue InitQueue
create queue TargetQueue with status = on, retention = off
create service InitService on queue InitQueue
create service TargetService on queue TargetQueue (RequestReply)
"""


def test_a_request_and_its_reply(tsql: Run, broker: sbroker.Broker) -> None:
    tsql(SETUP)
    [got, replies] = tsql("""
        declare @h uniqueidentifier, @t uniqueidentifier, @body xml, @type sysname
        begin dialog conversation @h
            from service InitService to service 'TargetService' on contract RequestReply
            with encryption = off, lifetime = 600
        send on conversation @h message type Request (N'<ask n="2"/>')

        waitfor (receive top (1) @t = conversation_handle, @type = message_type_name,
                 @body = cast(message_body as xml) from TargetQueue), timeout 1000
        select @type as type, @body.value('(/ask/@n)[1]', 'int') as n
        send on conversation @t message type Reply (N'four')
        end conversation @t

        receive message_type_name, cast(message_body as nvarchar(max)) as body
        from InitQueue where conversation_handle = @h
    """)
    assert got == [{"type": "Request", "n": 2}]
    assert replies == [
        {"message_type_name": "Reply", "body": "four"},
        {"message_type_name": "http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog",
         "body": ""}]
    names = {row["name"] for row in broker.view("service_queues")}
    assert {"InitQueue", "TargetQueue"} <= names


def test_send_on_an_ended_conversation_is_8429_in_catch(tsql: Run) -> None:
    tsql(SETUP)
    [rows] = tsql("""
        declare @h uniqueidentifier
        begin dialog @h from service InitService to service 'TargetService'
            on contract RequestReply
        end conversation @h
        begin try
            send on conversation @h message type Request (N'<late/>')
        end try
        begin catch
            select error_number() as n
        end catch
    """)
    assert rows == [{"n": 8429}]


@pytest.mark.parametrize(("statement", "number"), [
    ("send on conversation @h message type Request (N'<x/>')", 8426),
    ("send on conversation @k message type Reply (N'x')", 8431),
    ("receive * from NoSuchQueue", 15151),
])
def test_runtime_errors_carry_sql_servers_numbers(tsql: Run, statement: str,
                                                   number: int) -> None:
    tsql(SETUP + "create contract Other (Request sent by initiator)")
    with pytest.raises(TSqlError) as caught:
        tsql(f"""
            declare @h uniqueidentifier = newid(), @k uniqueidentifier
            begin dialog @k from service InitService to service 'TargetService'
                on contract Other
            {statement}
        """)
    assert caught.value.number == number


def test_get_conversation_group_move_and_timer(tsql: Run, broker: sbroker.Broker) -> None:
    tsql(SETUP)
    [rows] = tsql("""
        declare @a uniqueidentifier, @b uniqueidentifier, @g uniqueidentifier,
                @got uniqueidentifier, @n int
        begin dialog @a from service InitService to service 'TargetService'
            on contract RequestReply
        begin dialog @b from service InitService to service 'TargetService'
            on contract RequestReply
        send on conversation (@a, @b) message type Request (N'<x/>')
        begin conversation timer (@a) timeout = 60
        receive top (1) @got = conversation_group_id from TargetQueue
        get conversation group @g from TargetQueue
        select @n = count(*) from sys.conversation_endpoints
        select case when @g is not null and @g <> @got then 1 else 0 end as other_group, @n as n
    """)
    assert rows == [{"other_group": 1, "n": 4}]


def test_catalog_ddl_drop_and_priorities(tsql: Run, broker: sbroker.Broker) -> None:
    tsql(SETUP + """
        create broker priority InitiatorToTargetPriority
            for conversation set (contract_name = RequestReply,
                                  local_service_name = InitService,
                                  remote_service_name = 'TargetService',
                                  priority_level = 3)
        create route Elsewhere with service_name = 'Far', address = 'tcp://127.0.0.1:4099'
        alter queue TargetQueue with status = off
    """)
    [priority] = broker.view("conversation_priorities")
    assert (priority["priority"], priority["local_service_name"]) == (3, "InitService")
    assert not broker.catalog.queue("TargetQueue").status
    tsql("drop broker priority InitiatorToTargetPriority drop route Elsewhere"
         " drop service TargetService drop queue TargetQueue")
    assert "TargetQueue" not in broker.catalog.queues
    with pytest.raises(TSqlError):
        tsql("drop queue TargetQueue")


def test_activation_runs_a_tsql_procedure(tsql: Run, broker: sbroker.Broker) -> None:
    tsql(SETUP + """
        create table Seen (spid int, body nvarchar(100))
        go
        create procedure Answer as
        begin
            declare @h uniqueidentifier, @type sysname, @body nvarchar(100)
            while 1 = 1
            begin
                waitfor (receive top (1) @h = conversation_handle, @type = message_type_name,
                         @body = cast(message_body as nvarchar(100)) from TargetQueue),
                    timeout 200
                if @@rowcount = 0 break
                if @type = 'Request'
                begin
                    insert into Seen values (@@spid, @body)
                    send on conversation @h message type Reply (N'done')
                    end conversation @h
                end
            end
        end
        go
        alter queue TargetQueue with activation (status = on, procedure_name = Answer,
                                                 max_queue_readers = 2, execute as owner)
    """)
    broker.start()
    [rows, seen] = tsql("""
        declare @h uniqueidentifier, @reply nvarchar(100)
        begin dialog @h from service InitService to service 'TargetService'
            on contract RequestReply
        send on conversation @h message type Request (N'<ask/>')
        waitfor (receive top (1) @reply = cast(message_body as nvarchar(100)) from InitQueue
                 where conversation_handle = @h), timeout 10000
        select @reply as reply
        select count(*) as n, min(spid) as spid from Seen
    """)
    assert rows == [{"reply": "done"}]
    assert seen[0]["n"] == 1 and seen[0]["spid"] > broker.session_id * 100000
    queue = broker.catalog.queue("TargetQueue")
    assert queue.activation_procedure == "sbroker.apps.tsql.activate:Answer"
    assert queue.max_queue_readers == 2


def test_receive_into_a_table_variable(tsql: Run) -> None:
    tsql(SETUP)
    [rows] = tsql("""
        declare @h uniqueidentifier
        declare @got table (type sysname, body varbinary(max), n bigint)
        begin dialog @h from service InitService to service 'TargetService'
            on contract RequestReply
        send on conversation @h message type Request (N'<a/>')
        send on conversation @h message type Request (N'<b/>')
        receive message_type_name, message_body, message_sequence_number
            from TargetQueue into @got
        select type, body, n, @@rowcount as rc from @got order by n
    """)
    assert [(r["type"], bytes(r["body"]), r["n"], r["rc"]) for r in rows] == [
        ("Request", b"<a/>", 0, 2), ("Request", b"<b/>", 1, 2)]


def test_related_group_error_and_cleanup(tsql: Run) -> None:
    tsql(SETUP)
    [groups, error] = tsql("""
        declare @a uniqueidentifier, @b uniqueidentifier, @g uniqueidentifier,
                @t uniqueidentifier, @type sysname, @body nvarchar(max)
        begin dialog @a from service InitService to service 'TargetService'
            on contract RequestReply
        select @g = conversation_group_id from sys.conversation_endpoints
            where conversation_handle = @a
        begin dialog @b from service InitService to service 'TargetService'
            on contract RequestReply with related_conversation = @a, lifetime = 600
        select count(distinct conversation_group_id) as groups
            from sys.conversation_endpoints where conversation_handle in (@a, @b)
        send on conversation @a message type Request (N'<x/>')
        receive top (1) @t = conversation_handle from TargetQueue
        end conversation @t with error = 4242 description = 'no thanks'
        end conversation @b with cleanup
        receive top (1) @type = message_type_name,
            @body = cast(message_body as nvarchar(max)) from InitQueue
        select @type as type,
               case when @body like '%<Code>4242</Code>%no thanks%' then 1 else 0 end as told
    """)
    assert groups == [{"groups": 1}]
    assert error == [{"type": "http://schemas.microsoft.com/SQL/ServiceBroker/Error",
                      "told": 1}]


def test_a_catch_block_logs_the_error_to_a_table_inside_the_transaction(tsql: Run) -> None:
    tsql(SETUP + "create table ErrorLog (number int, message nvarchar(400))")
    [rows] = tsql("""
        declare @h uniqueidentifier
        begin tran
        begin dialog @h from service InitService to service 'TargetService'
            on contract RequestReply
        end conversation @h
        begin try
            send on conversation @h message type Request (N'<late/>')
        end try
        begin catch
            insert into ErrorLog values (error_number(), error_message())
        end catch
        commit
        select number, @@trancount as open_transactions from ErrorLog
    """)
    assert rows == [{"number": 8429, "open_transactions": 0}]


def test_sys_catalog_views(tsql: Run) -> None:
    tsql(SETUP)
    [types, contracts, services] = tsql("""
        select name from sys.service_message_types where name in ('Request', 'Reply')
        order by name
        select name from sys.service_contracts where name = 'RequestReply'
        select name from sys.services where name like '%Service' order by name
    """)
    assert [r["name"] for r in types] == ["Reply", "Request"]
    assert contracts == [{"name": "RequestReply"}]
    assert [r["name"] for r in services] == ["InitService", "TargetService"]


def test_a_cursor_ends_every_conversation_as_admin_scripts_do(tsql: Run) -> None:
    tsql(SETUP + """
        declare @h uniqueidentifier, @i int = 0
        while @i < 3
        begin
            begin dialog @h from service InitService to service 'TargetService'
                on contract RequestReply with encryption = off
            set @i += 1
        end
    """)
    [ended, left] = tsql("""
        declare @h uniqueidentifier, @n int = 0
        declare ends cursor local fast_forward for
            select conversation_handle from sys.conversation_endpoints
        open ends
        fetch next from ends into @h
        while @@fetch_status = 0
        begin
            end conversation @h with cleanup
            set @n += 1
            fetch next from ends into @h
        end
        close ends
        deallocate ends
        select @n as ended, @@fetch_status as status
        select count(*) as n from sys.conversation_endpoints
    """)
    assert ended == [{"ended": 3, "status": -1}] and left == [{"n": 0}]
    with pytest.raises(TSqlError, match="Msg 16916.*'ends' does not exist"):
        tsql("open ends")
    with pytest.raises(TSqlError, match="Msg 16917.*not open"):
        tsql("declare c cursor for select 1 as one fetch next from c")
    [[row]] = tsql("declare c cursor for select 1 as one\ngo\n"  # global: the session's
                   "open c fetch next from c close c deallocate c")
    assert row == {"one": 1}
