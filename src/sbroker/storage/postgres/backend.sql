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
-- Returns whether other sessions have the database open (else nobody needs our NOTIFYs).
-- Params: session, session.
UPDATE sb_sessions SET heartbeat_at = clock_timestamp() WHERE session_id = %s
RETURNING EXISTS (SELECT 1 FROM sb_sessions o WHERE o.session_id <> %s)

-- name: reregister_session
-- A live session whose row was reaped while it could not reach the server (a long restart)
-- comes back under its own id.
INSERT INTO sb_sessions(session_id, pid, start_token, host, opened_at)
OVERRIDING SYSTEM VALUE VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING

-- name: dead_sessions
-- Sessions (other than the caller's) that hold no session lock, with their process and
-- whether they have not beaten for ``grace`` seconds: those are dead, and so are those of
-- the caller's host whose process is gone (liveness.py). Params: grace, own session.
SELECT s.session_id, s.pid, s.start_token, s.host,
    s.heartbeat_at < clock_timestamp() - make_interval(secs => %s) AS stale
FROM sb_sessions s
WHERE s.session_id <> %s
    AND NOT EXISTS (SELECT 1 FROM sb_advisory_locks l WHERE l.ns = 1396834307
                    AND l.key = mod(s.session_id, 2147483647)::integer)

-- name: session_alive
-- Whether a session is registered and holds its lock (or beat within ``grace`` seconds).
SELECT EXISTS (SELECT 1 FROM sb_sessions s WHERE s.session_id = %s
    AND (s.heartbeat_at >= clock_timestamp() - make_interval(secs => %s)
         OR EXISTS (SELECT 1 FROM sb_advisory_locks l WHERE l.ns = 1396834307
                    AND l.key = mod(s.session_id, 2147483647)::integer)))

-- name: consume
-- Received rows leave their queue at commit, counted. Params: {"queuing order": "message
-- id", ...} (JSON), queue.
SELECT sb_consume(%s::jsonb, %s::integer)

-- name: listen
LISTEN sbroker

-- name: notify
-- Tell every session of the database that this one committed (payload: its session id).
SELECT pg_notify('sbroker', %s)

-- name: holds_group
-- Whether this backend holds the group's lock (a RECEIVE of a given group that took nothing).
SELECT EXISTS (SELECT 1 FROM sb_held_groups WHERE key = sb_key(%s) AND pid = pg_backend_pid())

-- name: set_send_seqs_bulk
-- The engine's set_send_seq for many rows: a JSON object {"conv_order": send_seq, ...} and
-- the list of its keys (each row found by primary key: migration 0011).
SELECT sb_set_send_seqs(%s::jsonb, sb_bigints(%s::jsonb))

-- name: retain_received_bulk
-- The engine's retain_received for many rows: a JSON array of [queuing_order, message_id].
UPDATE sb_messages m SET status = 0
FROM jsonb_array_elements(%s::jsonb) j
WHERE m.queuing_order = (j.value ->> 0)::bigint AND m.message_id = j.value ->> 1

-- name: messages_dead_rows
-- Dead and live rows of sb_messages, from the statistics (cleanup.py), and whether this role
-- may vacuum the table: its owner's or the database owner's privileges, or a superuser's.
SELECT s.n_dead_tup, s.n_live_tup,
       pg_has_role(c.relowner, 'USAGE') OR pg_has_role(d.datdba, 'USAGE')
           OR coalesce((SELECT r.rolsuper FROM pg_roles r WHERE r.rolname = current_user), false)
FROM pg_stat_user_tables s
JOIN pg_class c ON c.oid = s.relid
JOIN pg_database d ON d.datname = current_database()
WHERE s.relid = 'sb_messages'::regclass

-- name: vacuum_messages
-- Remove received messages' dead rows and index entries (cleanup.py); skipped if a VACUUM of
-- the table is already running.
VACUUM (SKIP_LOCKED) sb_messages
