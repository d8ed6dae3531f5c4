-- External activation across processes (docs/activation.md): the last QUEUE_ACTIVATION notification of
-- each queue and the session that sent it. Every started broker runs a monitor for the queue;
-- only the last sender, or any once monitor_interval has passed since, sends the next one
-- (activation.claim_activation_notice), so several brokers on one database send one
-- notification where one broker would.
CREATE TABLE sb_activation_notices (
    queue_id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL,
    notified_at REAL NOT NULL
);
