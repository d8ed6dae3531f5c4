-- A commit whose only work is one SEND on a conversation whose local peer converses, in one
-- statement (queries.sql's send_direct; the engine's dialogs.send_direct): the ordinary
-- commit reads the sender first (lock_conversations and ready_senders, one round trip) and
-- then writes and commits (another), so a one-message transaction cost two round trips.
-- Here the conversation is locked as sb_lock_conversations locks it, and then, read after
-- the lock (a statement of a VOLATILE function sees what was committed before it): if the
-- catalog is still the one the commit checked the SEND against, the sender converses with
-- nothing of it waiting in the transmission queue and ``p_peer`` is its conversing peer, the
-- message goes into the peer's queue numbered by the sender's send_seq and send_seq moves
-- on.  Returns the peer's queue, or NULL with nothing written: the engine then commits
-- again the ordinary way.  Parameters as SQLite's send_direct.  Every row is found by key
-- (no sequential scan: 0008 says why a session's plan needs that said).
CREATE FUNCTION sb_send_direct(p_type text, p_validation text, p_body bytea, p_id text,
                               p_now double precision, p_sender bigint, p_handle text,
                               p_peer bigint, p_version text)
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
        is_timer, message_type, validation, body, message_id, service, contract, enqueued_at)
    VALUES (peer.queue_id, peer.group_id, peer.handle, peer.conv_order, seq, 1, peer.priority,
        0, p_type, p_validation, p_body, p_id, peer.service, peer.contract, p_now);
    UPDATE sb_endpoints SET send_seq = seq + 1 WHERE conv_order = p_sender;
    RETURN peer.queue_id;
END $$;

-- The same for a commit of several SENDs (queries.sql's send_direct_many): ``p_rows`` is a
-- JSON array, in send order, of [sender rowid, peer rowid, message type, validation, message
-- id, body offset (1-based) in ``p_bodies``, body length].  Every sender's conversation is
-- locked (in key order, as sb_lock_conversations), and only if the catalog is the one the
-- commit checked against and every sender converses with nothing waiting in the
-- transmission queue and its given peer converses are the messages put in the peers'
-- queues, each sender's numbered from its send_seq in send order, and every send_seq moved
-- on: the number of messages, or NULL with nothing written.  Planned once for the session
-- (planning its statements cost more than a commit of a few messages).
CREATE FUNCTION sb_send_direct_many(p_rows jsonb, p_bodies bytea, p_now double precision,
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
    JOIN sb_endpoints s ON s.conv_order = k.sender
    JOIN sb_endpoints p ON p.conv_order = k.peer
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
    FROM r JOIN sb_endpoints s ON s.conv_order = r.sender
    JOIN sb_endpoints p ON p.conv_order = r.peer
    ORDER BY r.n;
    GET DIAGNOSTICS sent = ROW_COUNT;
    UPDATE sb_endpoints e SET send_seq = e.send_seq + c.n
    FROM (SELECT (j ->> 0)::bigint AS sender, count(*) AS n
          FROM jsonb_array_elements(p_rows) j GROUP BY 1) c
    WHERE e.conv_order = c.sender;
    RETURN sent;
END $$;
