-- Plans that PostgreSQL keeps for a session (PL/pgSQL's, and the statements connection.py
-- prepares once per connection) are made while a queue is small and then run while it is
-- large: each statement here finds its rows by key whatever the tables' size, and what
-- was planned again at every call is planned once.

-- sb_consume (0006) finds the received rows by primary key, but the plan PostgreSQL caches
-- for it per session is made while the queue is small or has no statistics yet, and that
-- plan is a sequential scan: it stays, reading the whole queue at every commit that
-- received, as the queue grows (3.5 ms per commit of a 100-message RECEIVE on a queue of
-- 20,000 rows; 263 us for one message of 3,000; pg_stat_statements with
-- track = all). Without sequential scans the rows are fetched through the primary key:
-- the cost follows the rows received, not the queue. The setting holds inside the function
-- only; a later migration that replaces the function must keep this clause.
ALTER FUNCTION sb_consume(jsonb, integer) SET enable_seqscan = off;

-- SQL-language functions that are not inlined are planned again at every call; PL/pgSQL
-- keeps its plans for the session. These three run in every RECEIVE or send commit, and
-- planning them cost more than running them (sb_streamed 26-37 us of plan per call against
-- 2 us of run; sb_bigints 8-15 us; sb_texts 11-14 us).
CREATE OR REPLACE FUNCTION sb_texts(list jsonb) RETURNS text[]
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$ BEGIN RETURN ARRAY(SELECT jsonb_array_elements_text(list)); END $$;
CREATE OR REPLACE FUNCTION sb_bigints(list jsonb) RETURNS bigint[]
    LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE
    AS $$ BEGIN RETURN ARRAY(SELECT jsonb_array_elements_text(list)::bigint); END $$;
CREATE OR REPLACE FUNCTION sb_streamed(p_queue integer) RETURNS boolean
    LANGUAGE plpgsql STABLE
    AS $$ BEGIN
        RETURN EXISTS (SELECT 1 FROM sb_stream_sources s WHERE s.queue_id = p_queue
                       AND s.session_id IS NOT NULL);
    END $$;

-- queries.sql's ready_senders, planned once per session: each sender and its peer are
-- fetched by key (LIMIT 1 keeps the planner from joining whole tables), so the one plan
-- suits every size of sb_endpoints. Planned with its literals it cost 130 us of planning
-- per send commit against 50 of running; a generic plan of the plain join scanned
-- sb_endpoints whole, and PostgreSQL would not keep a generic plan of this one by itself
-- (it costs ten senders, where a commit's literals often name one).
CREATE FUNCTION sb_ready_senders(ids bigint[])
RETURNS TABLE (handle text, conv_order bigint, send_seq bigint, queue_id integer,
               far_service text, far_broker_instance text, peer_queue_id integer,
               peer_group_id text, peer_handle text, peer_conv_order bigint,
               peer_priority integer, peer_service text, peer_contract text)
LANGUAGE plpgsql STABLE SET plan_cache_mode = force_generic_plan AS $$
BEGIN
    RETURN QUERY
    SELECT s.handle, s.conv_order, s.send_seq, s.queue_id, s.far_service,
        s.far_broker_instance, p.queue_id, p.group_id, p.handle, p.conv_order, p.priority,
        p.service, p.contract
    FROM unnest(ids) k(id)
    CROSS JOIN LATERAL (SELECT * FROM sb_endpoints e
                        WHERE e.conv_order = k.id AND e.state = 'CO'
                            AND NOT EXISTS(SELECT 1 FROM sb_transmission_queue t
                                           WHERE t.handle = e.handle)
                        LIMIT 1) s
    CROSS JOIN LATERAL (SELECT * FROM sb_endpoints e
                        WHERE e.conversation_id = s.conversation_id
                            AND e.is_initiator = 1 - s.is_initiator AND e.state = 'CO'
                        LIMIT 1) p;
END $$;
