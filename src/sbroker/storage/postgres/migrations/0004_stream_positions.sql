-- Spark streams on PostgreSQL (engine/streams.py, docs/stream.md): positions handed out in
-- the order rows become visible, and RECEIVE refused on a queue a live stream reads.
--
-- A stream plans ranges of positions (after, end].  On SQLite queuing_order is such a
-- position: it is given under the single writer, so rows become visible in its order.  Here
-- an IDENTITY value is taken at INSERT, not at COMMIT: a transaction holding position 10 may
-- commit after one that holds 11, after a stream planned through 11, and row 10 would be
-- skipped for ever.  So a stream numbers rows itself: stream_pos is given by the stream's
-- reader (sb_stream_number, under its claim, one numbering at a time per queue) to the ready
-- rows that are committed and have none, in queuing order, above every number it gave
-- before.  A row that commits later gets a later number, after every range planned so far.

ALTER TABLE sb_messages ADD COLUMN stream_pos bigint;

-- The rows a stream has yet to number, and one priority level's numbered rows in order
-- (a stream reads level by level, as sb_messages_ready serves RECEIVE).
CREATE INDEX sb_messages_unnumbered ON sb_messages(queue_id, queuing_order)
    WHERE stream_pos IS NULL AND status = 1;
CREATE INDEX sb_messages_stream ON sb_messages(queue_id, priority, stream_pos)
    WHERE stream_pos IS NOT NULL;

-- The highest number given in the queue: numbers never come back, whichever rows leave.
ALTER TABLE sb_stream_sources ADD COLUMN numbered bigint NOT NULL DEFAULT 0;

-- Number the queue's committed ready rows that have no stream position yet, the first
-- ``p_limit`` of them in queuing order (a backlog is numbered a batch at a time, so no one
-- statement rewrites a whole queue), for the reader holding the claim (``p_token``): how
-- many, or NULL if it does not hold it.  The source's row is locked first, so numberings of
-- one queue never overlap; the rows are read after, in a statement of its own (READ
-- COMMITTED: it sees every row committed before it).
CREATE FUNCTION sb_stream_number(p_queue integer, p_token text, p_limit bigint)
RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    last bigint;
    found_rows bigint;
BEGIN
    SELECT s.numbered INTO last FROM sb_stream_sources s
    WHERE s.queue_id = p_queue AND s.claim_token = p_token AND s.session_id IS NOT NULL
    FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    WITH todo AS (
        SELECT f.queuing_order, row_number() OVER (ORDER BY f.queuing_order) AS n
        FROM (SELECT u.queuing_order FROM sb_messages u
              WHERE u.queue_id = p_queue AND u.status = 1 AND u.stream_pos IS NULL
              ORDER BY u.queuing_order LIMIT p_limit) f
    ), numbered AS (
        UPDATE sb_messages m SET stream_pos = last + todo.n FROM todo
        WHERE m.queuing_order = todo.queuing_order AND m.stream_pos IS NULL
        RETURNING 1
    )
    SELECT count(*) INTO found_rows FROM todo;
    IF found_rows > 0 THEN
        UPDATE sb_stream_sources SET numbered = last + found_rows WHERE queue_id = p_queue;
    END IF;
    RETURN found_rows;
END $$;

-- Whether a live stream reads the queue.
CREATE FUNCTION sb_streamed(p_queue integer) RETURNS boolean
    LANGUAGE sql STABLE AS
    'SELECT EXISTS (SELECT 1 FROM sb_stream_sources s WHERE s.queue_id = p_queue
                    AND s.session_id IS NOT NULL)';

-- sb_lock_next of 0002, which also gives no group of a queue a live stream reads.  The
-- claim is looked at after the group's lock is granted, in a statement of its own: a claim
-- committed before that look is seen; one committed after it finds the lock in pg_locks
-- (streams.py looks after committing its claim) and gives the queue back.
CREATE OR REPLACE FUNCTION sb_lock_next(p_queue integer, p_received bigint[]) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    g text;
    k integer;
    held integer[] := '{}';
    tried text[] := '{}';
    pass integer;
    blocked boolean := false;
    ready boolean;
