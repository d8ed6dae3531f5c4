-- Received messages spread thin over the queue are not deleted by the RECEIVE's commit:
-- their queuing_order goes into sb_consumed, and a later sweep deletes them in bulk
-- (consumed.py).  A message in sb_consumed is gone for every reader.  Any delete of a message
-- drops its sb_consumed row in the same transaction, so a reused queuing_order never inherits
-- the mark.
CREATE TABLE sb_consumed (queuing_order INTEGER PRIMARY KEY);
CREATE TRIGGER sb_messages_consumed_gone AFTER DELETE ON sb_messages
BEGIN
    DELETE FROM sb_consumed WHERE queuing_order = old.queuing_order;
END;
