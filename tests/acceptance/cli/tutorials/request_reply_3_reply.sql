-- Lesson 3: the target receives the request and sends its reply.
DECLARE @RecvReqDlgHandle UNIQUEIDENTIFIER
DECLARE @RecvReqMsg NVARCHAR(100)
DECLARE @RecvReqMsgName SYSNAME

BEGIN TRANSACTION
WAITFOR
( RECEIVE TOP(1)
    @RecvReqDlgHandle = conversation_handle,
    @RecvReqMsg = message_body,
    @RecvReqMsgName = message_type_name
  FROM dbo.OrderTargetQueue
), TIMEOUT 1000

SELECT @RecvReqMsg AS ReceivedRequestMsg

IF @RecvReqMsgName = N'//Bookshop/Orders/OrderRequest'
BEGIN
    DECLARE @ReplyMsg NVARCHAR(100)
    DECLARE @x XML = CAST(@RecvReqMsg AS XML)
    SELECT @ReplyMsg = N'<OrderReply><Title>' + @x.value('(/OrderRequest/Title)[1]', 'nvarchar(50)')
        + N'</Title><Status>reserved</Status></OrderReply>'
    SEND ON CONVERSATION @RecvReqDlgHandle
        MESSAGE TYPE [//Bookshop/Orders/OrderReply] (@ReplyMsg)
    END CONVERSATION @RecvReqDlgHandle
END

SELECT @ReplyMsg AS SentReplyMsg
COMMIT TRANSACTION
