-- Locks across hosts (locks.py): conversation groups and conversations are locked with
-- advisory locks of the two-key form, (namespace, sb_key(id)):
--   1396834305 a conversation group, held by the broker transaction that RECEIVEs from it;
--   1396834306 a conversation, held by a commit that changes it (its sequence numbers and
--              state are read, then written: two hosts must not do that at once);
--   1396834307 a broker session, held by the session's own connection while it lives.
-- A transaction-level lock dies with its transaction, and every lock with its connection, so
-- a group held by a process or host that died is free as soon as the server notices (at
-- once for a killed process; TCP keepalives for a host that vanished).  Every session sees
-- them in pg_locks.  Two ids whose 32-bit hashes collide share a lock: they never run
-- together, which is safe (both are still served, one after the other).
--
-- The functions lock first and read after, in statements of their own: in READ COMMITTED
-- each statement of a VOLATILE function sees what was committed before it started, so rows
-- read after a lock was granted include everything its previous holder committed.

CREATE FUNCTION sb_key(id text) RETURNS integer
    LANGUAGE sql IMMUTABLE PARALLEL SAFE AS 'SELECT hashtext(id)';

-- A list parameter is JSON text (Connection.ids); these make it an array.
CREATE FUNCTION sb_texts(list jsonb) RETURNS text[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS 'SELECT coalesce(array_agg(v), ''{}'') FROM jsonb_array_elements_text(list) v';
CREATE FUNCTION sb_bigints(list jsonb) RETURNS bigint[]
    LANGUAGE sql IMMUTABLE PARALLEL SAFE
    AS 'SELECT coalesce(array_agg(v::bigint), ''{}'') FROM jsonb_array_elements_text(list) v';

-- Advisory locks granted in this database: (namespace, key, backend pid).
CREATE VIEW sb_advisory_locks AS
SELECT l.classid::bigint AS ns,
       (l.objid::bigint - CASE WHEN l.objid::bigint > 2147483647 THEN 4294967296 ELSE 0 END
       )::integer AS key,
       l.pid
FROM pg_locks l
WHERE l.locktype = 'advisory' AND l.objsubid = 2 AND l.granted
    AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database());

-- Conversation groups held by a transaction, by key (readers outside it exclude them).
CREATE VIEW sb_held_groups AS
SELECT key, pid FROM sb_advisory_locks WHERE ns = 1396834305;

-- GET CONVERSATION GROUP: lock the unlocked group whose next ready message comes first in
-- RECEIVE order (priority, then queuing order) and return it, or NULL.  A candidate is tried
-- with a session-level lock first and kept (as a transaction lock) only if it still has ready
-- rows other than ``received`` (its previous holder may have taken them all): a RECEIVE never
-- keeps a group it took nothing from.
CREATE FUNCTION sb_lock_next(p_queue integer, p_received bigint[]) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    g text;
    k integer;
    held integer[] := '{}';
    tried text[] := '{}';
    pass integer;
    blocked boolean := false;
BEGIN
    -- The first pass tries groups in RECEIVE order.  When one is held by another backend,
    -- the second pass leaves out up front every group held then (one look at pg_locks), so
    -- that a backlog in held groups costs no lock attempt per row; a group taken meanwhile
    -- is still caught by the try-lock.
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
                IF FOUND THEN
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

-- RECEIVE: lock ``p_group`` (or the next group, as sb_lock_next) and return its ready rows in
-- RECEIVE order, at most ``p_limit`` (NULL: all), only of ``p_handle`` if given.
CREATE FUNCTION sb_take(p_queue integer, p_group text, p_handle text, p_limit bigint,
                        p_received bigint[])
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
            RETURN;
        END IF;
    ELSIF NOT pg_try_advisory_xact_lock(1396834305, sb_key(g)) THEN
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

