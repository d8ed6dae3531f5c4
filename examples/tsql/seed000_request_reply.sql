-- A request and its reply between seed 000's services.
DECLARE @InitDlgHandle UNIQUEIDENTIFIER, @RecvHandle UNIQUEIDENTIFIER,
        @RequestMsg XML, @ReplyMsg XML, @MsgType SYSNAME;
BEGIN TRANSACTION;
BEGIN DIALOG @InitDlgHandle
    FROM SERVICE InitiatorService
    TO SERVICE N'TargetService'
    ON CONTRACT SimpleContract
    WITH ENCRYPTION = OFF;
SELECT @RequestMsg = N'<RequestMsg>Message for Target service.</RequestMsg>';
SEND ON CONVERSATION @InitDlgHandle MESSAGE TYPE RequestMessage (@RequestMsg);
COMMIT TRANSACTION;
GO
-- the target answers
DECLARE @RecvHandle UNIQUEIDENTIFIER, @RequestMsg NVARCHAR(100), @MsgType SYSNAME;
BEGIN TRANSACTION;
WAITFOR (RECEIVE TOP(1) @RecvHandle = conversation_handle,
                        @RequestMsg = CAST(message_body AS NVARCHAR(100)),
                        @MsgType = message_type_name
         FROM TargetQueue), TIMEOUT 5000;
IF @MsgType = N'RequestMessage'
BEGIN
    SEND ON CONVERSATION @RecvHandle MESSAGE TYPE ReplyMessage
        (N'<ReplyMsg>Message for Initiator service.</ReplyMsg>');
    -- each endpoint's priority, chosen when it was created
    SELECT service_name, far_service, priority FROM sys.conversation_endpoints
    ORDER BY service_name;
    END CONVERSATION @RecvHandle;
END
SELECT @RequestMsg AS request;
COMMIT TRANSACTION;
GO
-- the initiator reads the reply and ends its side
DECLARE @RecvHandle UNIQUEIDENTIFIER, @ReplyMsg NVARCHAR(100);
BEGIN TRANSACTION;
WAITFOR (RECEIVE TOP(1) @RecvHandle = conversation_handle,
                        @ReplyMsg = CAST(message_body AS NVARCHAR(100))
         FROM InitiatorQueue), TIMEOUT 5000;
END CONVERSATION @RecvHandle;
SELECT @ReplyMsg AS reply;
COMMIT TRANSACTION;
GO
