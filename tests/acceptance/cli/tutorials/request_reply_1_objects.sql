-- A request/reply conversation in one database, lesson 1: the objects.
-- Written the way Service Broker tutorials are: one step per batch, no semicolons needed.
USE Bookshop
GO
CREATE MESSAGE TYPE [//Bookshop/Orders/OrderRequest] VALIDATION = WELL_FORMED_XML
CREATE MESSAGE TYPE [//Bookshop/Orders/OrderReply] VALIDATION = WELL_FORMED_XML
GO
CREATE CONTRACT [//Bookshop/Orders/OrderContract]
    ([//Bookshop/Orders/OrderRequest] SENT BY INITIATOR,
     [//Bookshop/Orders/OrderReply] SENT BY TARGET)
GO
CREATE QUEUE dbo.OrderTargetQueue
CREATE SERVICE [//Bookshop/Orders/TargetService]
    ON QUEUE dbo.OrderTargetQueue ([//Bookshop/Orders/OrderContract])
GO
CREATE QUEUE dbo.OrderInitiatorQueue
CREATE SERVICE [//Bookshop/Orders/InitiatorService] ON QUEUE dbo.OrderInitiatorQueue
GO
SELECT name FROM sys.service_queues WHERE name LIKE 'Order%' ORDER BY name
