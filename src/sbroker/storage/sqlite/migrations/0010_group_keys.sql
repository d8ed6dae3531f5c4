-- Integer group keys in the queue (issue 22). sb_messages kept each row's conversation group
-- as its 36-character UUID text, and the index a RECEIVE reads a group by (sb_messages_group)
-- led with it: every index entry carried the UUID, and a commit spreading sends over many
-- groups dirtied more leaf pages. Measured on the SQL alone, 100 sends per transaction over
-- 100 groups: 52,105 msgs/s with the text key, 68,202 with an integer (median of 3).
--
-- A group's number is the conv_order of the endpoint that first named it; every endpoint of
-- the group keeps it (sb_endpoints.group_key, set by the triggers below) and so does every
-- queue row. A send finds it in the endpoint row it reads anyway; a statement given a group's
-- UUID finds the number through the index sb_endpoints_group; a queue row's UUID is its
-- endpoint's (by rowid). No table of groups: numbering a group costs a new dialog no page of
-- its own. conv_order becomes AUTOINCREMENT so that a number is never given to another group
-- while rows of the first may still hold it (SQLite gives max(rowid) + 1 otherwise, the
-- number of a deleted top row); the sequence page is the one each SEND's queue row dirties.

-- The endpoints rebuilt (SQLite cannot make a key AUTOINCREMENT in place); views naming the
-- table survive the rename with legacy_alter_table on, as in migration 8.
DROP VIEW queue_stats;
CREATE TABLE sb_endpoints_new (
    conv_order INTEGER PRIMARY KEY AUTOINCREMENT,
    handle TEXT NOT NULL UNIQUE,
    conversation_id TEXT NOT NULL,
    is_initiator INTEGER NOT NULL,
    group_id TEXT NOT NULL,
    queue_id INTEGER NOT NULL,
    service TEXT NOT NULL,
    far_service TEXT NOT NULL,
    far_broker_instance TEXT,
    contract TEXT NOT NULL,
    state TEXT NOT NULL,
    priority INTEGER NOT NULL,
    send_seq INTEGER NOT NULL DEFAULT 0,      -- next message_sequence_number to send
    receive_seq INTEGER NOT NULL DEFAULT 0,   -- next message_sequence_number expected
    lifetime_expires REAL NOT NULL,
    timer_at REAL,
    created_at REAL NOT NULL,
    closed_at REAL,
    delete_after REAL,
    encryption INTEGER NOT NULL DEFAULT 1,
    group_key INTEGER,                        -- the group's number (see above)
    UNIQUE (conversation_id, is_initiator)
);
INSERT INTO sb_endpoints_new
SELECT e.conv_order, e.handle, e.conversation_id, e.is_initiator, e.group_id, e.queue_id,
    e.service, e.far_service, e.far_broker_instance, e.contract, e.state, e.priority,
    e.send_seq, e.receive_seq, e.lifetime_expires, e.timer_at, e.created_at, e.closed_at,
    e.delete_after, e.encryption,
    (SELECT min(f.conv_order) FROM sb_endpoints f WHERE f.group_id = e.group_id)
FROM sb_endpoints e;
DROP TABLE sb_endpoints;
PRAGMA legacy_alter_table = ON;
ALTER TABLE sb_endpoints_new RENAME TO sb_endpoints;
PRAGMA legacy_alter_table = OFF;
CREATE INDEX sb_endpoints_group ON sb_endpoints(group_id);
CREATE INDEX sb_endpoints_timer ON sb_endpoints(timer_at) WHERE timer_at IS NOT NULL;
CREATE INDEX sb_endpoints_lifetime ON sb_endpoints(lifetime_expires);
CREATE INDEX sb_endpoints_delete ON sb_endpoints(delete_after) WHERE delete_after IS NOT NULL;

-- An endpoint joins its group's number, or numbers a new group with its own conv_order.
CREATE TRIGGER sb_endpoints_group_named AFTER INSERT ON sb_endpoints
BEGIN
    UPDATE sb_endpoints SET group_key = coalesce(
        (SELECT f.group_key FROM sb_endpoints f
         WHERE f.group_id = new.group_id AND f.conv_order != new.conv_order LIMIT 1),
        new.conv_order)
    WHERE conv_order = new.conv_order;
END;

-- MOVE CONVERSATION (into a group of the queue, which has endpoints): the endpoint takes the
-- group's number, and its queue rows go with it here, while the old number is still known
-- (the old group may have no endpoint left to find it by).
CREATE TRIGGER sb_endpoints_group_moved AFTER UPDATE OF group_id ON sb_endpoints
BEGIN
    UPDATE sb_endpoints SET group_key = coalesce(
        (SELECT f.group_key FROM sb_endpoints f
         WHERE f.group_id = new.group_id AND f.conv_order != new.conv_order LIMIT 1),
        new.conv_order)
    WHERE conv_order = new.conv_order;
    UPDATE sb_messages SET group_key = (SELECT group_key FROM sb_endpoints
                                        WHERE conv_order = new.conv_order)
    WHERE group_key = old.group_key AND handle = new.handle;
