-- Lesson 2: send a request; the activated procedure answers; wait for its reply.
DECLARE @InitDlgHandle UNIQUEIDENTIFIER;
DECLARE @RequestMsg NVARCHAR(200);

BEGIN TRANSACTION;
BEGIN DIALOG @InitDlgHandle
     FROM SERVICE [//Bookshop/Stock/InitiatorService]
     TO SERVICE N'//Bookshop/Stock/TargetService'
     ON CONTRACT [//Bookshop/Stock/CheckContract]
     WITH ENCRYPTION = OFF;

SELECT @RequestMsg = N'<CheckRequest><Title>Emma</Title></CheckRequest>';

SEND ON CONVERSATION @InitDlgHandle
     MESSAGE TYPE [//Bookshop/Stock/CheckRequest] (@RequestMsg);
COMMIT TRANSACTION;
GO
DECLARE @RecvReplyMsg NVARCHAR(200);
DECLARE @RecvReplyDlgHandle UNIQUEIDENTIFIER;

BEGIN TRANSACTION;
WAITFOR
( RECEIVE TOP(1)
    @RecvReplyDlgHandle = conversation_handle,
    @RecvReplyMsg = message_body
  FROM StockInitiatorQueue
), TIMEOUT 30000;

END CONVERSATION @RecvReplyDlgHandle;
COMMIT TRANSACTION;

SELECT @RecvReplyMsg AS ReceivedReplyMsg;
SELECT COUNT(*) AS checks FROM StockChecks WHERE checked_by <> @@SPID;
