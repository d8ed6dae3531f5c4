-- Lesson 4: the initiator receives the reply and ends its side of the conversation.
DECLARE @RecvReplyMsg NVARCHAR(100)
DECLARE @RecvReplyDlgHandle UNIQUEIDENTIFIER

BEGIN TRANSACTION
WAITFOR
( RECEIVE TOP(1)
    @RecvReplyDlgHandle = conversation_handle,
    @RecvReplyMsg = message_body
  FROM dbo.OrderInitiatorQueue
), TIMEOUT 1000

END CONVERSATION @RecvReplyDlgHandle
COMMIT TRANSACTION

SELECT @RecvReplyMsg AS ReceivedReplyMsg
GO
-- the target's EndDialog reached the initiator before the reply was read; once both
-- sides ended, no endpoint of the conversation is left open
SELECT COUNT(*) AS open_endpoints FROM sys.conversation_endpoints
WHERE state_desc NOT IN ('CLOSED')
