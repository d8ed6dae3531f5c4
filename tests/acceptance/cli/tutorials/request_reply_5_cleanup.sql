-- Lesson 5: drop what the lessons made, whatever is left of it.
IF EXISTS (SELECT * FROM sys.services WHERE name = N'//Bookshop/Orders/TargetService')
    DROP SERVICE [//Bookshop/Orders/TargetService]
IF EXISTS (SELECT * FROM sys.service_queues WHERE name = N'OrderTargetQueue')
    DROP QUEUE dbo.OrderTargetQueue
IF EXISTS (SELECT * FROM sys.services WHERE name = N'//Bookshop/Orders/InitiatorService')
    DROP SERVICE [//Bookshop/Orders/InitiatorService]
IF EXISTS (SELECT * FROM sys.service_queues WHERE name = N'OrderInitiatorQueue')
    DROP QUEUE dbo.OrderInitiatorQueue
IF EXISTS (SELECT * FROM sys.service_contracts WHERE name = N'//Bookshop/Orders/OrderContract')
    DROP CONTRACT [//Bookshop/Orders/OrderContract]
IF EXISTS (SELECT * FROM sys.service_message_types
           WHERE name = N'//Bookshop/Orders/OrderRequest')
    DROP MESSAGE TYPE [//Bookshop/Orders/OrderRequest]
IF EXISTS (SELECT * FROM sys.service_message_types
           WHERE name = N'//Bookshop/Orders/OrderReply')
    DROP MESSAGE TYPE [//Bookshop/Orders/OrderReply]
GO
SELECT COUNT(*) AS left_over FROM sys.service_queues WHERE name LIKE 'Order%'
