"""Every statement docs/tsql.md lists, as a table, for the tests of where a statement ends
when no semicolon says so (tests/unit/tsql/test_tsql_pairs_parse.py parses every ordered
pair; tests/integration/tsql/test_tsql_pairs_run.py runs each plain statement before every
statement of the scenario, on both backends).

``SCENARIO`` runs in order in one batch after ``SETUP``; ``PLAIN`` are the statements whose
end the parser must find by looking ahead (plain SQL: SELECT, INSERT, CREATE TABLE, ...).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Entry:
    """One statement: its text (``{k}`` is replaced by a number unique in the script), how
    many result sets it gives, and what must stand around it to run (``{pair}``)."""

    text: str
    results: int = 0
    around: str = "{pair}"
    semicolon_before: bool = False  # SQL Server needs one before it (a CTE after WITH ...)


SETUP = """
create message type Ask validation = none
create contract AskContract (Ask sent by initiator)
create queue AskQueue
create queue AnswerQueue
create service Asker on queue AskQueue
create service Answerer on queue AnswerQueue (AskContract)
create table T (id int identity(1, 1) primary key, n int)
create table Scratch (a int)
insert into T (n) values (1), (2)
go
create procedure P @a int = 0 as select @a + 1 as p
go
create procedure Gone as return 0
"""

SCENARIO = (
    Entry("declare @x int = 0"),
    Entry("declare @h uniqueidentifier, @k uniqueidentifier, @g uniqueidentifier, @i int = 0,"
          " @b varbinary(max), @sql nvarchar(100) = N'select 1 as dynamic'"),
    Entry("set @x = 1"),
    Entry("set xact_abort off"),
    Entry("select @x = count(*) from T"),
    Entry("if exists (select * from T where n > 0) select 'some' as t else select 'none' as t",
          1),
    Entry("while @i < 1 set @i += 1"),
    Entry("begin print 'block' end"),
    Entry("begin try print 'try' end try begin catch print 'catch' end catch"),
    Entry("raiserror('note %d', 10, 1, 7)"),
    Entry("raiserror('failed %d', 16, 1, 7)",
          around="begin try\n{pair}\nend try begin catch print 'caught' end catch"),
    Entry("throw 50001, 'thrown', 1",
          around="begin try\n{pair}\nend try begin catch print 'caught' end catch"),
    Entry("break", around="while 1 = 1 begin\n{pair}\nend"),
    Entry("continue", around="set @i = 0 while @i < 1 begin set @i += 1\n{pair}\nend"),
    Entry("print 'printed'"),
    Entry("begin tran"),
    Entry("commit"),
    Entry("begin transaction"),
    Entry("rollback"),
    Entry("exec P 1", 1),
    Entry("execute P @a = 2", 1),
    Entry("exec (@sql)", 1),
    Entry("waitfor delay '00:00:00.001'"),
    Entry("create table T2 (a int)"),
    Entry("create index IX2 on T2 (a)"),
    Entry("create view V2 as select a from T2"),
    Entry("select count(*) as c from V2", 1),
    Entry("insert into T2 (a) values (5)"),
    Entry("update T2 set a = 6 where a = 5"),
    Entry("delete from T2 where a = 6"),
    Entry("truncate table T2"),
    Entry("with c as (select 1 as one) select one from c", 1, semicolon_before=True),
    Entry("drop view V2"),
    Entry("drop table T2"),
    Entry("create message type Extra validation = none"),
    Entry("alter message type Extra validation = empty"),
    Entry("create contract ExtraContract (Extra sent by any)"),
    Entry("create queue ExtraQueue with status = on"),
    Entry("alter queue ExtraQueue with retention = off"),
    Entry("create service ExtraService on queue ExtraQueue (ExtraContract)"),
    Entry("alter service ExtraService (drop contract ExtraContract)"),
    Entry("drop service ExtraService"),
    Entry("drop queue ExtraQueue"),
    Entry("drop contract ExtraContract"),
    Entry("drop message type Extra"),
    Entry("create route ExtraRoute with service_name = 'Far',"
          " address = 'TCP://127.0.0.1:4099'"),
    Entry("alter route ExtraRoute with address = 'LOCAL'"),
    Entry("drop route ExtraRoute"),
    Entry("create broker priority ExtraPriority for conversation set"
          " (contract_name = AskContract, priority_level = 7)"),
    Entry("alter broker priority ExtraPriority for conversation set (priority_level = 6)"),
    Entry("drop broker priority ExtraPriority"),
    Entry("create endpoint ExtraEndpoint state = stopped as tcp (listener_port = 0)"
          " for service_broker (authentication = certificate ExtraCertificate)"),
    Entry("alter endpoint ExtraEndpoint state = stopped"),
    Entry("drop endpoint ExtraEndpoint"),
    Entry("begin dialog conversation @h from service Asker to service 'Answerer'"
          " on contract AskContract with encryption = off"),
    Entry("begin dialog @k from service Asker to service 'Answerer' on contract AskContract"),
    Entry("send on conversation @h message type Ask (N'one')"),
    Entry("send on conversation (@h, @k) message type Ask (N'two')"),
    Entry("select count(*) as waiting from dbo.AnswerQueue with (nolock)", 1),
    Entry("receive top (1) @b = message_body from AnswerQueue"),
    Entry("receive top (1) message_type_name from dbo.AnswerQueue", 1),
    Entry("waitfor (receive top (1) @b = message_body from AnswerQueue), timeout 1000"),
    Entry("get conversation group @g from AnswerQueue"),
    Entry("waitfor (get conversation group @g from AnswerQueue), timeout 10"),
    Entry("begin conversation timer (@h) timeout = 60"),
    Entry("select @g = conversation_group_id from sys.conversation_endpoints"
          " where conversation_handle = @k"),
    Entry("move conversation @h to @g"),
    Entry("end conversation @h"),
    Entry("end conversation @k with cleanup"),
    Entry("declare cur cursor local for select n from T"),
    Entry("open cur"),
    Entry("fetch next from cur into @x"),
    Entry("close cur"),
    Entry("deallocate cur"),
    Entry("drop procedure Gone"),
    Entry("use Broker"),
    Entry("create database Other"),
    Entry("alter database Other set enable_broker with rollback immediate"),
    Entry("return"),
)

#: Plain statements: each is put before every statement of SCENARIO.
PLAIN = (
    Entry("select count(*) as c from T", 1),
    Entry("select n from T where n > 0 order by n", 1),
    Entry("select count(*) as c from dbo.AnswerQueue with (nolock)", 1),
    Entry("select @x = count(*) from T"),
    Entry("select case when n > 1 then 'big' else 'small' end as size from T", 1),
    Entry("select 1 as a union all select 2", 1),
    Entry("select n from T order by n offset 0 rows fetch next 1 rows only", 1),
    Entry("insert into Scratch (a) values (1)"),
    Entry("insert into Scratch (a) select n from T where n < 0"),
    Entry("update Scratch set a = a + 1 where a > 100"),
    Entry("delete from Scratch where a < 0"),
    Entry("truncate table Scratch"),
    Entry("create table Made{k} (a int)"),
    Entry("create view Seen{k} as select n from T"),
    Entry("drop table if exists Made{k}"),
    Entry("with c as (select 1 as one) select one from c", 1, semicolon_before=True),
)

#: Statements that take the rest of the batch as their body: last of a pair only.
BATCH_ONLY = (
    Entry("create procedure Q1 as select 1 as q"),
    Entry("alter procedure P @a int = 0 as select @a + 2 as p"),
    Entry("create or alter procedure Q2 as begin print 'q' end"),
)


def pair(first: Entry, second: Entry, separator: str, k: int = 0) -> str:
    """``first`` then ``second`` with ``separator`` between them (a semicolon too where
    SQL Server needs one)."""
    lead = (";" if first.semicolon_before else "") + first.text.format(k=k)
    between = (";" if second.semicolon_before else "") + separator
    return f"{lead}{between}{second.text.format(k=k)}"


def script(first: Entry, separator: str = "\n") -> tuple[str, int]:
    """SCENARIO with ``first`` before each of its statements but the first (the DECLARE
    ``first`` may use), and how many result sets the batch gives."""
    parts = [SCENARIO[0].text]
    results = SCENARIO[0].results
    for k, entry in enumerate(SCENARIO[1:], 1):
        parts.append(entry.around.format(pair=pair(first, entry, separator, k)))
        results += entry.results + first.results
    return "\n".join(parts), results
