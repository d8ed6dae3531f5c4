-- Seed 004's poison-message detection (docs/poison.md) with its elided parts
-- written out: the incident table, the message procedures, and the queue procedure as the
-- seed gives it. "receive message" is a RECEIVE of one message into variables; the seed's
-- "having count > @threshold" is HAVING COUNT(*) > @threshold.
create message type Work validation = none
create contract WorkContract (Work sent by initiator)
create queue WorkQueue with poison_message_handling (status = on)
create queue SenderQueue
create service WorkService on queue WorkQueue (WorkContract)
create service SenderService on queue SenderQueue
go
create table dbo.poison_message_details (incident_id int primary key identity,
    conversation_handle uniqueidentifier, message_type_name sysname,
    recorded datetime2 default (sysdatetime()))
create index ix_poison_message_details on dbo.poison_message_details(conversation_handle);
create table dbo.processed (body nvarchar(100))
create table dbo.dead_letters (conversation_handle uniqueidentifier, body nvarchar(100))
go
create procedure dbo.process_message @body nvarchar(100)
as
begin
    insert into dbo.processed values (@body)
    if @body = N'poison'
        raiserror('cannot process %s', 16, 1, @body)
end
go
create procedure dbo.process_poison_message @conversation_handle uniqueidentifier,
    @body nvarchar(100)
as
begin
    insert into dbo.dead_letters values (@conversation_handle, @body)
    end conversation @conversation_handle with error = 50001
        description = 'poison message taken out of the queue'
end
go
create procedure dbo.process_queue @threshold int = 3
as
begin
    declare @conversation_handle uniqueidentifier, @message_type_name sysname,
            @body nvarchar(100)
    set xact_abort Off;

    begin try
    -- начинаем транзакцию
    begin transaction;

    -- читаем очередное сообщение
    receive top (1) @conversation_handle = conversation_handle,
        @message_type_name = message_type_name,
        @body = cast(message_body as nvarchar(100))
    from WorkQueue;

    -- если сообщения в очереди
    -- отсутствуют - завершаем работу

    if @@rowcount = 0 begin
    rollback transaction; return;
    end;

    -- проверяем, что текущее сообщение - отравленное
    if exists(select count(*)
    from dbo.poison_message_details
    where conversation_handle = @conversation_handle
    having count(*) > @threshold) begin
    -- обрабатываем отравленное сообщение
    exec dbo.process_poison_message @conversation_handle, @body;
    commit transaction; return;
    end;

    -- обычная обработка сообщений
    if @message_type_name = 'Work' begin
    exec dbo.process_message @body;
    commit transaction; return;
    end;

    end try
    begin catch

    -- отменяем текущую транзакцию,
    -- если она не была отменена ранее

    if @@trancount > 0 rollback transaction;
    -- сохраняем информацию о факте
    -- обнаружения отравленного сообщения

    insert dbo.poison_message_details(
    conversation_handle, message_type_name)
    values (@conversation_handle, @message_type_name);

    end catch;
    return;
end
go
