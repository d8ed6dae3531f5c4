-- sb_consume (0002) deleted the received rows with a join on jsonb_each_text(taken): inside
-- the function its plan is cached per session, and the plan PostgreSQL kept for it scanned
-- more of sb_messages than the rows it deletes (240 us per one-message RECEIVE commit on a
-- queue of 2,000, measured with track_functions). Here the rows are found by primary key
-- (queuing_order = ANY of taken's keys), whatever the table's statistics say, and each is
-- still checked against its message id. 50-60 us in the same measurement.
CREATE OR REPLACE FUNCTION sb_consume(taken jsonb, p_queue integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    gone bigint;
BEGIN
    DELETE FROM sb_messages m
    WHERE m.queuing_order = ANY (ARRAY(SELECT k::bigint FROM jsonb_object_keys(taken) k))
        AND m.message_id = taken ->> m.queuing_order::text;
    GET DIAGNOSTICS gone = ROW_COUNT;
    IF gone > 0 THEN
        INSERT INTO sb_queue_counters(queue_id, slot, received)
        VALUES (p_queue, mod(pg_backend_pid(), 16), gone)
        ON CONFLICT (queue_id, slot) DO UPDATE SET
            received = sb_queue_counters.received + excluded.received;
    END IF;
END $$;
