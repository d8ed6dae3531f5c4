-- Tables that earlier releases created at run time, now made by a numbered migration like
-- everything else (IF NOT EXISTS: a database that already has them keeps them).

-- Event notifications: one shared dialog per subscription (engine/events.py).
CREATE TABLE IF NOT EXISTS sb_shared_dialogs (
    key TEXT PRIMARY KEY,
    handle TEXT NOT NULL
) WITHOUT ROWID;

-- The broker endpoint (docs/network.md): its options (one row) and the process that runs it.
CREATE TABLE IF NOT EXISTS sb_net_endpoint (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    options TEXT NOT NULL,
    listening_port INTEGER,
    owner_session INTEGER
);
-- Messages this instance sends that belong to no local endpoint: forwarded ones, and the
-- errors a refused first message gets back (unknown service, contract not supported).
CREATE TABLE IF NOT EXISTS sb_net_outbox (
    id INTEGER PRIMARY KEY,
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
-- Receive state of dialog directions with no local endpoint: forwarded, or refused (kept
-- for the anti-replay window so that the rest of a refused conversation is dropped).
CREATE TABLE IF NOT EXISTS sb_net_inbound (
    conversation_id TEXT NOT NULL,
    from_initiator INTEGER NOT NULL,
    next_seq INTEGER NOT NULL,
    refused INTEGER NOT NULL DEFAULT 0,
    delete_after REAL NOT NULL,
    PRIMARY KEY (conversation_id, from_initiator)
) WITHOUT ROWID;

-- The task scheduler (apps/scheduler, docs/scheduler.md).
CREATE TABLE IF NOT EXISTS ExecutionLog (
    LogID INTEGER PRIMARY KEY AUTOINCREMENT,
    CallerID TEXT NOT NULL,
    SchedulerHandle TEXT NOT NULL,
    Worker TEXT,
    WorkerSession INTEGER,
    Task TEXT NOT NULL,
    QueuedTime TEXT NOT NULL,
    StartTime TEXT,
    EndTime TEXT,
    Status TEXT NOT NULL DEFAULT 'queued',
    Error TEXT,
    SparkJobIds TEXT,
    Value TEXT,
    Pool TEXT,
    CancelRequested INTEGER NOT NULL DEFAULT 0,
    TargetHandle TEXT
);
CREATE TABLE IF NOT EXISTS Schedulers (
    SchedulerHandle TEXT PRIMARY KEY,
    ConversationId TEXT NOT NULL,
    Name TEXT NOT NULL,
    Priority INTEGER NOT NULL DEFAULT 5,
    CreatedTime TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS ExecutionLog_open ON ExecutionLog(Status)
    WHERE Status IN ('queued', 'running');
CREATE VIEW IF NOT EXISTS ExecutionStatus AS
    SELECT Worker, LogID, CallerID, SchedulerHandle, Pool, StartTime, Task
    FROM ExecutionLog WHERE Status = 'running';
CREATE TABLE IF NOT EXISTS ExecutorSettings (key TEXT PRIMARY KEY, value TEXT NOT NULL);

-- Poison messages (apps/poison, docs/poison.md): incidents, and removed messages.
CREATE TABLE IF NOT EXISTS poison_message_details (
    incident_id INTEGER PRIMARY KEY,
    queue_name TEXT NOT NULL,
    conversation_handle TEXT NOT NULL,
    message_id TEXT,
    message_type_name TEXT,
    error TEXT,
    occurred_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS ix_poison_message_details
    ON poison_message_details(conversation_handle);
CREATE TABLE IF NOT EXISTS poison_messages (
    record_id INTEGER PRIMARY KEY,
    queue_name TEXT NOT NULL,
    conversation_handle TEXT NOT NULL,
    conversation_group_id TEXT,
    message_id TEXT,
    message_sequence_number INTEGER,
    message_type_name TEXT,
    service_name TEXT,
    service_contract_name TEXT,
    priority INTEGER,
    message_body BLOB,
    attempts INTEGER NOT NULL,
    last_error TEXT,
    policy TEXT NOT NULL,
    state TEXT NOT NULL,
    removed_at REAL NOT NULL,
    resend_at REAL,
    redriven_at REAL,
    redrive_error TEXT
);
CREATE INDEX IF NOT EXISTS ix_poison_messages_state ON poison_messages(state, resend_at);

-- A session's rows leave with it (closed, or reaped because its process died).
CREATE TRIGGER sb_sessions_gone AFTER DELETE ON sb_sessions
BEGIN
    DELETE FROM sb_group_locks WHERE session_id = old.session_id;
    DELETE FROM sb_activated_tasks WHERE session_id = old.session_id;
    DELETE FROM sb_queue_monitors WHERE session_id = old.session_id;
END;

-- The open broker sessions (one per Broker.open), as SQL Server's dm_exec_sessions.
CREATE VIEW dm_broker_sessions AS
SELECT session_id, host, pid, opened_at FROM sb_sessions;
