"""The procedural T-SQL of docs/tsql.md on a broker: variables, control flow, errors and
TRY/CATCH, transactions, procedures, dynamic SQL, plain SQL on the user's tables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

import sbroker
from sbroker.apps.tsql import TSqlError

Run = Callable[..., list[list[dict[str, Any]]]]


def test_variables_set_and_select_assignment(tsql: Run) -> None:
    [rows] = tsql("""
        declare @x int = 1, @s nvarchar(5)
        set @x += 41
        select @s = 'abcdefgh'
        select @x as answer, @s as s, @x / 5 as q, @x % 5 as r
    """)
    assert rows == [{"answer": 42, "s": "abcde", "q": 8, "r": 2}]


def test_if_else_while_break_continue(tsql: Run) -> None:
    [rows] = tsql("""
        declare @i int = 0, @sum int = 0
        while 1 = 1
        begin
            set @i = @i + 1
            if @i > 10 break
            if @i % 2 = 0 continue
            set @sum = @sum + @i
        end
        if @sum = 25 select 'odd' as kind, @sum as total else select 'wrong' as kind, 0 as total
    """)
    assert rows == [{"kind": "odd", "total": 25}]


def test_try_catch_sees_the_error_number_message_and_severity(tsql: Run) -> None:
    [rows] = tsql("""
        begin try
            raiserror('bad %s number %d', 16, 3, 'thing', 7)
        end try
        begin catch
            select error_number() as n, error_message() as m, error_severity() as s,
                   error_state() as st
        end catch
    """)
    assert rows == [{"n": 50000, "m": "bad thing number 7", "s": 16, "st": 3}]


def test_throw_and_rethrow(tsql: Run) -> None:
    with pytest.raises(TSqlError) as caught:
        tsql("""
            begin try
                throw 51000, 'first', 2;
            end try
            begin catch
                throw;
            end catch
        """)
    assert (caught.value.number, caught.value.message, caught.value.state) == (51000, "first", 2)


def test_print_and_low_severity_raiserror_go_to_the_output(tsql: Run) -> None:
    lines: list[str] = []
    assert tsql("print 'one' raiserror('two %d', 10, 1, 2) print 1 + 2", out=lines.append) == []
    assert lines == ["one", "two 2", "3"]


def test_an_error_names_batch_line_and_column(tsql: Run) -> None:
    with pytest.raises(TSqlError) as caught:
        tsql("select 1 as a\ngo\n\n  select 1/0")
    error = caught.value
    assert (error.number, error.batch, error.line, error.column) == (8134, 2, 4, 3)
    assert "batch 2, line 4, column 3" in str(error)


def test_a_syntax_error_runs_nothing_of_its_batch(tsql: Run) -> None:
    tsql("create table Marks (n int)")
    with pytest.raises(TSqlError) as caught:
        tsql("insert into Marks values (1)\nif (1 = 1 select 2")
    assert caught.value.number == 102 and caught.value.line == 2
    assert tsql("select count(*) as n from Marks") == [[{"n": 0}]]


def test_unsupported_syntax_is_an_error_that_names_it(tsql: Run) -> None:
    with pytest.raises(TSqlError, match="cursor variables is not supported"):
        tsql("declare @c cursor")
    with pytest.raises(TSqlError, match="GOTO is not supported"):
        tsql("goto somewhere")


@pytest.mark.parametrize("text", [
    "exec xp_cmdshell 'dir'",
    "select * from openrowset('SQLNCLI', 'x', 'select 1')",
    "bulk insert T from 'c:\\data.txt'",
    "exec ('select 1') at OtherServer",
    "exec OtherServer.db.dbo.proc",
])
def test_what_reaches_outside_the_database_is_refused(tsql: Run, text: str) -> None:
    with pytest.raises(TSqlError, match="refused") as caught:
        tsql(text)
    assert caught.value.number == 15281


def test_plain_sql_identity_scope_identity_rowcount_and_defaults(tsql: Run) -> None:
    [rows, counted] = tsql("""
        create table People (id int identity(1,1) primary key, name nvarchar(50) not null,
                             added datetime2(7) default(sysdatetime()), tag uniqueidentifier)
        insert into People(name, tag) values (N'ann', newid()), (N'bob', newid())
        declare @last int = scope_identity(), @n int = @@rowcount
        select @last as last, @n as n
        update People set name = name + '!' where id <= @last
        select @@rowcount as updated, count(*) as people,
               sum(case when added is not null then 1 else 0 end) as dated
        from People with (nolock)
    """)
    assert rows == [{"last": 2, "n": 2}]
    assert counted == [{"updated": 2, "people": 2, "dated": 2}]


def test_explicit_transactions_commit_and_roll_back(tsql: Run) -> None:
    tsql("create table Items (n int)")
    tsql("begin tran insert into Items values (1) commit")
    tsql("begin transaction insert into Items values (2) rollback transaction")
    assert tsql("select n, @@trancount as tc from Items") == [[{"n": 1, "tc": 0}]]
    with pytest.raises(TSqlError) as caught:
        tsql("commit")
    assert caught.value.number == 3902


def test_procedures_with_output_defaults_and_return(tsql: Run) -> None:
    tsql("""
        create procedure AddUp @a int, @b int = 10, @sum int output
        as
        begin
            set @sum = @a + @b
            return @sum * 2
        end
    """)
    [rows] = tsql("""
        declare @s int, @rc int, @t int
        exec @rc = AddUp 1, 2, @s output
        exec AddUp @a = 5, @sum = @t output
        select @s as s, @rc as rc, @t as t
    """)
    assert rows == [{"s": 3, "rc": 6, "t": 15}]
    with pytest.raises(TSqlError) as caught:
        tsql("exec NoSuchProcedure")
    assert caught.value.number == 2812
    tsql("drop procedure AddUp")
    with pytest.raises(TSqlError):
        tsql("exec AddUp 1")


def test_exec_of_a_string_runs_through_the_interpreter(tsql: Run) -> None:
    [rows] = tsql("""
        declare @sql nvarchar(max) = N'select 40 + 2 as v'
        exec(@sql)
    """)
    assert rows == [{"v": 42}]
    with pytest.raises(TSqlError, match="refused"):
        tsql("exec('exec xp_cmdshell ''dir''')")


def test_waitfor_delay_waits_on_the_brokers_clock(tsql: Run) -> None:
    assert tsql("waitfor delay '00:00:00.010' select 1 as done") == [[{"done": 1}]]
    with pytest.raises(TSqlError) as caught:
        tsql("waitfor delay 'soon'")
    assert caught.value.number == 148


def test_table_variables(tsql: Run) -> None:
    [rows] = tsql("""
        declare @t table (n int, name nvarchar(10))
        insert into @t values (1, 'a'), (2, 'b')
        select n, name from @t where n > 1
    """)
    assert rows == [{"n": 2, "name": "b"}]


def test_table_variables_of_a_process_that_died_are_swept(
        tsql: Run, broker: sbroker.Broker, database: str) -> None:
    def tables() -> set[str]:
        [rows] = tsql("select name from tables_seen")
        return {str(r["name"]) for r in rows}

    other = sbroker.Broker.open(database)  # a process that will die with a table variable
    mine = f"tsql_tv_{broker.session_id * 100000 + 50001}_7"
    theirs = f"tsql_tv_{other.session_id * 100000 + 50001}_7"
    for owner, table in ((broker, mine), (other, theirs)):
        with owner.transaction() as tx:
            tx.execute(f"CREATE TABLE {table} (n int)", ())
    other.close()  # its session is gone as a killed one is once reaped; its table stays
    tsql("create table tables_seen (name nvarchar(100))")
    for table in (mine, theirs):
        tsql(f"if object_id('{table}') is not null insert into tables_seen values ('{table}')")
    assert tables() == {mine}  # the dead session's table went when a session started


def test_plus_of_two_text_columns_concatenates(tsql: Run) -> None:
    [rows] = tsql("""
        create table People (id int, first nvarchar(20), last varchar(max), age int)
        insert into People values (1, 'Ada', 'Lovelace', 36)
        declare @t table (id int, title nvarchar(10))
        insert into @t values (1, 'Countess')
        select t.title + ' ' + p.first + ' ' + p.last as name, p.age + p.id as n,
               first + last as joined
        from People p join @t t on t.id = p.id
    """)
    assert rows == [{"name": "Countess Ada Lovelace", "n": 37, "joined": "AdaLovelace"}]


def test_xml_as_the_seeds_use_it(tsql: Run) -> None:
    [rows] = tsql("""
        declare @m xml, @id int = 7, @sql nvarchar(max) = 'waitfor delay ''0:0:1'''
        select @m = (select @id as [@LogID], @sql as [@SQL] for xml path('Command'))
        select @m as m, @m.value('(/Command/@LogID)[1]', 'int') as id,
               @m.value('(/Command/@SQL)[1]', 'nvarchar(max)') as sql
    """)
    assert rows == [{"m": "<Command LogID=\"7\" SQL=\"waitfor delay '0:0:1'\"/>", "id": 7,
                     "sql": "waitfor delay '0:0:1'"}]


def test_scripts_that_check_before_they_create_run_twice(tsql: Run) -> None:
    script = """
        if object_id('dbo.Things') is not null drop table dbo.Things
        if object_id('MakeThing', 'P') is not null drop procedure MakeThing
        create table dbo.Things (n int)
        go
        create procedure MakeThing @n int as insert into Things values (@n)
        go
        if not exists (select * from sys.service_queues where name = 'ThingQueue')
            create queue ThingQueue
        exec MakeThing 5
        declare @known int = object_id('Things'), @unknown int = object_id('Nothing')
        select n, case when @known > 0 then 1 else 0 end as known, @unknown as unknown
        from Things
    """
    assert tsql(script) == [[{"n": 5, "known": 1, "unknown": None}]]
    assert tsql(script) == [[{"n": 5, "known": 1, "unknown": None}]]
    with pytest.raises(TSqlError) as caught:  # a function the backend lacks, in plain SQL
        tsql("select object_id('Things') as id from Things")
    assert caught.value.number == 195
