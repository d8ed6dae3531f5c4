-- Poison messages, lesson 1: a service whose procedure rolls back what it cannot process,
-- and a watcher told when Service Broker disables the queue.
CREATE MESSAGE TYPE OrderMessage VALIDATION = NONE
CREATE CONTRACT OrderContract (OrderMessage SENT BY INITIATOR)
CREATE QUEUE OrderQueue WITH STATUS = ON, POISON_MESSAGE_HANDLING (STATUS = ON)
CREATE SERVICE OrderService ON QUEUE OrderQueue (OrderContract)
CREATE QUEUE ShopQueue
CREATE SERVICE ShopService ON QUEUE ShopQueue
GO
CREATE QUEUE QueueWatchQueue
CREATE SERVICE QueueWatch ON QUEUE QueueWatchQueue
    ([http://schemas.microsoft.com/SQL/Notifications/PostEventNotification])
CREATE EVENT NOTIFICATION OrderQueueDisabled ON QUEUE OrderQueue
    FOR BROKER_QUEUE_DISABLED TO SERVICE 'QueueWatch', 'current database'
GO
CREATE TABLE Orders (id INT IDENTITY(1, 1) PRIMARY KEY, copies INT NOT NULL)
GO
CREATE PROCEDURE ProcessOrder
AS
BEGIN
    DECLARE @h UNIQUEIDENTIFIER, @body NVARCHAR(100)
    BEGIN TRANSACTION
    RECEIVE TOP(1) @h = conversation_handle, @body = message_body FROM OrderQueue
    IF @@ROWCOUNT = 0
    BEGIN
        ROLLBACK TRANSACTION
        RETURN
    END
    BEGIN TRY
        DECLARE @copies INT = CAST(@body AS INT)
        INSERT INTO Orders (copies) VALUES (@copies)
        COMMIT TRANSACTION
    END TRY
    BEGIN CATCH
        PRINT 'cannot process ' + @body + ': ' + ERROR_MESSAGE()
        ROLLBACK TRANSACTION  -- the message goes back to the queue
    END CATCH
END
