-- The objects seed 000 (docs/tsql.md) describes around its two CREATE BROKER
-- PRIORITY scripts: message types, SimpleContract, the initiator's and the target's queue and
-- service. On sbroker both "databases" are the one broker database.
CREATE MESSAGE TYPE RequestMessage VALIDATION = WELL_FORMED_XML;
CREATE MESSAGE TYPE ReplyMessage VALIDATION = WELL_FORMED_XML;
CREATE CONTRACT SimpleContract
    (RequestMessage SENT BY INITIATOR,
     ReplyMessage SENT BY TARGET);
CREATE QUEUE InitiatorQueue;
CREATE SERVICE InitiatorService ON QUEUE InitiatorQueue;
-- the seed's initiator priority names "InitiatorSerivce": a service must exist by that name
-- (as in SQL Server); it is not the one the dialog starts from.
CREATE SERVICE InitiatorSerivce ON QUEUE InitiatorQueue;
CREATE QUEUE TargetQueue;
CREATE SERVICE TargetService ON QUEUE TargetQueue (SimpleContract);
GO
