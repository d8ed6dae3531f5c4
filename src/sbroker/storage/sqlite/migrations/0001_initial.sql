-- sbroker schema, version 1.  Tables are prefixed sb_; views carry SQL Server's names.
CREATE TABLE sb_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;

CREATE TABLE sb_message_types (
    name TEXT PRIMARY KEY,
    validation TEXT NOT NULL,          -- none | empty | well_formed_xml | well_formed_json | json_schema
    json_schema TEXT
);
CREATE TABLE sb_contracts (name TEXT PRIMARY KEY);
CREATE TABLE sb_contract_message_types (
    contract TEXT NOT NULL REFERENCES sb_contracts(name) ON DELETE CASCADE,
    message_type TEXT NOT NULL REFERENCES sb_message_types(name),
    sent_by TEXT NOT NULL CHECK (sent_by IN ('initiator', 'target', 'any')),
    PRIMARY KEY (contract, message_type)
);
CREATE TABLE sb_queues (
    queue_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    status INTEGER NOT NULL DEFAULT 1,
    retention INTEGER NOT NULL DEFAULT 0,
    activation_defined INTEGER NOT NULL DEFAULT 0,
    activation_status INTEGER NOT NULL DEFAULT 0,
    activation_procedure TEXT,
    max_queue_readers INTEGER NOT NULL DEFAULT 0,
    execute_as TEXT,
    poison_message_handling INTEGER NOT NULL DEFAULT 1,
    rollback_count INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE sb_services (
    service_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    queue_id INTEGER NOT NULL REFERENCES sb_queues(queue_id)
);
CREATE TABLE sb_service_contracts (
    service_id INTEGER NOT NULL REFERENCES sb_services(service_id) ON DELETE CASCADE,
    contract TEXT NOT NULL REFERENCES sb_contracts(name),
    PRIMARY KEY (service_id, contract)
);
CREATE TABLE sb_routes (
    name TEXT PRIMARY KEY,
    service_name TEXT,
    broker_instance TEXT,
    address TEXT NOT NULL,
    expires_at REAL
);
CREATE TABLE sb_priorities (
    name TEXT PRIMARY KEY,
    contract TEXT NOT NULL,
    local_service TEXT NOT NULL,
    remote_service TEXT NOT NULL,
    priority_level INTEGER NOT NULL CHECK (priority_level BETWEEN 1 AND 10)
);
CREATE TABLE sb_event_notifications (
    name TEXT PRIMARY KEY,
    queue_id INTEGER NOT NULL REFERENCES sb_queues(queue_id),
    event TEXT NOT NULL,
    to_service TEXT NOT NULL,
    broker_instance TEXT
);

-- One row per conversation endpoint; conv_order gives conversations a stable FIFO order.
CREATE TABLE sb_endpoints (
    conv_order INTEGER PRIMARY KEY,
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
    UNIQUE (conversation_id, is_initiator)
);
CREATE INDEX sb_endpoints_group ON sb_endpoints(group_id);
CREATE INDEX sb_endpoints_timer ON sb_endpoints(timer_at) WHERE timer_at IS NOT NULL;
CREATE INDEX sb_endpoints_lifetime ON sb_endpoints(lifetime_expires);
CREATE INDEX sb_endpoints_delete ON sb_endpoints(delete_after) WHERE delete_after IS NOT NULL;

CREATE TABLE sb_messages (
    queuing_order INTEGER PRIMARY KEY,
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
    contract TEXT NOT NULL
);
CREATE INDEX sb_messages_ready ON sb_messages(queue_id, status, priority DESC, queuing_order);
CREATE INDEX sb_messages_group
    ON sb_messages(group_id, status, priority DESC, conv_order, is_timer DESC, msn);

-- Messages that could not be delivered yet (disabled queue, no route, remote peer).
CREATE TABLE sb_transmission_queue (
    tq_id INTEGER PRIMARY KEY,
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
CREATE INDEX sb_tq_order ON sb_transmission_queue(priority DESC, tq_id);
CREATE INDEX sb_tq_handle ON sb_transmission_queue(handle, msn);

-- Process sessions, and conversation group locks held by their transactions (leases).
CREATE TABLE sb_sessions (
    session_id INTEGER PRIMARY KEY,
    pid INTEGER NOT NULL,
    start_token TEXT NOT NULL,
    host TEXT NOT NULL,
    opened_at REAL NOT NULL
);
CREATE TABLE sb_group_locks (
    group_id TEXT PRIMARY KEY,
    queue_id INTEGER NOT NULL,
    owner TEXT NOT NULL,
    session_id INTEGER NOT NULL,
    acquired_at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX sb_group_locks_session ON sb_group_locks(session_id);

-- Built-in objects every database has.
INSERT INTO sb_message_types(name, validation) VALUES
    ('DEFAULT', 'none'),
    ('http://schemas.microsoft.com/SQL/ServiceBroker/EndDialog', 'empty'),
    ('http://schemas.microsoft.com/SQL/ServiceBroker/Error', 'well_formed_xml'),
    ('http://schemas.microsoft.com/SQL/ServiceBroker/DialogTimer', 'empty'),
    ('http://schemas.microsoft.com/SQL/Notifications/EventNotification', 'well_formed_xml');
INSERT INTO sb_contracts(name) VALUES
    ('DEFAULT'), ('http://schemas.microsoft.com/SQL/Notifications/PostEventNotification');
INSERT INTO sb_contract_message_types(contract, message_type, sent_by) VALUES
    ('DEFAULT', 'DEFAULT', 'any'),
    ('http://schemas.microsoft.com/SQL/Notifications/PostEventNotification',
     'http://schemas.microsoft.com/SQL/Notifications/EventNotification', 'initiator');
INSERT INTO sb_routes(name, service_name, broker_instance, address) VALUES
    ('AutoCreatedLocal', NULL, NULL, 'LOCAL');
