-- A traced SEND goes straight into its local peer's queue like an untraced one: the direct
-- functions of 0013 and 0018 store the message's trace context too (docs/tracing.md).
-- sb_send_direct takes it as a last parameter; each JSON row of sb_send_direct_many has it
-- as an eighth element (null when the SEND was not traced). Same checks, same writes
-- otherwise.
DROP FUNCTION sb_send_direct(text, text, bytea, text, double precision, bigint, text, bigint,
                             text);
CREATE FUNCTION sb_send_direct(p_type text, p_validation text, p_body bytea, p_id text,
                               p_now double precision, p_sender bigint, p_handle text,
                               p_peer bigint, p_version text,
                               p_trace text)
RETURNS integer
LANGUAGE plpgsql VOLATILE SET enable_seqscan = off AS $$
DECLARE
    conv text;
    seq bigint;
    initiator integer;
    peer sb_endpoints%ROWTYPE;
BEGIN
    SELECT s.conversation_id INTO conv FROM sb_endpoints s
    WHERE s.conv_order = p_sender AND s.handle = p_handle;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    PERFORM pg_advisory_xact_lock(1396834306, sb_key(conv));
    SELECT s.send_seq, s.is_initiator INTO seq, initiator FROM sb_endpoints s
    WHERE s.conv_order = p_sender AND s.handle = p_handle AND s.state = 'CO'
        AND NOT EXISTS (SELECT 1 FROM sb_transmission_queue t WHERE t.handle = s.handle);
    IF NOT FOUND
            OR (SELECT value FROM sb_meta WHERE key = 'catalog_version') <> p_version THEN
        RETURN NULL;
    END IF;
    SELECT * INTO peer FROM sb_endpoints p
    WHERE p.conv_order = p_peer AND p.conversation_id = conv
        AND p.is_initiator = 1 - initiator AND p.state = 'CO';
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO sb_messages(queue_id, group_id, handle, conv_order, msn, status, priority,
        is_timer, message_type, validation, body, message_id, service, contract, enqueued_at,
        trace_context)
    VALUES (peer.queue_id, peer.group_id, peer.handle, peer.conv_order, seq, 1, peer.priority,
        0, p_type, p_validation, p_body, p_id, peer.service, peer.contract, p_now, p_trace);
    UPDATE sb_endpoints SET send_seq = seq + 1 WHERE conv_order = p_sender;
    RETURN peer.queue_id;
END $$;

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
            (x.j ->> 5)::integer AS off, (x.j ->> 6)::integer AS len, x.j ->> 7 AS trace, x.n,
            row_number() OVER (PARTITION BY (x.j ->> 0)::bigint ORDER BY x.n) - 1 AS k
        FROM jsonb_array_elements(p_rows) WITH ORDINALITY x(j, n))
    INSERT INTO sb_messages(queue_id, group_id, handle, conv_order, msn, status, priority,
        is_timer, message_type, validation, body, message_id, service, contract, enqueued_at,
        trace_context)
    SELECT p.queue_id, p.group_id, p.handle, p.conv_order, s.send_seq + r.k, 1, p.priority, 0,
        r.mtype, r.validation, substr(p_bodies, r.off, r.len), r.id, p.service, p.contract,
        p_now, r.trace
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
