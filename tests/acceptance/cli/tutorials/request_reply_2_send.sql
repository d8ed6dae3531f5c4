-- Lesson 2: the initiator begins a conversation and sends its request.
DECLARE @InitDlgHandle UNIQUEIDENTIFIER
DECLARE @RequestMsg NVARCHAR(100)

BEGIN TRANSACTION
BEGIN DIALOG @InitDlgHandle
    FROM SERVICE [//Bookshop/Orders/InitiatorService]
    TO SERVICE N'//Bookshop/Orders/TargetService'
    ON CONTRACT [//Bookshop/Orders/OrderContract]
    WITH ENCRYPTION = OFF

SELECT @RequestMsg = N'<OrderRequest><Title>Dune</Title><Copies>2</Copies></OrderRequest>'

SEND ON CONVERSATION @InitDlgHandle
    MESSAGE TYPE [//Bookshop/Orders/OrderRequest] (@RequestMsg)
COMMIT TRANSACTION

SELECT @RequestMsg AS SentRequestMsg
GO
-- the request waits in the target's queue: look at it without taking it
SELECT COUNT(*) AS waiting FROM dbo.OrderTargetQueue WITH (NOLOCK)
SELECT message_type_name, CAST(message_body AS XML) AS body
FROM dbo.OrderTargetQueue
