-- sb_lock_next (0004) read sb_held_groups (pg_locks) as soon as its first candidate group
-- was held by another transaction, then walked the queue again without the held groups.
-- With several readers on one queue that is nearly every RECEIVE, and reading pg_locks is
-- the dearest thing it does: 260 us with 15 groups held, where a RECEIVE with none held
-- costs 60 (tests of bench.multihost's shape: 100 conversations, the oldest 15 held).
-- Now a held group is skipped (with the rest of its rows) and the walk goes on; pg_locks is
-- read only once the walk has passed 64 rows of held groups (a long held conversation at the
-- head of the queue), and the second pass leaves those groups out in the index scan as
-- before. It keeps 0007's setting (no sorts: the walk follows sb_messages_ready).
CREATE OR REPLACE FUNCTION sb_lock_next(p_queue integer, p_received bigint[]) RETURNS text
LANGUAGE plpgsql SET enable_sort = off AS $$
DECLARE
    g text;
    k integer;
    held integer[] := '{}';
    tried text[] := '{}';
    busy text[] := '{}';
    skipped integer := 0;
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
            IF pass = 1 THEN
                IF g = ANY (busy) THEN
                    skipped := skipped + 1;
                    CONTINUE WHEN skipped < 64;
                END IF;
                IF skipped >= 64 THEN
                    held := ARRAY(SELECT h.key FROM sb_held_groups h
                                  WHERE h.pid <> pg_backend_pid());
                    blocked := true;
                    EXIT;
                END IF;
            END IF;
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
                busy := busy || g;
                skipped := skipped + 1;
            ELSE
                tried := tried || g;
            END IF;
        END LOOP;
        EXIT WHEN NOT blocked;
    END LOOP;
    RETURN NULL;
END $$;
