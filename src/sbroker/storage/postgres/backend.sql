-- The PostgreSQL backend's own statements (the engine's are in queries.sql): schema
-- versions, sessions and their liveness, the change feed, received rows leaving a queue.

-- name: has_schema
SELECT to_regclass('sb_migrations') IS NOT NULL

-- name: schema_version
SELECT coalesce(max(version), 0) FROM sb_migrations

-- name: lock_migrations
-- Processes that open a new database at once migrate it one after the other.
SELECT pg_advisory_xact_lock(1396834308, 0)

-- name: record_migration
INSERT INTO sb_migrations(version) VALUES (%s)

-- name: where_am_i
SELECT current_database(), current_schema(), current_user

-- name: lock_session
-- A session holds this lock on its own connection while it lives (liveness.py).
SELECT pg_try_advisory_lock(1396834307, mod(%s::bigint, 2147483647)::integer)

-- name: heartbeat
UPDATE sb_sessions SET heartbeat_at = clock_timestamp() WHERE session_id = %s

-- name: reregister_session
-- A live session whose row was reaped while it could not reach the server (a long restart)
-- comes back under its own id.
INSERT INTO sb_sessions(session_id, pid, start_token, host, opened_at)
OVERRIDING SYSTEM VALUE VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING

-- name: dead_sessions
-- Sessions (other than the caller's) that hold no session lock and have not beaten for
-- ``grace`` seconds. Params: own session, grace.
SELECT s.session_id FROM sb_sessions s
WHERE s.session_id <> %s AND s.heartbeat_at < clock_timestamp() - make_interval(secs => %s)
    AND NOT EXISTS (SELECT 1 FROM sb_advisory_locks l WHERE l.ns = 1396834307
                    AND l.key = mod(s.session_id, 2147483647)::integer)

-- name: session_alive
-- Whether a session is registered and holds its lock (or beat within ``grace`` seconds).
SELECT EXISTS (SELECT 1 FROM sb_sessions s WHERE s.session_id = %s
    AND (s.heartbeat_at >= clock_timestamp() - make_interval(secs => %s)
         OR EXISTS (SELECT 1 FROM sb_advisory_locks l WHERE l.ns = 1396834307
                    AND l.key = mod(s.session_id, 2147483647)::integer)))

-- name: consume
-- Received rows (queuing orders and message ids, two arrays) leave their queue at commit,
-- counted in the queue's counter slot of this backend. Params: orders, ids, queue.
WITH gone AS (
    DELETE FROM sb_messages m USING unnest(%s::bigint[], %s::text[]) AS t(qo, mid)
    WHERE m.queuing_order = t.qo AND m.message_id = t.mid
    RETURNING 1
)
INSERT INTO sb_queue_counters(queue_id, slot, received)
SELECT %s, mod(pg_backend_pid(), 16), count(*) FROM gone HAVING count(*) > 0
ON CONFLICT (queue_id, slot) DO UPDATE SET
    received = sb_queue_counters.received + excluded.received

-- name: listen
LISTEN sbroker

-- name: notify
-- Tell every session of the database that this one committed (payload: its session id).
SELECT pg_notify('sbroker', %s)

-- name: holds_group
-- Whether this backend holds the group's lock (a RECEIVE of a given group that took nothing).
SELECT EXISTS (SELECT 1 FROM sb_held_groups WHERE key = sb_key(%s) AND pid = pg_backend_pid())
