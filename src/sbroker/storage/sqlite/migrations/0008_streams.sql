-- Spark Structured Streaming on broker queues (docs/stream.md, engine/streams.py).
--
-- A stream's offset is a queue position: "received through queuing_order N". That only holds
-- if a position is never handed out twice. queuing_order was a plain INTEGER PRIMARY KEY, and
-- SQLite gives a new row max(rowid) + 1: once the rows at the top are deleted (received), the
-- next message would get a position a stream has already passed, and be skipped for ever.
-- AUTOINCREMENT makes SQLite keep the highest position ever given (in sqlite_sequence), so
-- positions only grow. SQLite cannot alter a primary key: the table is rebuilt with its
-- indexes. The rename runs with legacy_alter_table on because the view queue_stats names
-- sb_messages, which does not exist for a moment.
--
-- The trigger of 0003 is not made again: it dropped the mark (sb_consumed) of any deleted
-- message so that a later message given the same position would not inherit it. Positions
-- are not given twice any more, so a mark left by a message deleted another way (END
-- CONVERSATION) matches no message, ever; the sweep clears every mark with the rows it
-- deletes. The trigger ran once per deleted row: it was half the cost of a bulk delete.
CREATE TABLE sb_messages_new (
    queuing_order INTEGER PRIMARY KEY AUTOINCREMENT,
    queue_id INTEGER NOT NULL,
    group_id TEXT NOT NULL,
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
INSERT INTO sb_messages_new SELECT * FROM sb_messages;
DROP TABLE sb_messages;
PRAGMA legacy_alter_table = ON;
ALTER TABLE sb_messages_new RENAME TO sb_messages;
PRAGMA legacy_alter_table = OFF;
CREATE INDEX sb_messages_ready ON sb_messages(queue_id, status, priority DESC, queuing_order);
CREATE INDEX sb_messages_group
    ON sb_messages(group_id, status, priority DESC, conv_order, is_timer DESC, msn);

-- A queue read by a stream: its claim (the reader's token, and the broker session of the
-- process it runs in: the claim goes when that session ends or is reaped as dead) and its
-- positions, which outlive the claim: ``committed``, every message at or before it has been
-- received; ``planned``, the highest end offset ever handed to Spark (a restarted reader
-- never goes back behind it).
CREATE TABLE sb_stream_sources (
    queue_id INTEGER PRIMARY KEY REFERENCES sb_queues(queue_id) ON DELETE CASCADE,
    session_id INTEGER REFERENCES sb_sessions(session_id) ON DELETE SET NULL,
    claim_token TEXT,
    claimed_at REAL,
    committed INTEGER NOT NULL DEFAULT 0,
    planned INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX sb_stream_sources_session ON sb_stream_sources(session_id);

-- The last micro-batch each streaming query sent: a replayed batch sends nothing.
CREATE TABLE sb_stream_sinks (
    query_id TEXT PRIMARY KEY,
    batch_id INTEGER NOT NULL,
    committed_at REAL NOT NULL
) WITHOUT ROWID;

-- The conversation a sink sends a conversation_key's rows on, kept across batches.
CREATE TABLE sb_stream_conversations (
    from_service TEXT NOT NULL,
    to_service TEXT NOT NULL,
    contract TEXT NOT NULL,
    conversation_key TEXT NOT NULL,
    handle TEXT NOT NULL,
    PRIMARY KEY (from_service, to_service, contract, conversation_key)
) WITHOUT ROWID;

-- Queues read by streams, for operators: who reads each one and how far it has got.
CREATE VIEW dm_broker_streams AS
SELECT q.name AS queue_name, c.session_id, s.pid, s.host,
       CASE WHEN c.session_id IS NULL THEN NULL ELSE c.claimed_at END AS claimed_at,
       c.committed AS committed_queuing_order, c.planned AS planned_queuing_order
FROM sb_stream_sources c JOIN sb_queues q ON q.queue_id = c.queue_id
LEFT JOIN sb_sessions s ON s.session_id = c.session_id;
