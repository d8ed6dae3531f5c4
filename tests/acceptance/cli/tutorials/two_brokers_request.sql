-- Two brokers: the initiator asks, the target's activated procedure answers over TCP.
DECLARE @h UNIQUEIDENTIFIER, @reply NVARCHAR(200), @type SYSNAME

BEGIN DIALOG CONVERSATION @h
    FROM SERVICE [//Bookshop/Remote/InitiatorService]
    TO SERVICE N'//Bookshop/Remote/TargetService'
    ON CONTRACT [//Bookshop/Remote/PriceContract]

SEND ON CONVERSATION @h MESSAGE TYPE [//Bookshop/Remote/PriceRequest]
    (N'<PriceRequest><Title>Persuasion</Title></PriceRequest>')

WAITFOR (RECEIVE TOP(1) @reply = message_body, @type = message_type_name
         FROM PriceInitiatorQueue WHERE conversation_handle = @h), TIMEOUT 60000

END CONVERSATION @h
SELECT @type AS reply_type, @reply AS reply
