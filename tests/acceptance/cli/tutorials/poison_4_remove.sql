-- Lesson 4: an administrator looks at the message, then takes it out of the queue and ends
-- its conversation with an error, so that the shop hears of it.
ALTER QUEUE OrderQueue WITH STATUS = ON
GO
DECLARE @h UNIQUEIDENTIFIER, @body NVARCHAR(100)
SELECT TOP (1) @h = conversation_handle FROM OrderQueue ORDER BY queuing_order

BEGIN TRANSACTION
RECEIVE TOP(1) @body = message_body FROM OrderQueue WHERE conversation_handle = @h
PRINT 'removing ' + @body
END CONVERSATION @h WITH ERROR = 127 DESCRIPTION = N'Unable to process the order.'
COMMIT TRANSACTION
GO
SELECT is_receive_enabled FROM sys.service_queues WHERE name = 'OrderQueue'
SELECT COUNT(*) AS waiting FROM OrderQueue
SELECT message_type_name FROM ShopQueue ORDER BY queuing_order