END;

-- The queue rebuilt with group_key in group_id's place. Positions must keep growing from the
-- highest ever given (migration 8): sqlite_sequence's row for the old table goes with it, so
-- its value is carried over. A row whose group no endpoint names any more (none should be
-- left) keeps a number of its own below zero, where no conv_order is.
CREATE TEMP TABLE sb_messages_seq AS
    SELECT coalesce(max(seq), 0) AS seq FROM sqlite_sequence WHERE name = 'sb_messages';
CREATE TABLE sb_messages_new (
    queuing_order INTEGER PRIMARY KEY AUTOINCREMENT,
    queue_id INTEGER NOT NULL,
    group_key INTEGER NOT NULL,
    handle TEXT NOT NULL,
    conv_order INTEGER NOT NULL,
    msn INTEGER NOT NULL,
    status INTEGER NOT NULL,                  -- 1 ready, 0 retained received, 2 incomplete, 3 retained sent
    priority INTEGER NOT NULL,
    is_timer INTEGER NOT NULL DEFAULT 0,
    message_type TEXT NOT NULL,
    validation TEXT NOT NULL,
    body BLOB NOT NULL,
    message_id TEXT NOT NULL,
    service TEXT NOT NULL,
    contract TEXT NOT NULL,
    enqueued_at REAL NOT NULL DEFAULT 0
);
INSERT INTO sb_messages_new
SELECT m.queuing_order, m.queue_id,
    coalesce((SELECT e.group_key FROM sb_endpoints e WHERE e.group_id = m.group_id LIMIT 1),
             -(SELECT min(o.queuing_order) FROM sb_messages o WHERE o.group_id = m.group_id)),
    m.handle, m.conv_order, m.msn, m.status, m.priority, m.is_timer, m.message_type,
    m.validation, m.body, m.message_id, m.service, m.contract, m.enqueued_at
FROM sb_messages m;
DROP TABLE sb_messages;
PRAGMA legacy_alter_table = ON;
ALTER TABLE sb_messages_new RENAME TO sb_messages;
PRAGMA legacy_alter_table = OFF;
UPDATE sqlite_sequence SET seq = max(seq, (SELECT seq FROM temp.sb_messages_seq))
WHERE name = 'sb_messages';
INSERT INTO sqlite_sequence(name, seq)
SELECT 'sb_messages', seq FROM temp.sb_messages_seq
WHERE seq > 0 AND NOT EXISTS (SELECT 1 FROM sqlite_sequence WHERE name = 'sb_messages');
DROP TABLE temp.sb_messages_seq;
CREATE INDEX sb_messages_ready ON sb_messages(queue_id, status, priority DESC, queuing_order);
CREATE INDEX sb_messages_group
    ON sb_messages(group_key, status, priority DESC, conv_order, is_timer DESC, msn);

-- Migration 7's view, its locked groups' rows found by number.
CREATE VIEW queue_stats AS
SELECT name AS queue_name, status AS is_enabled,
       activation_status AS is_activation_enabled,
       poison_message_handling AS is_poison_message_handling_enabled,
       rollback_count, max_queue_readers, readers_running,
       queued - marked - locked AS ready_messages, locked AS locked_messages,
       oldest_enqueue_time, retained_received + marked + received AS messages_received_total,
       retained_received + marked + received + removed + queued - marked
           AS messages_enqueued_total
FROM (
    SELECT q.name, q.status, q.activation_status, q.poison_message_handling, q.rollback_count,
        q.max_queue_readers,
        (SELECT count(*) FROM sb_activated_tasks t JOIN sb_sessions s
            ON s.session_id = t.session_id WHERE t.queue_id = q.queue_id) AS readers_running,
        (SELECT count(*) FROM sb_messages m WHERE m.queue_id = q.queue_id AND m.status = 1)
            AS queued,
        (SELECT count(*) FROM sb_consumed c JOIN sb_messages m
            ON m.queuing_order = c.queuing_order WHERE m.queue_id = q.queue_id) AS marked,
        (SELECT count(*) FROM sb_group_locks l JOIN sb_messages m ON m.group_key = (
                SELECT e.group_key FROM sb_endpoints e WHERE e.group_id = l.group_id LIMIT 1)
            WHERE l.queue_id = q.queue_id AND m.status = 1
            AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order))
            AS locked,
        (SELECT m.enqueued_at FROM sb_messages m WHERE m.queue_id = q.queue_id AND m.status = 1
            AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
            ORDER BY m.queuing_order LIMIT 1) AS oldest_enqueue_time,
        (SELECT count(*) FROM sb_messages m WHERE m.queue_id = q.queue_id AND m.status = 0)
            AS retained_received,
        coalesce(k.received, 0) AS received, coalesce(k.removed, 0) AS removed
    FROM sb_queues q LEFT JOIN sb_queue_counters k ON k.queue_id = q.queue_id
);
