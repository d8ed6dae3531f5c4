-- The SQLite backend's own statements (the engine's are in queries.sql, by the same names on
-- every backend): what only this backend's way of locking and committing needs.

-- name: receive_take_excluding
-- RECEIVE's find-and-fetch in one statement when something is excluded: rows this
-- transaction already received (a JSON array of queuing orders) and groups other
-- transactions hold in the writer's memory (a JSON array), besides lock rows of others. The
-- rows of the first eligible group in RECEIVE order (the Message fields); the caller skips
-- the ones it received already. Nothing on a queue a live stream reads (as
-- receive_take_next). Params: queue, queue, owner, received orders, groups, limit.
SELECT m.status, m.priority, m.queuing_order, g.group_id, m.handle, m.msn, m.service,
    m.contract, m.message_type, m.validation, m.body, m.message_id, m.enqueued_at,
    m.trace_context
FROM sb_messages m CROSS JOIN sb_endpoints g ON g.conv_order = m.conv_order
WHERE m.group_key = (
        SELECT n.group_key FROM sb_messages n CROSS JOIN sb_endpoints k
            ON k.conv_order = n.conv_order
        WHERE n.queue_id = ? AND n.status = 1
            AND NOT EXISTS (SELECT 1 FROM sb_stream_sources s WHERE s.queue_id = ?
                            AND s.session_id IS NOT NULL)
            AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = n.queuing_order)
            AND NOT EXISTS (SELECT 1 FROM sb_group_locks l WHERE l.group_id = k.group_id
                            AND l.owner != ?)
            AND n.queuing_order NOT IN (SELECT value FROM json_each(?))
            AND k.group_id NOT IN (SELECT value FROM json_each(?))
        ORDER BY n.priority DESC, n.queuing_order LIMIT 1)
    AND m.status = 1
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
ORDER BY m.priority DESC, m.conv_order, m.is_timer DESC, m.msn LIMIT ?

-- name: release_group_locks_of
-- The lock rows of the transactions (a JSON array of owners) committing in one batch.
DELETE FROM sb_group_locks WHERE owner IN (SELECT value FROM json_each(?))
