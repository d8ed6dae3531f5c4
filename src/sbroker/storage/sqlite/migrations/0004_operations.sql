-- What operators see (docs/dashboard.md, docs/operations.md).
--
-- Every queue row records when it was enqueued (SQL Server's message_enqueue_time).
ALTER TABLE sb_messages ADD COLUMN enqueued_at REAL NOT NULL DEFAULT 0;

-- Counters that never go down, kept in the database so that every process agrees and they
-- survive restarts. They count only messages that LEFT sb_messages: ``received`` those a
-- RECEIVE took (deleted, or swept after being marked in sb_consumed), ``removed`` those
-- deleted unreceived (END CONVERSATION, cleanup, lifetime). The totals add what is still in
-- the queue (view queue_stats), so a commit that only enqueues or marks writes no counter.
CREATE TABLE sb_queue_counters (
    queue_id INTEGER PRIMARY KEY,
    received INTEGER NOT NULL DEFAULT 0,
    removed INTEGER NOT NULL DEFAULT 0
);

-- Process sessions get ids that are never reused (a dead process's id must not come back
-- for a new process: its running tasks would never be seen as dead).
CREATE TABLE sb_sessions_new (
    session_id INTEGER PRIMARY KEY AUTOINCREMENT,
    pid INTEGER NOT NULL,
    start_token TEXT NOT NULL,
    host TEXT NOT NULL,
    opened_at REAL NOT NULL
);
INSERT INTO sb_sessions_new SELECT session_id, pid, start_token, host, opened_at FROM sb_sessions;
DROP TABLE sb_sessions;
ALTER TABLE sb_sessions_new RENAME TO sb_sessions;

-- The activation DMVs are instance-wide, as in SQL Server: every started broker writes its
-- activated tasks and queue monitors here; the rows of a process that died are reaped with
-- its session.
CREATE TABLE sb_activated_tasks (
    session_id INTEGER NOT NULL,
    task_id INTEGER NOT NULL,
    queue_id INTEGER NOT NULL,
    procedure_name TEXT NOT NULL,
    started_at REAL NOT NULL,
    thread_name TEXT,
    PRIMARY KEY (session_id, task_id)
) WITHOUT ROWID;
CREATE TABLE sb_queue_monitors (
    session_id INTEGER NOT NULL,
    queue_id INTEGER NOT NULL,
    activation_kind TEXT NOT NULL,
    state TEXT NOT NULL,
    last_empty_rowset_time REAL,
    last_activated_time REAL,
    tasks_waiting INTEGER NOT NULL,
    tasks_running INTEGER NOT NULL,
    tasks_started INTEGER NOT NULL,
    tasks_failed INTEGER NOT NULL,
    notifications_sent INTEGER NOT NULL,
    last_error TEXT,
    PRIMARY KEY (session_id, queue_id)
) WITHOUT ROWID;

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

-- One row per queue with the figures of a dashboard and of /metrics. ``ready_messages``
-- can be received now, ``locked_messages`` wait in a group another transaction holds.
CREATE VIEW queue_stats AS
SELECT name AS queue_name, status AS is_enabled,
       activation_status AS is_activation_enabled,
       poison_message_handling AS is_poison_message_handling_enabled,
       rollback_count, max_queue_readers, readers_running, ready_messages, locked_messages,
       oldest_enqueue_time, retained_received + marked + received AS messages_received_total,
       retained_received + marked + received + removed + ready_messages + locked_messages
           AS messages_enqueued_total
FROM (
    SELECT q.name, q.status, q.activation_status, q.poison_message_handling, q.rollback_count,
        q.max_queue_readers,
        (SELECT count(*) FROM sb_activated_tasks t JOIN sb_sessions s
            ON s.session_id = t.session_id WHERE t.queue_id = q.queue_id) AS readers_running,
        (SELECT count(*) FROM sb_messages m WHERE m.queue_id = q.queue_id AND m.status = 1
            AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
            AND NOT EXISTS (SELECT 1 FROM sb_group_locks l WHERE l.group_id = m.group_id))
            AS ready_messages,
        (SELECT count(*) FROM sb_messages m WHERE m.queue_id = q.queue_id AND m.status = 1
            AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
            AND EXISTS (SELECT 1 FROM sb_group_locks l WHERE l.group_id = m.group_id))
            AS locked_messages,
        (SELECT min(m.enqueued_at) FROM sb_messages m WHERE m.queue_id = q.queue_id
            AND m.status = 1
            AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order))
            AS oldest_enqueue_time,
        (SELECT count(*) FROM sb_messages m WHERE m.queue_id = q.queue_id AND m.status = 0)
            AS retained_received,
        (SELECT count(*) FROM sb_consumed c JOIN sb_messages m
            ON m.queuing_order = c.queuing_order WHERE m.queue_id = q.queue_id) AS marked,
        coalesce(k.received, 0) AS received, coalesce(k.removed, 0) AS removed
    FROM sb_queues q LEFT JOIN sb_queue_counters k ON k.queue_id = q.queue_id
);
