-- Spark streams on broker queues (SPEC §12): the statements of sbroker.engine.streams.
--
-- A stream reads a queue by position (queuing_order), one priority level at a time: the
-- index sb_messages_ready(queue_id, status, priority, queuing_order) then hands out each
-- level's rows in position order from any position on, whatever other queues hold.

-- name: queue_by_name
SELECT queue_id, status, retention, activation_status FROM sb_queues WHERE name = ?

-- name: stream_holder
-- The live claim on a queue: (session, pid, host), or no row.
SELECT c.session_id, s.pid, s.host FROM sb_stream_sources c
JOIN sb_sessions s ON s.session_id = c.session_id WHERE c.queue_id = ?

-- name: stream_claim
-- Take the queue for a reader (its token, its session) unless another reader holds it (one
-- row changed: taken).
INSERT INTO sb_stream_sources(queue_id, session_id, claim_token, claimed_at)
VALUES (:queue, :session, :token, :now)
ON CONFLICT(queue_id) DO UPDATE SET session_id = excluded.session_id,
    claim_token = excluded.claim_token, claimed_at = excluded.claimed_at
WHERE session_id IS NULL OR claim_token = excluded.claim_token

-- name: stream_release
UPDATE sb_stream_sources SET session_id = NULL, claim_token = NULL
WHERE queue_id = :queue AND claim_token = :token

-- name: stream_positions
SELECT committed, planned FROM sb_stream_sources WHERE queue_id = ?

-- name: queue_locked_groups
-- Conversation groups of the queue that a transaction holds (a RECEIVE in progress).
SELECT count(*) FROM sb_group_locks WHERE queue_id = ?

-- name: level_positions
-- Positions of one priority level's ready messages after :after (and through :through),
-- in position order, at most :limit.
SELECT m.queuing_order FROM sb_messages m
WHERE m.queue_id = :queue AND m.status = 1 AND m.priority = :priority
    AND m.queuing_order > :after AND m.queuing_order <= :through
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
ORDER BY m.queuing_order LIMIT :limit

-- name: level_rows
-- One priority level's ready messages in (:after, :through], in position order: the columns
-- of a stream row, then the position.
SELECT m.handle, m.group_id, m.msn, m.message_type, m.service, m.body, m.enqueued_at,
    m.priority, m.queuing_order FROM sb_messages m
WHERE m.queue_id = :queue AND m.status = 1 AND m.priority = :priority
    AND m.queuing_order > :after AND m.queuing_order <= :through
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
ORDER BY m.queuing_order

-- name: stream_plan
-- Remember the highest end offset handed to Spark (never lowered).
UPDATE sb_stream_sources SET planned = :planned
WHERE queue_id = :queue AND claim_token = :token AND session_id IS NOT NULL
    AND planned < :planned

-- name: range_ended_conversations
-- Conversations whose EndDialog or Error is among the messages being received.
SELECT DISTINCT m.handle FROM sb_messages m
WHERE m.queue_id = :queue AND m.status = 1 AND m.queuing_order > :after
    AND m.queuing_order <= :through AND m.message_type IN (:end_dialog, :error)
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)

-- name: range_count_received
-- Count the messages a stream receives (they leave sb_messages: see 0004_operations.sql).
INSERT INTO sb_queue_counters(queue_id, received)
SELECT :queue, count(*) FROM sb_messages m
WHERE m.queue_id = :queue AND m.status = 1 AND m.queuing_order > :after
    AND m.queuing_order <= :through
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
ON CONFLICT(queue_id) DO UPDATE SET received = received + excluded.received

-- name: range_delete
DELETE FROM sb_messages
WHERE queue_id = :queue AND status = 1 AND queuing_order > :after
    AND queuing_order <= :through
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = sb_messages.queuing_order)

-- name: range_retain
-- A queue with RETENTION keeps received messages, as status 0.
UPDATE sb_messages SET status = 0
WHERE queue_id = :queue AND status = 1 AND queuing_order > :after
    AND queuing_order <= :through
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = sb_messages.queuing_order)

-- name: stream_commit
UPDATE sb_stream_sources SET committed = :through
WHERE queue_id = :queue AND claim_token = :token AND session_id IS NOT NULL
    AND committed < :through

-- name: stream_owned
SELECT 1 FROM sb_stream_sources
WHERE queue_id = :queue AND claim_token = :token AND session_id IS NOT NULL

-- name: sink_last_batch
SELECT batch_id FROM sb_stream_sinks WHERE query_id = ?

-- name: sink_advance
-- Record a micro-batch as sent; no row changes when it (or a later one) already was.
INSERT INTO sb_stream_sinks(query_id, batch_id, committed_at) VALUES (?, ?, ?)
ON CONFLICT(query_id) DO UPDATE SET batch_id = excluded.batch_id,
    committed_at = excluded.committed_at
WHERE excluded.batch_id > batch_id

-- name: sink_conversations
-- The conversations of these keys (a JSON array) and their initiator endpoint's state.
SELECT k.conversation_key, k.handle, e.state FROM sb_stream_conversations k
LEFT JOIN sb_endpoints e ON e.handle = k.handle
WHERE k.from_service = ? AND k.to_service = ? AND k.contract = ?
    AND k.conversation_key IN (SELECT value FROM json_each(?))

-- name: sink_map
-- Map keys to conversations ({key: handle} as JSON): new keys, and keys whose conversation
-- ended (their old handle must still be the mapped one, else another writer got there).
INSERT INTO sb_stream_conversations(from_service, to_service, contract, conversation_key,
    handle)
SELECT :from_service, :to_service, :contract, j.key, j.value FROM json_each(:map) j WHERE true
ON CONFLICT(from_service, to_service, contract, conversation_key) DO UPDATE
SET handle = excluded.handle
WHERE handle IN (SELECT value FROM json_each(:replaced))
