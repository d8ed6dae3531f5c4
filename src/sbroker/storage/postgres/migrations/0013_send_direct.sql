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
