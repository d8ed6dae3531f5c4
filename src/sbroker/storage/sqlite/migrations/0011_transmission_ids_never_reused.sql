-- Transmission ids are never given twice. The transmitter knows a row it handed to the
-- protocol core by its id until the peer acknowledges it, then deletes the row by that id.
-- SQLite gives a new row max(rowid) + 1: once the top row is deleted another way (END
-- CONVERSATION WITH CLEANUP while the peer is down, a lifetime ending, the sweep of orphans),
-- the next message took its id, was taken for the one in flight (never handed over), and was
-- deleted unsent when the old message was acknowledged. AUTOINCREMENT keeps the highest id
-- ever given (in sqlite_sequence). The forwarding outbox is keyed the same way. SQLite cannot
-- alter a primary key: both tables are rebuilt with their indexes; the view
-- transmission_queue names the first, hence legacy_alter_table for the rename (migration 8).
CREATE TABLE sb_transmission_queue_new (
    tq_id INTEGER PRIMARY KEY AUTOINCREMENT,
    handle TEXT NOT NULL,
    conversation_id TEXT NOT NULL,
    is_initiator INTEGER NOT NULL,
    from_service TEXT NOT NULL,
    to_service TEXT NOT NULL,
    to_broker_instance TEXT,
    contract TEXT NOT NULL,
    message_type TEXT NOT NULL,
    msn INTEGER NOT NULL,
    body BLOB NOT NULL,
    priority INTEGER NOT NULL,
    message_id TEXT NOT NULL,
    enqueued_at REAL NOT NULL,
    transmission_status TEXT NOT NULL DEFAULT '',
    target_queue_id INTEGER,
    is_end_of_conversation INTEGER NOT NULL DEFAULT 0
);
INSERT INTO sb_transmission_queue_new SELECT * FROM sb_transmission_queue;
DROP TABLE sb_transmission_queue;
PRAGMA legacy_alter_table = ON;
ALTER TABLE sb_transmission_queue_new RENAME TO sb_transmission_queue;
PRAGMA legacy_alter_table = OFF;
CREATE INDEX sb_tq_order ON sb_transmission_queue(priority DESC, tq_id);
CREATE INDEX sb_tq_handle ON sb_transmission_queue(handle, msn);

CREATE TABLE sb_net_outbox_new (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    conversation_id TEXT NOT NULL,
    from_initiator INTEGER NOT NULL,
    msn INTEGER NOT NULL,
    from_service TEXT NOT NULL,
    to_service TEXT NOT NULL,
    contract TEXT NOT NULL,
    message_type TEXT NOT NULL,
    body BLOB NOT NULL,
    priority INTEGER NOT NULL,
    origin_instance TEXT,
    target_instance TEXT,
    expires_at REAL,
    enqueued_at REAL NOT NULL,
    transmission_status TEXT NOT NULL DEFAULT ''
);
INSERT INTO sb_net_outbox_new SELECT * FROM sb_net_outbox;
DROP TABLE sb_net_outbox;
ALTER TABLE sb_net_outbox_new RENAME TO sb_net_outbox;
