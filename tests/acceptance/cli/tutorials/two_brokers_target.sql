-- Two brokers, the target's database: its service, its endpoint, a route back to the
-- initiator, and the procedure that answers (started by activation).
-- sqlcmd variables: $(TargetPort), $(InitiatorPort). The brokers authenticate each other
-- with the shared secret in SBROKER_ENDPOINT_SECRET (sbroker's stand-in for certificates).
CREATE MESSAGE TYPE [//Bookshop/Remote/PriceRequest] VALIDATION = WELL_FORMED_XML
CREATE MESSAGE TYPE [//Bookshop/Remote/PriceReply] VALIDATION = WELL_FORMED_XML
CREATE CONTRACT [//Bookshop/Remote/PriceContract]
    ([//Bookshop/Remote/PriceRequest] SENT BY INITIATOR,
     [//Bookshop/Remote/PriceReply] SENT BY TARGET)
CREATE QUEUE PriceTargetQueue
CREATE SERVICE [//Bookshop/Remote/TargetService]
    ON QUEUE PriceTargetQueue ([//Bookshop/Remote/PriceContract])
GO
IF NOT EXISTS (SELECT * FROM sys.service_broker_endpoints)
    CREATE ENDPOINT PriceTargetEndpoint
        STATE = STARTED
        AS TCP (LISTENER_PORT = $(TargetPort), LISTENER_IP = (127.0.0.1))
        FOR SERVICE_BROKER (AUTHENTICATION = CERTIFICATE TargetCertificate,
                            ENCRYPTION = REQUIRED)
GO
CREATE ROUTE InitiatorRoute
    WITH SERVICE_NAME = N'//Bookshop/Remote/InitiatorService',
         ADDRESS = N'TCP://127.0.0.1:$(InitiatorPort)'
GO
CREATE PROCEDURE PriceActivProc
AS
BEGIN
    DECLARE @h UNIQUEIDENTIFIER, @body NVARCHAR(200), @type SYSNAME
    WHILE 1 = 1
    BEGIN
        BEGIN TRANSACTION
        WAITFOR (RECEIVE TOP(1) @h = conversation_handle, @body = message_body,
                 @type = message_type_name FROM PriceTargetQueue), TIMEOUT 5000
        IF @@ROWCOUNT = 0
        BEGIN
            ROLLBACK TRANSACTION
            BREAK
        END
        IF @type = N'//Bookshop/Remote/PriceRequest'
            SEND ON CONVERSATION @h MESSAGE TYPE [//Bookshop/Remote/PriceReply]
                (N'<PriceReply><Price>12.50</Price></PriceReply>')
        ELSE IF @type IN (N'http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog',
                          N'http://schemas.microsoft.com/SQL/ServiceBroker/Error')
            END CONVERSATION @h
        COMMIT TRANSACTION
    END
END
GO
ALTER QUEUE PriceTargetQueue WITH ACTIVATION (STATUS = ON, PROCEDURE_NAME = PriceActivProc,
                                              MAX_QUEUE_READERS = 2, EXECUTE AS OWNER)
