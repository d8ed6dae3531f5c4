-- Spark Structured Streaming on broker queues (docs/stream.md, engine/streams.py): the tables of
-- storage/sqlite/migrations/0008_streams.sql.

-- A queue read by a stream: its claim (the reader's token, and the broker session of the
-- process it runs in: the claim goes when that session ends or is reaped as dead) and its
-- positions, which outlive the claim.
CREATE TABLE sb_stream_sources (
    queue_id integer PRIMARY KEY REFERENCES sb_queues(queue_id) ON DELETE CASCADE,
    session_id bigint REFERENCES sb_sessions(session_id) ON DELETE SET NULL,
    claim_token text,
    claimed_at double precision,
    committed bigint NOT NULL DEFAULT 0,
    planned bigint NOT NULL DEFAULT 0
);
CREATE INDEX sb_stream_sources_session ON sb_stream_sources(session_id);

-- The last micro-batch each streaming query sent: a replayed batch sends nothing.
CREATE TABLE sb_stream_sinks (
    query_id text PRIMARY KEY,
    batch_id bigint NOT NULL,
    committed_at double precision NOT NULL
);

-- The conversation a sink sends a conversation_key's rows on, kept across batches.
CREATE TABLE sb_stream_conversations (
    from_service text NOT NULL,
    to_service text NOT NULL,
    contract text NOT NULL,
    conversation_key text NOT NULL,
    handle text NOT NULL,
    PRIMARY KEY (from_service, to_service, contract, conversation_key)
);

-- Queues read by streams, for operators: who reads each one and how far it has got.
CREATE VIEW dm_broker_streams AS
SELECT q.name AS queue_name, c.session_id, s.pid, s.host,
       CASE WHEN c.session_id IS NULL THEN NULL ELSE c.claimed_at END AS claimed_at,
       c.committed AS committed_queuing_order, c.planned AS planned_queuing_order
FROM sb_stream_sources c JOIN sb_queues q ON q.queue_id = c.queue_id
LEFT JOIN sb_sessions s ON s.session_id = c.session_id;
