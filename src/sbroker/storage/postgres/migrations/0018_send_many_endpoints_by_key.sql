-- sb_send_direct_many (0013) keeps one generic plan per session, made for a call of 100 rows.
-- Its statements joined the call's rows to sb_endpoints, and which join the planner picked
-- depended on the table's size: on a few hundred endpoints a hash join over the whole table
-- (read through its primary key, seq scans being off), three times per call. The whole
-- table was read at every commit of several SENDs, and a broker of ~2,000 endpoints paid
-- 22-44 % more server CPU per commit of 100 than one of 200 or 10,000
-- (docs/queue-storage.md). Here each row's sender and peer are found by key
-- (LATERAL ... LIMIT 1, which the planner cannot turn into a join over the table) and the
-- send_seq update finds its rows by the senders' keys, whatever the table's size. Same
-- checks, same writes, same result; the SET clauses stay (0008 says why).
CREATE OR REPLACE FUNCTION sb_send_direct_many(p_rows jsonb, p_bodies bytea,
                                               p_now double precision,
                                               p_version text)
RETURNS integer
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off SET plan_cache_mode = force_generic_plan
AS $$
DECLARE
    senders bigint[] := ARRAY(SELECT DISTINCT (j ->> 0)::bigint
                              FROM jsonb_array_elements(p_rows) j);
    ready integer;
    sent integer;
BEGIN
    PERFORM pg_advisory_xact_lock(1396834306, s.k)
    FROM (SELECT DISTINCT sb_key(e.conversation_id) AS k FROM sb_endpoints e
          WHERE e.conv_order = ANY (senders) ORDER BY 1) s;
    IF (SELECT value FROM sb_meta WHERE key = 'catalog_version') <> p_version THEN
        RETURN NULL;
    END IF;
    SELECT count(*) INTO ready
    FROM (SELECT DISTINCT (j ->> 0)::bigint AS sender, (j ->> 1)::bigint AS peer
          FROM jsonb_array_elements(p_rows) j) k
    CROSS JOIN LATERAL (SELECT * FROM sb_endpoints x WHERE x.conv_order = k.sender LIMIT 1) s
    CROSS JOIN LATERAL (SELECT * FROM sb_endpoints x WHERE x.conv_order = k.peer LIMIT 1) p
    WHERE s.state = 'CO' AND p.state = 'CO' AND p.conversation_id = s.conversation_id
        AND p.is_initiator = 1 - s.is_initiator
        AND NOT EXISTS (SELECT 1 FROM sb_transmission_queue t WHERE t.handle = s.handle);
    IF ready <> cardinality(senders) THEN
        RETURN NULL;
    END IF;
    WITH r AS (
        SELECT (x.j ->> 0)::bigint AS sender, (x.j ->> 1)::bigint AS peer,
            x.j ->> 2 AS mtype, x.j ->> 3 AS validation, x.j ->> 4 AS id,
            (x.j ->> 5)::integer AS off, (x.j ->> 6)::integer AS len, x.n,
            row_number() OVER (PARTITION BY (x.j ->> 0)::bigint ORDER BY x.n) - 1 AS k
        FROM jsonb_array_elements(p_rows) WITH ORDINALITY x(j, n))
    INSERT INTO sb_messages(queue_id, group_id, handle, conv_order, msn, status, priority,
        is_timer, message_type, validation, body, message_id, service, contract, enqueued_at)
    SELECT p.queue_id, p.group_id, p.handle, p.conv_order, s.send_seq + r.k, 1, p.priority, 0,
        r.mtype, r.validation, substr(p_bodies, r.off, r.len), r.id, p.service, p.contract,
        p_now
    FROM r
    CROSS JOIN LATERAL (SELECT * FROM sb_endpoints x WHERE x.conv_order = r.sender LIMIT 1) s
    CROSS JOIN LATERAL (SELECT * FROM sb_endpoints x WHERE x.conv_order = r.peer LIMIT 1) p
    ORDER BY r.n;
    GET DIAGNOSTICS sent = ROW_COUNT;
    UPDATE sb_endpoints e SET send_seq = e.send_seq + c.n
    FROM (SELECT (j ->> 0)::bigint AS sender, count(*) AS n
          FROM jsonb_array_elements(p_rows) j GROUP BY 1) c
    WHERE e.conv_order = c.sender AND e.conv_order = ANY (senders);
    RETURN sent;
END $$;