BEGIN
    FOR pass IN 1..2 LOOP
        FOR g IN SELECT c.group_id FROM sb_messages c
                 WHERE c.queue_id = p_queue AND c.status = 1
                     AND c.queuing_order <> ALL (p_received)
                     AND sb_key(c.group_id) <> ALL (held)
                 ORDER BY c.priority DESC, c.queuing_order LOOP
            CONTINUE WHEN g = ANY (tried);
            k := sb_key(g);
            IF pg_try_advisory_lock(1396834305, k) THEN
                PERFORM 1 FROM sb_messages m WHERE m.group_id = g AND m.status = 1
                    AND m.queuing_order <> ALL (p_received) LIMIT 1;
                ready := FOUND;
                IF ready AND sb_streamed(p_queue) THEN
                    PERFORM pg_advisory_unlock(1396834305, k);
                    RETURN NULL;  -- the caller says why (sb_take, stream_holder)
                END IF;
                IF ready THEN
                    PERFORM pg_advisory_xact_lock(1396834305, k);
                    PERFORM pg_advisory_unlock(1396834305, k);
                    RETURN g;
                END IF;
                PERFORM pg_advisory_unlock(1396834305, k);
                tried := tried || g;
            ELSIF pass = 1 THEN
                held := ARRAY(SELECT h.key FROM sb_held_groups h
                              WHERE h.pid <> pg_backend_pid());
                blocked := true;
                EXIT;
            ELSE
                tried := tried || g;
            END IF;
        END LOOP;
        EXIT WHEN NOT blocked;
    END LOOP;
    RETURN NULL;
END $$;

-- sb_take of 0002; on a queue a live stream reads (``p_queue``, also given with a group) it
-- returns one row of status -1 and nothing else: locks.py raises QueueStreamedError.
CREATE OR REPLACE FUNCTION sb_take(p_queue integer, p_group text, p_handle text,
                                   p_limit bigint, p_received bigint[])
RETURNS TABLE (status integer, priority integer, queuing_order bigint, group_id text,
               handle text, msn bigint, service text, contract text, message_type text,
               validation text, body bytea, message_id text, enqueued_at double precision)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    g text := p_group;
BEGIN
    IF g IS NULL THEN
        g := sb_lock_next(p_queue, p_received);
        IF g IS NULL THEN
            IF sb_streamed(p_queue) THEN
                RETURN QUERY SELECT -1, NULL::integer, NULL::bigint, NULL::text, NULL::text,
                    NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::text, NULL::bytea,
                    NULL::text, NULL::double precision;
            END IF;
            RETURN;
        END IF;
    ELSIF NOT pg_try_advisory_xact_lock(1396834305, sb_key(g)) THEN
        RETURN;
    ELSIF p_queue IS NOT NULL AND sb_streamed(p_queue) THEN
        RETURN QUERY SELECT -1, NULL::integer, NULL::bigint, NULL::text, NULL::text,
            NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::text, NULL::bytea,
            NULL::text, NULL::double precision;
        RETURN;
    END IF;
    IF p_handle IS NULL THEN
        RETURN QUERY
            SELECT m.status, m.priority, m.queuing_order, m.group_id, m.handle, m.msn,
                m.service, m.contract, m.message_type, m.validation, m.body, m.message_id,
                m.enqueued_at
            FROM sb_messages m WHERE m.group_id = g AND m.status = 1
            ORDER BY m.priority DESC, m.conv_order, m.is_timer DESC, m.msn LIMIT p_limit;
    ELSE
        RETURN QUERY
            SELECT m.status, m.priority, m.queuing_order, m.group_id, m.handle, m.msn,
                m.service, m.contract, m.message_type, m.validation, m.body, m.message_id,
                m.enqueued_at
            FROM sb_messages m WHERE m.group_id = g AND m.status = 1 AND m.handle = p_handle
            ORDER BY m.priority DESC, m.conv_order, m.is_timer DESC, m.msn LIMIT p_limit;
    END IF;
END $$;