-- Received rows ({"queuing order": "message id", ...}) leave their queue at commit,
-- counted in the queue's counter slot of this backend (a function: its plans are kept per
-- session).
CREATE FUNCTION sb_consume(taken jsonb, p_queue integer) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    gone bigint;
BEGIN
    DELETE FROM sb_messages m USING jsonb_each_text(taken) t
    WHERE m.queuing_order = t.key::bigint AND m.message_id = t.value;
    GET DIAGNOSTICS gone = ROW_COUNT;
    IF gone > 0 THEN
        INSERT INTO sb_queue_counters(queue_id, slot, received)
        VALUES (p_queue, mod(pg_backend_pid(), 16), gone)
        ON CONFLICT (queue_id, slot) DO UPDATE SET
            received = sb_queue_counters.received + excluded.received;
    END IF;
END $$;

-- MOVE CONVERSATION: every group of ``groups`` for the rest of the transaction, or none.
CREATE FUNCTION sb_lock_groups(groups text[]) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE
    g text;
    taken text[] := '{}';
BEGIN
    FOREACH g IN ARRAY groups LOOP
        IF NOT pg_try_advisory_lock(1396834305, sb_key(g)) THEN
            FOREACH g IN ARRAY taken LOOP
                PERFORM pg_advisory_unlock(1396834305, sb_key(g));
            END LOOP;
            RETURN false;
        END IF;
        taken := taken || g;
    END LOOP;
    FOREACH g IN ARRAY taken LOOP
        PERFORM pg_advisory_xact_lock(1396834305, sb_key(g));
        PERFORM pg_advisory_unlock(1396834305, sb_key(g));
    END LOOP;
    RETURN true;
END $$;

-- A commit that changes conversations locks them all first, in one order (no deadlock
-- between two such commits), waiting for the commits that hold them.
CREATE FUNCTION sb_lock_conversations(ids text[]) RETURNS void
LANGUAGE plpgsql AS $$
DECLARE
    k integer;
BEGIN
    FOR k IN SELECT DISTINCT sb_key(c) FROM unnest(ids) c ORDER BY 1 LOOP
        PERFORM pg_advisory_xact_lock(1396834306, k);
    END LOOP;
END $$;

-- Background work that must happen once on the database (timers, lifetimes): the
-- conversations of ``ids`` that no other transaction holds, locked now; others are left
-- to whoever holds them (another host doing the same work, or a commit: the next pass).
CREATE FUNCTION sb_try_conversations(ids text[]) RETURNS text[]
LANGUAGE plpgsql AS $$
DECLARE
    c text;
    got text[] := '{}';
BEGIN
    FOR c IN SELECT DISTINCT x FROM unnest(ids) x ORDER BY 1 LOOP
        IF pg_try_advisory_xact_lock(1396834306, sb_key(c)) THEN
            got := got || c;
        END IF;
    END LOOP;
    RETURN got;
END $$;

