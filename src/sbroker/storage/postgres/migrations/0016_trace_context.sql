-- Tracing (docs/tracing.md): the W3C traceparent of the SEND that made a message, kept with it in
-- its queue and in the transmission queue (NULL when the sender did not trace); sb_take
-- (of 0004) returns it as its last column.
ALTER TABLE sb_messages ADD COLUMN trace_context text;
ALTER TABLE sb_transmission_queue ADD COLUMN trace_context text;
-- A scheduler task's: the traceparent of the AsyncSent that sent it (the dashboard links it).
ALTER TABLE ExecutionLog ADD COLUMN TraceContext text;

DROP FUNCTION sb_take(integer, text, text, bigint, bigint[]);
-- sb_take of 0004 with trace_context: on a queue a live stream reads (``p_queue``, also
-- given with a group) it returns one row of status -1 and nothing else (QueueStreamedError).
CREATE FUNCTION sb_take(p_queue integer, p_group text, p_handle text, p_limit bigint,
                        p_received bigint[])
RETURNS TABLE (status integer, priority integer, queuing_order bigint, group_id text,
               handle text, msn bigint, service text, contract text, message_type text,
               validation text, body bytea, message_id text, enqueued_at double precision,
               trace_context text)
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
                    NULL::text, NULL::double precision, NULL::text;
            END IF;
            RETURN;
        END IF;
    ELSIF NOT pg_try_advisory_xact_lock(1396834305, sb_key(g)) THEN
        RETURN;
    ELSIF p_queue IS NOT NULL AND sb_streamed(p_queue) THEN
        RETURN QUERY SELECT -1, NULL::integer, NULL::bigint, NULL::text, NULL::text,
            NULL::bigint, NULL::text, NULL::text, NULL::text, NULL::text, NULL::bytea,
            NULL::text, NULL::double precision, NULL::text;
        RETURN;
    END IF;
    IF p_handle IS NULL THEN
        RETURN QUERY
            SELECT m.status, m.priority, m.queuing_order, m.group_id, m.handle, m.msn,
                m.service, m.contract, m.message_type, m.validation, m.body, m.message_id,
                m.enqueued_at, m.trace_context
            FROM sb_messages m WHERE m.group_id = g AND m.status = 1
            ORDER BY m.priority DESC, m.conv_order, m.is_timer DESC, m.msn LIMIT p_limit;
    ELSE
        RETURN QUERY
            SELECT m.status, m.priority, m.queuing_order, m.group_id, m.handle, m.msn,
                m.service, m.contract, m.message_type, m.validation, m.body, m.message_id,
                m.enqueued_at, m.trace_context
            FROM sb_messages m WHERE m.group_id = g AND m.status = 1 AND m.handle = p_handle
            ORDER BY m.priority DESC, m.conv_order, m.is_timer DESC, m.msn LIMIT p_limit;
    END IF;
END $$;

-- sb_waiting_transmissions of 0002, with trace_context last.
DROP FUNCTION sb_waiting_transmissions();
CREATE FUNCTION sb_waiting_transmissions()
RETURNS TABLE (tq_id bigint, handle text, msn bigint, message_type text, body bytea,
               message_id text, trace_context text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM sb_lock_conversations(ARRAY(
        SELECT DISTINCT conversation_id FROM sb_transmission_queue));
    RETURN QUERY SELECT t.tq_id, t.handle, t.msn, t.message_type, t.body, t.message_id,
            t.trace_context
        FROM sb_transmission_queue t ORDER BY t.handle, t.msn;
END $$;
