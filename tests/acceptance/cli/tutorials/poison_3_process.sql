-- Lesson 3: process it five times. Each attempt rolls back; after the fifth, Service Broker
-- disables the queue and raises the BROKER_QUEUE_DISABLED event.
DECLARE @i INT = 0
WHILE @i < 5
BEGIN
    EXEC ProcessOrder
    SET @i += 1
END
SELECT is_receive_enabled FROM sys.service_queues WHERE name = 'OrderQueue'
GO
BEGIN TRY
    RECEIVE TOP(1) message_body FROM OrderQueue
END TRY
BEGIN CATCH
    SELECT ERROR_NUMBER() AS number
END CATCH
GO
SELECT message_type_name FROM QueueWatchQueue
