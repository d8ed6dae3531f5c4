-- Integer group keys in the queue (issue 22). sb_messages kept each row's conversation group
-- as its 36-character UUID text, and the index a RECEIVE reads a group by (sb_messages_group)
-- led with it: every index entry carried the UUID, and a commit spreading sends over many
-- groups dirtied more leaf pages. sb_groups numbers each group once; the queue keeps the
-- number (group_key), and statements read the group's UUID from sb_groups by it. Measured on
-- the SQL alone, 100 sends per transaction over 100 groups: 52,105 msgs/s with the text key,
-- 68,202 with the integer (median of 3; `python -m bench.floor` shows the engine's own).
--
-- A group is numbered when an endpoint first names it (insert, or MOVE CONVERSATION; by the
-- triggers below), which then keeps the number beside the UUID (sb_endpoints.group_key), so
-- a send finds it with the endpoint's row, without a search by UUID. The group's row goes
-- when no endpoint and no message names it any more. Only
-- queue rows hold a number (locks and the engine hold the UUID), so a number given again
-- after that names nothing else: no AUTOINCREMENT, whose bookkeeping would cost every new
-- dialog a write.
CREATE TABLE sb_groups (
    group_key INTEGER PRIMARY KEY,
    group_id TEXT NOT NULL UNIQUE
);
INSERT OR IGNORE INTO sb_groups(group_id) SELECT group_id FROM sb_endpoints ORDER BY conv_order;
INSERT OR IGNORE INTO sb_groups(group_id) SELECT group_id FROM sb_messages ORDER BY queuing_order;
ALTER TABLE sb_endpoints ADD COLUMN group_key INTEGER;
UPDATE sb_endpoints SET group_key = (SELECT g.group_key FROM sb_groups g
                                     WHERE g.group_id = sb_endpoints.group_id);

-- The queue rebuilt with group_key in group_id's place (SQLite cannot change a column's
-- meaning in place). Positions must keep growing from the highest ever given (migration 8):
-- sqlite_sequence's row for the old table goes with it, so its value is carried over.
CREATE TEMP TABLE sb_messages_seq AS
    SELECT coalesce(max(seq), 0) AS seq FROM sqlite_sequence WHERE name = 'sb_messages';
DROP VIEW queue_stats;
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
SELECT m.queuing_order, m.queue_id, g.group_key, m.handle, m.conv_order, m.msn, m.status,
    m.priority, m.is_timer, m.message_type, m.validation, m.body, m.message_id, m.service,
    m.contract, m.enqueued_at
FROM sb_messages m JOIN sb_groups g ON g.group_id = m.group_id;
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

-- Groups numbered as endpoints name them, removed once nothing names them.
CREATE TRIGGER sb_endpoints_group_named AFTER INSERT ON sb_endpoints
BEGIN
    INSERT OR IGNORE INTO sb_groups(group_id) VALUES (new.group_id);
    UPDATE sb_endpoints SET group_key = (SELECT group_key FROM sb_groups
                                         WHERE group_id = new.group_id)
    WHERE conv_order = new.conv_order;
END;

CREATE TRIGGER sb_endpoints_group_moved AFTER UPDATE OF group_id ON sb_endpoints
BEGIN
    INSERT OR IGNORE INTO sb_groups(group_id) VALUES (new.group_id);
    UPDATE sb_endpoints SET group_key = (SELECT group_key FROM sb_groups
                                         WHERE group_id = new.group_id)
    WHERE conv_order = new.conv_order;
    DELETE FROM sb_groups WHERE group_id = old.group_id
        AND NOT EXISTS (SELECT 1 FROM sb_endpoints e WHERE e.group_id = old.group_id)
        AND NOT EXISTS (SELECT 1 FROM sb_messages m WHERE m.group_key = sb_groups.group_key);
END;

CREATE TRIGGER sb_endpoints_group_gone AFTER DELETE ON sb_endpoints
BEGIN
    DELETE FROM sb_groups WHERE group_id = old.group_id
        AND NOT EXISTS (SELECT 1 FROM sb_endpoints e WHERE e.group_id = old.group_id)
        AND NOT EXISTS (SELECT 1 FROM sb_messages m WHERE m.group_key = sb_groups.group_key);
END;

-- MOVE CONVERSATION moves the endpoint first (naming the new group), then its messages: the
-- old group's row goes once the last of them has left it.
CREATE TRIGGER sb_messages_group_moved AFTER UPDATE OF group_key ON sb_messages
BEGIN
    DELETE FROM sb_groups WHERE group_key = old.group_key
        AND NOT EXISTS (SELECT 1 FROM sb_endpoints e WHERE e.group_id = sb_groups.group_id)
        AND NOT EXISTS (SELECT 1 FROM sb_messages m WHERE m.group_key = old.group_key);
END;

-- Migration 7's view, its locked groups found by key.
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
        (SELECT count(*) FROM sb_group_locks l JOIN sb_groups g ON g.group_id = l.group_id
            JOIN sb_messages m ON m.group_key = g.group_key
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
