-- Two brokers, the initiator's database: its service, its endpoint, a route to the target.
CREATE MESSAGE TYPE [//Bookshop/Remote/PriceRequest] VALIDATION = WELL_FORMED_XML
CREATE MESSAGE TYPE [//Bookshop/Remote/PriceReply] VALIDATION = WELL_FORMED_XML
CREATE CONTRACT [//Bookshop/Remote/PriceContract]
    ([//Bookshop/Remote/PriceRequest] SENT BY INITIATOR,
     [//Bookshop/Remote/PriceReply] SENT BY TARGET)
CREATE QUEUE PriceInitiatorQueue
CREATE SERVICE [//Bookshop/Remote/InitiatorService] ON QUEUE PriceInitiatorQueue
GO
CREATE ENDPOINT PriceInitiatorEndpoint
    STATE = STARTED
    AS TCP (LISTENER_PORT = $(InitiatorPort), LISTENER_IP = (127.0.0.1))
    FOR SERVICE_BROKER (AUTHENTICATION = CERTIFICATE InitiatorCertificate)
GO
CREATE ROUTE TargetRoute
    WITH SERVICE_NAME = N'//Bookshop/Remote/TargetService',
         ADDRESS = N'TCP://127.0.0.1:$(TargetPort)'
GO
SELECT name, remote_service_name, address FROM sys.routes WHERE name = 'TargetRoute'