-- Endpoint rows as the engine reads them (engine.endpoints.Endpoint's fields).
CREATE VIEW sb_endpoint_rows AS
SELECT conv_order, handle, conversation_id, is_initiator, group_id, queue_id, service,
    far_service, far_broker_instance, contract, state, priority, send_seq, receive_seq,
    lifetime_expires, timer_at, created_at, encryption FROM sb_endpoints;

-- Conversation timers due by ``p_now`` that this transaction may fire (fired once however
-- many brokers run timers: the others skip the conversations, and see the timer cleared).
CREATE FUNCTION sb_due_timers(p_now double precision) RETURNS SETOF sb_endpoint_rows
LANGUAGE plpgsql AS $$
DECLARE
    mine text[];
BEGIN
    mine := sb_try_conversations(ARRAY(
        SELECT conversation_id FROM sb_endpoints WHERE timer_at IS NOT NULL
            AND timer_at <= p_now));
    RETURN QUERY SELECT * FROM sb_endpoint_rows WHERE conversation_id = ANY (mine)
        AND timer_at IS NOT NULL AND timer_at <= p_now;
END $$;

-- Lifetimes expired by ``p_now`` that this transaction may end (once, as timers).
CREATE FUNCTION sb_due_lifetimes(p_now double precision) RETURNS SETOF sb_endpoint_rows
LANGUAGE plpgsql AS $$
DECLARE
    mine text[];
BEGIN
    mine := sb_try_conversations(ARRAY(
        SELECT conversation_id FROM sb_endpoints WHERE lifetime_expires <= p_now
            AND state NOT IN ('ER', 'CD')));
    RETURN QUERY SELECT * FROM sb_endpoint_rows WHERE conversation_id = ANY (mine)
        AND lifetime_expires <= p_now AND state NOT IN ('ER', 'CD');
END $$;

-- Messages waiting in the transmission queue, their conversations locked first (delivered
-- once and in order when several brokers redeliver).
CREATE FUNCTION sb_waiting_transmissions()
RETURNS TABLE (tq_id bigint, handle text, msn bigint, message_type text, body bytea,
               message_id text)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
BEGIN
    PERFORM sb_lock_conversations(ARRAY(
        SELECT DISTINCT conversation_id FROM sb_transmission_queue));
    RETURN QUERY SELECT t.tq_id, t.handle, t.msn, t.message_type, t.body, t.message_id
        FROM sb_transmission_queue t ORDER BY t.handle, t.msn;
END $$;

-- The endpoints of a JSON array of [conversation_id, is_initiator] pairs as one JSON text,
-- their conversations locked first (the network receiver's batch).  Reals as exact text.
CREATE FUNCTION sb_endpoints_by_keys(keys jsonb) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    out text;
BEGIN
    PERFORM sb_lock_conversations(ARRAY(
        SELECT j.value ->> 0 FROM jsonb_array_elements(keys) j));
    SELECT coalesce(json_agg(json_build_array(e.conv_order, e.handle, e.conversation_id,
            e.is_initiator, e.group_id, e.queue_id, e.service, e.far_service,
            e.far_broker_instance, e.contract, e.state, e.priority, e.send_seq, e.receive_seq,
            coalesce(e.lifetime_expires::text, 'NULL'), coalesce(e.timer_at::text, 'NULL'),
            coalesce(e.created_at::text, 'NULL'), e.encryption)), '[]')::text
    INTO out
    FROM jsonb_array_elements(keys) j
    JOIN sb_endpoints e ON e.conversation_id = j.value ->> 0
        AND e.is_initiator = (j.value ->> 1)::integer;
    RETURN out;
END $$;

-- The catalog views (docs/concepts.md, "Views").
CREATE VIEW conversation_endpoints AS
SELECT e.handle AS conversation_handle, e.conversation_id, e.is_initiator,
       e.group_id AS conversation_group_id, q.name AS queue_name,
       e.service AS service_name, e.far_service, e.far_broker_instance,
       e.contract AS service_contract_name, e.state,
       CASE e.state WHEN 'SO' THEN 'STARTED_OUTBOUND' WHEN 'SI' THEN 'STARTED_INBOUND'
            WHEN 'CO' THEN 'CONVERSING' WHEN 'DI' THEN 'DISCONNECTED_INBOUND'
            WHEN 'DO' THEN 'DISCONNECTED_OUTBOUND' WHEN 'ER' THEN 'ERROR' ELSE 'CLOSED' END
            AS state_desc,
       e.priority, e.send_seq AS send_sequence, e.receive_seq AS receive_sequence,
       e.lifetime_expires AS lifetime, e.timer_at AS dialog_timer, e.created_at
FROM sb_endpoints e JOIN sb_queues q ON q.queue_id = e.queue_id;

CREATE VIEW conversation_groups AS
SELECT DISTINCT e.group_id AS conversation_group_id, q.name AS queue_name,
       EXISTS (SELECT 1 FROM sb_held_groups h WHERE h.key = sb_key(e.group_id))::integer
           AS is_locked
FROM sb_endpoints e JOIN sb_queues q ON q.queue_id = e.queue_id;

CREATE VIEW transmission_queue AS
SELECT t.handle AS conversation_handle, t.to_service AS to_service_name,
       t.to_broker_instance, t.from_service AS from_service_name,
       t.contract AS service_contract_name, t.message_type AS message_type_name,
       t.msn AS message_sequence_number, t.body AS message_body, t.priority,
       t.enqueued_at AS enqueue_time, t.transmission_status,
       t.is_end_of_conversation, t.message_id
FROM sb_transmission_queue t;

CREATE VIEW service_queues AS
SELECT name, status AS is_receive_enabled, status AS is_enqueue_enabled,
       retention AS is_retention_enabled, activation_status AS is_activation_enabled,
       activation_procedure, max_queue_readers, execute_as,
       poison_message_handling AS is_poison_message_handling_enabled
FROM sb_queues;

CREATE VIEW services AS
SELECT s.name, q.name AS queue_name,
       (SELECT string_agg(contract, ',') FROM sb_service_contracts c
         WHERE c.service_id = s.service_id) AS contracts
FROM sb_services s JOIN sb_queues q ON q.queue_id = s.queue_id;

CREATE VIEW contracts AS
SELECT c.name, m.message_type AS message_type_name, m.sent_by
FROM sb_contracts c LEFT JOIN sb_contract_message_types m ON m.contract = c.name;

CREATE VIEW message_types AS
SELECT name, validation, json_schema FROM sb_message_types;

CREATE VIEW routes AS
SELECT name, service_name AS remote_service_name, broker_instance, address,
       expires_at AS lifetime FROM sb_routes;

CREATE VIEW conversation_priorities AS
SELECT name, contract AS service_contract_name, local_service AS local_service_name,
       remote_service AS remote_service_name, priority_level AS priority
FROM sb_priorities;

CREATE VIEW dm_broker_activated_tasks AS
SELECT t.task_id, t.queue_id, q.name AS queue_name, t.procedure_name, t.started_at,
       t.thread_name, s.host, s.pid, t.session_id
FROM sb_activated_tasks t JOIN sb_sessions s ON s.session_id = t.session_id
LEFT JOIN sb_queues q ON q.queue_id = t.queue_id;

CREATE VIEW dm_broker_queue_monitors AS
SELECT m.queue_id, q.name AS queue_name, m.activation_kind, m.state,
       m.last_empty_rowset_time, m.last_activated_time, m.tasks_waiting, m.tasks_running,
       m.tasks_started, m.tasks_failed, m.notifications_sent, m.last_error, s.host, s.pid,
       m.session_id
FROM sb_queue_monitors m JOIN sb_sessions s ON s.session_id = m.session_id
JOIN sb_queues q ON q.queue_id = m.queue_id;

CREATE VIEW dm_broker_sessions AS
SELECT session_id, host, pid, opened_at FROM sb_sessions;

-- One row per queue (docs/dashboard.md): messages ready to receive and in groups a transaction holds,
-- and the counters that never go down (received rows leave at commit, counted in
-- sb_queue_counters; what is still in the queue is added).
CREATE VIEW queue_stats AS
SELECT name AS queue_name, status AS is_enabled,
       activation_status AS is_activation_enabled,
       poison_message_handling AS is_poison_message_handling_enabled,
       rollback_count, max_queue_readers, readers_running, ready_messages, locked_messages,
       oldest_enqueue_time, retained_received + received AS messages_received_total,
       retained_received + received + removed + ready_messages + locked_messages
           AS messages_enqueued_total
FROM (
    SELECT q.name, q.status, q.activation_status, q.poison_message_handling, q.rollback_count,
        q.max_queue_readers,
        (SELECT count(*) FROM sb_activated_tasks t WHERE t.queue_id = q.queue_id)
            AS readers_running,
        (SELECT count(*) FROM sb_messages m WHERE m.queue_id = q.queue_id AND m.status = 1
            AND NOT EXISTS (SELECT 1 FROM sb_held_groups h WHERE h.key = sb_key(m.group_id)))
            AS ready_messages,
        (SELECT count(*) FROM sb_messages m WHERE m.queue_id = q.queue_id AND m.status = 1
            AND EXISTS (SELECT 1 FROM sb_held_groups h WHERE h.key = sb_key(m.group_id)))
            AS locked_messages,
        (SELECT min(m.enqueued_at) FROM sb_messages m WHERE m.queue_id = q.queue_id
            AND m.status = 1) AS oldest_enqueue_time,
        (SELECT count(*) FROM sb_messages m WHERE m.queue_id = q.queue_id AND m.status = 0)
            AS retained_received,
        coalesce((SELECT sum(k.received) FROM sb_queue_counters k
            WHERE k.queue_id = q.queue_id), 0)::bigint AS received,
        coalesce((SELECT sum(k.removed) FROM sb_queue_counters k
            WHERE k.queue_id = q.queue_id), 0)::bigint AS removed
    FROM sb_queues q
) s;
