-- Internal activation, lesson 1: the objects, and the procedure that activation starts.
CREATE MESSAGE TYPE [//Bookshop/Stock/CheckRequest] VALIDATION = WELL_FORMED_XML;
CREATE MESSAGE TYPE [//Bookshop/Stock/CheckReply] VALIDATION = WELL_FORMED_XML;
GO
CREATE CONTRACT [//Bookshop/Stock/CheckContract]
    ([//Bookshop/Stock/CheckRequest] SENT BY INITIATOR,
     [//Bookshop/Stock/CheckReply] SENT BY TARGET);
GO
CREATE QUEUE StockTargetQueue;
CREATE SERVICE [//Bookshop/Stock/TargetService]
    ON QUEUE StockTargetQueue ([//Bookshop/Stock/CheckContract]);
CREATE QUEUE StockInitiatorQueue;
CREATE SERVICE [//Bookshop/Stock/InitiatorService] ON QUEUE StockInitiatorQueue;
GO
CREATE TABLE StockChecks (checked_by INT, title NVARCHAR(50), checked_at DATETIME2);
GO
CREATE PROCEDURE StockActivProc
AS
  DECLARE @RecvReqDlgHandle UNIQUEIDENTIFIER;
  DECLARE @RecvReqMsg NVARCHAR(200);
  DECLARE @RecvReqMsgName SYSNAME;

  WHILE (1=1)
  BEGIN
    BEGIN TRANSACTION;

    WAITFOR
    ( RECEIVE TOP(1)
        @RecvReqDlgHandle = conversation_handle,
        @RecvReqMsg = message_body,
        @RecvReqMsgName = message_type_name
      FROM StockTargetQueue
    ), TIMEOUT 5000;

    IF (@@ROWCOUNT = 0)
    BEGIN
      ROLLBACK TRANSACTION;
      BREAK;
    END

    IF @RecvReqMsgName = N'//Bookshop/Stock/CheckRequest'
    BEGIN
       DECLARE @ReplyMsg NVARCHAR(200);
       DECLARE @title NVARCHAR(50) =
           CAST(@RecvReqMsg AS XML).value('(/CheckRequest/Title)[1]', 'nvarchar(50)');
       INSERT INTO StockChecks VALUES (@@SPID, @title, SYSDATETIME());
       SELECT @ReplyMsg = N'<CheckReply><Title>' + @title + N'</Title><InStock>3</InStock></CheckReply>';

       SEND ON CONVERSATION @RecvReqDlgHandle
              MESSAGE TYPE [//Bookshop/Stock/CheckReply] (@ReplyMsg);
    END
    ELSE IF @RecvReqMsgName = N'http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog'
    BEGIN
       END CONVERSATION @RecvReqDlgHandle;
    END
    ELSE IF @RecvReqMsgName = N'http://schemas.microsoft.com/SQL/ServiceBroker/Error'
    BEGIN
       END CONVERSATION @RecvReqDlgHandle;
    END

    COMMIT TRANSACTION;
  END
GO
ALTER QUEUE StockTargetQueue
    WITH ACTIVATION
    ( STATUS = ON,
      PROCEDURE_NAME = StockActivProc,
      MAX_QUEUE_READERS = 10,
      EXECUTE AS SELF );
GO
SELECT name, is_activation_enabled, max_queue_readers
FROM sys.service_queues WHERE name = 'StockTargetQueue';
