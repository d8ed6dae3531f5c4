-- queue_look (the activation monitor's look at a queue) read the rows in its statement's
-- snapshot and pg_locks live, later in the same statement. A RECEIVE committing in between
-- left its rows in the snapshot and its group lock already gone: the look called them ready
-- in a free group, and an external monitor sent a QUEUE_ACTIVATION for a queue just
-- drained (5 looks in 2,061 raced so; tests/conformance/activation flaked on it). Here the
-- held groups are read first, the rows after, in a statement of their own (0002 says why
-- that sees every commit whose lock was gone): a group still held is excluded, and a group
-- given up since was given up by a commit that the rows' snapshot includes.
CREATE FUNCTION sb_queue_look(p_queue integer, p_pending text[])
RETURNS TABLE(ready boolean, available boolean)
LANGUAGE plpgsql VOLATILE AS $$
DECLARE
    held integer[] := ARRAY(SELECT key FROM sb_held_groups);
BEGIN
    RETURN QUERY SELECT
        EXISTS (SELECT 1 FROM sb_messages m WHERE m.queue_id = p_queue AND m.status = 1),
        EXISTS (SELECT 1 FROM sb_messages m WHERE m.queue_id = p_queue AND m.status = 1
            AND sb_key(m.group_id) <> ALL (held) AND m.group_id <> ALL (p_pending));
END $$;
