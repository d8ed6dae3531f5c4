-- The SQLite backend's own statements (the engine's are in queries.sql, by the same names on
-- every backend): what only this backend's way of locking and committing needs.

-- name: receive_take_excluding
-- RECEIVE's find-and-fetch in one statement when something is excluded: rows this
-- transaction already received (a JSON array of queuing orders) and groups other
-- transactions hold in the writer's memory (a JSON array), besides lock rows of others. The
-- rows of the first eligible group in RECEIVE order (the Message fields); the caller skips
-- the ones it received already. Nothing on a queue a live stream reads (as
-- receive_take_next). Params: queue, queue, owner, received orders, groups, limit.
SELECT status, priority, queuing_order, group_id, handle, msn, service, contract,
    message_type, validation, body, message_id, enqueued_at FROM sb_messages
WHERE group_id = (
        SELECT m.group_id FROM sb_messages m WHERE m.queue_id = ? AND m.status = 1
            AND NOT EXISTS (SELECT 1 FROM sb_stream_sources s WHERE s.queue_id = ?
                            AND s.session_id IS NOT NULL)
            AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
            AND NOT EXISTS (SELECT 1 FROM sb_group_locks l WHERE l.group_id = m.group_id
                            AND l.owner != ?)
            AND m.queuing_order NOT IN (SELECT value FROM json_each(?))
            AND m.group_id NOT IN (SELECT value FROM json_each(?))
        ORDER BY m.priority DESC, m.queuing_order LIMIT 1)
    AND status = 1
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = sb_messages.queuing_order)
ORDER BY priority DESC, conv_order, is_timer DESC, msn LIMIT ?

-- name: release_group_locks_of
-- The lock rows of the transactions (a JSON array of owners) committing in one batch.
DELETE FROM sb_group_locks WHERE owner IN (SELECT value FROM json_each(?))
