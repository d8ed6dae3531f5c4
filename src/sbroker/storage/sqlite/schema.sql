-- index ExecutionLog_open
CREATE INDEX ExecutionLog_open ON ExecutionLog(Status) WHERE Status IN ('queued', 'running');

-- index PipelineAttempts_run
CREATE INDEX PipelineAttempts_run ON PipelineAttempts(RunID, Task);

-- index PipelineRuns_pipeline
CREATE INDEX PipelineRuns_pipeline ON PipelineRuns(Pipeline, RunID);

-- index PipelineRuns_running
CREATE INDEX PipelineRuns_running ON PipelineRuns(RunID) WHERE Status = 'running';

-- index PipelineRuns_schedule
CREATE INDEX PipelineRuns_schedule ON PipelineRuns(Schedule, Turn) WHERE Status = 'running';

-- index PipelineRuns_tick
CREATE UNIQUE INDEX PipelineRuns_tick ON PipelineRuns(Schedule, Tick) WHERE Tick IS NOT NULL AND Status <> 'skipped';

-- index ix_poison_message_details
CREATE INDEX ix_poison_message_details ON poison_message_details(conversation_handle);

-- index ix_poison_messages_state
CREATE INDEX ix_poison_messages_state ON poison_messages(state, resend_at);

-- index sb_endpoints_delete
CREATE INDEX sb_endpoints_delete ON sb_endpoints(delete_after) WHERE delete_after IS NOT NULL;

-- index sb_endpoints_group
CREATE INDEX sb_endpoints_group ON sb_endpoints(group_id);

-- index sb_endpoints_lifetime
CREATE INDEX sb_endpoints_lifetime ON sb_endpoints(lifetime_expires);

-- index sb_endpoints_timer
CREATE INDEX sb_endpoints_timer ON sb_endpoints(timer_at) WHERE timer_at IS NOT NULL;

-- index sb_group_locks_session
CREATE INDEX sb_group_locks_session ON sb_group_locks(session_id);

-- index sb_messages_group
CREATE INDEX sb_messages_group ON sb_messages(group_key, status, priority DESC, conv_order, is_timer DESC, msn);

-- index sb_messages_ready
CREATE INDEX sb_messages_ready ON sb_messages(queue_id, status, priority DESC, queuing_order);

-- index sb_stream_sources_session
CREATE INDEX sb_stream_sources_session ON sb_stream_sources(session_id);

-- index sb_tq_handle
CREATE INDEX sb_tq_handle ON sb_transmission_queue(handle, msn);

-- index sb_tq_order
CREATE INDEX sb_tq_order ON sb_transmission_queue(priority DESC, tq_id);

-- table ExecutionLog
CREATE TABLE ExecutionLog ( LogID INTEGER PRIMARY KEY AUTOINCREMENT, CallerID TEXT NOT NULL, SchedulerHandle TEXT NOT NULL, Worker TEXT, WorkerSession INTEGER, Task TEXT NOT NULL, QueuedTime TEXT NOT NULL, StartTime TEXT, EndTime TEXT, Status TEXT NOT NULL DEFAULT 'queued', Error TEXT, SparkJobIds TEXT, Value TEXT, Pool TEXT, CancelRequested INTEGER NOT NULL DEFAULT 0, TargetHandle TEXT , ErrorDetails TEXT, TraceContext TEXT);

-- table ExecutorSettings
CREATE TABLE ExecutorSettings (key TEXT PRIMARY KEY, value TEXT NOT NULL);

-- table PipelineAttempts
CREATE TABLE PipelineAttempts ( LogID INTEGER PRIMARY KEY, RunID INTEGER NOT NULL, Task TEXT NOT NULL, Attempt INTEGER NOT NULL, Deadline REAL, Outcome TEXT , LeaseToken INTEGER NOT NULL DEFAULT 0);

-- table PipelineRunTasks
CREATE TABLE PipelineRunTasks ( RunID INTEGER NOT NULL, Name TEXT NOT NULL, Position INTEGER NOT NULL, After TEXT NOT NULL DEFAULT '[]', Definition TEXT NOT NULL, Status TEXT NOT NULL DEFAULT 'pending', Attempts INTEGER NOT NULL DEFAULT 0, Failures INTEGER NOT NULL DEFAULT 0, NextAttempt REAL, StartTime TEXT, EndTime TEXT, Value TEXT, Error TEXT, PRIMARY KEY (RunID, Name) );

-- table PipelineRuns
CREATE TABLE PipelineRuns ( RunID INTEGER PRIMARY KEY AUTOINCREMENT, Pipeline TEXT NOT NULL, File TEXT, Params TEXT NOT NULL DEFAULT '{}', Status TEXT NOT NULL DEFAULT 'running', StartTime TEXT NOT NULL, EndTime TEXT, SchedulerHandle TEXT, Schedule TEXT, Error TEXT , LeaseToken INTEGER NOT NULL DEFAULT 0, LeaseSession INTEGER, LeaseExpires REAL, LeaseSeconds REAL NOT NULL DEFAULT 30, DriverHost TEXT, DriverPid INTEGER, Takeovers INTEGER NOT NULL DEFAULT 0, CancelRequested INTEGER NOT NULL DEFAULT 0, ScheduledFor TEXT, Tick INTEGER, Turn INTEGER);

-- table PipelineScheduleCounters
CREATE TABLE PipelineScheduleCounters ( Schedule TEXT NOT NULL, Outcome TEXT NOT NULL, Total INTEGER NOT NULL DEFAULT 0, PRIMARY KEY (Schedule, Outcome) );

-- table PipelineSchedules
CREATE TABLE PipelineSchedules ( Name TEXT PRIMARY KEY, File TEXT NOT NULL, Params TEXT NOT NULL DEFAULT '{}', Every REAL, Cron TEXT, Timezone TEXT NOT NULL DEFAULT 'UTC', Catchup INTEGER NOT NULL DEFAULT 0, Overlap TEXT NOT NULL DEFAULT 'skip', NextDue REAL NOT NULL, Handle TEXT, CreatedTime TEXT NOT NULL , MaxActiveRuns INTEGER NOT NULL DEFAULT 1);

-- table Schedulers
CREATE TABLE Schedulers ( SchedulerHandle TEXT PRIMARY KEY, ConversationId TEXT NOT NULL, Name TEXT NOT NULL, Priority INTEGER NOT NULL DEFAULT 5, CreatedTime TEXT NOT NULL );

-- table poison_message_details
CREATE TABLE poison_message_details ( incident_id INTEGER PRIMARY KEY, queue_name TEXT NOT NULL, conversation_handle TEXT NOT NULL, message_id TEXT, message_type_name TEXT, error TEXT, occurred_at REAL NOT NULL );

-- table poison_messages
CREATE TABLE poison_messages ( record_id INTEGER PRIMARY KEY, queue_name TEXT NOT NULL, conversation_handle TEXT NOT NULL, conversation_group_id TEXT, message_id TEXT, message_sequence_number INTEGER, message_type_name TEXT, service_name TEXT, service_contract_name TEXT, priority INTEGER, message_body BLOB, attempts INTEGER NOT NULL, last_error TEXT, policy TEXT NOT NULL, state TEXT NOT NULL, removed_at REAL NOT NULL, resend_at REAL, redriven_at REAL, redrive_error TEXT );

-- table sb_activated_tasks
CREATE TABLE sb_activated_tasks ( session_id INTEGER NOT NULL, task_id INTEGER NOT NULL, queue_id INTEGER NOT NULL, procedure_name TEXT NOT NULL, started_at REAL NOT NULL, thread_name TEXT, PRIMARY KEY (session_id, task_id) ) WITHOUT ROWID;

-- table sb_activation_notices
CREATE TABLE sb_activation_notices ( queue_id INTEGER PRIMARY KEY, session_id INTEGER NOT NULL, notified_at REAL NOT NULL );

-- table sb_consumed
CREATE TABLE sb_consumed (queuing_order INTEGER PRIMARY KEY);

-- table sb_contract_message_types
CREATE TABLE sb_contract_message_types ( contract TEXT NOT NULL REFERENCES sb_contracts(name) ON DELETE CASCADE, message_type TEXT NOT NULL REFERENCES sb_message_types(name), sent_by TEXT NOT NULL CHECK (sent_by IN ('initiator', 'target', 'any')), PRIMARY KEY (contract, message_type) );

-- table sb_contracts
CREATE TABLE sb_contracts (name TEXT PRIMARY KEY);

-- table sb_endpoints
CREATE TABLE "sb_endpoints" ( conv_order INTEGER PRIMARY KEY AUTOINCREMENT, handle TEXT NOT NULL UNIQUE, conversation_id TEXT NOT NULL, is_initiator INTEGER NOT NULL, group_id TEXT NOT NULL, queue_id INTEGER NOT NULL, service TEXT NOT NULL, far_service TEXT NOT NULL, far_broker_instance TEXT, contract TEXT NOT NULL, state TEXT NOT NULL, priority INTEGER NOT NULL, send_seq INTEGER NOT NULL DEFAULT 0, -- next message_sequence_number to send receive_seq INTEGER NOT NULL DEFAULT 0, -- next message_sequence_number expected lifetime_expires REAL NOT NULL, timer_at REAL, created_at REAL NOT NULL, closed_at REAL, delete_after REAL, encryption INTEGER NOT NULL DEFAULT 1, group_key INTEGER, -- the group's number (see above) UNIQUE (conversation_id, is_initiator) );

-- table sb_event_notifications
CREATE TABLE sb_event_notifications ( name TEXT PRIMARY KEY, queue_id INTEGER NOT NULL REFERENCES sb_queues(queue_id), event TEXT NOT NULL, to_service TEXT NOT NULL, broker_instance TEXT );

-- table sb_group_locks
CREATE TABLE sb_group_locks ( group_id TEXT PRIMARY KEY, queue_id INTEGER NOT NULL, owner TEXT NOT NULL, session_id INTEGER NOT NULL, acquired_at REAL NOT NULL ) WITHOUT ROWID;

-- table sb_message_types
CREATE TABLE sb_message_types ( name TEXT PRIMARY KEY, validation TEXT NOT NULL, -- none | empty | well_formed_xml | well_formed_json | json_schema json_schema TEXT );

-- table sb_messages
CREATE TABLE "sb_messages" ( queuing_order INTEGER PRIMARY KEY AUTOINCREMENT, queue_id INTEGER NOT NULL, group_key INTEGER NOT NULL, handle TEXT NOT NULL, conv_order INTEGER NOT NULL, msn INTEGER NOT NULL, status INTEGER NOT NULL, -- 1 ready, 0 retained received, 2 incomplete, 3 retained sent priority INTEGER NOT NULL, is_timer INTEGER NOT NULL DEFAULT 0, message_type TEXT NOT NULL, validation TEXT NOT NULL, body BLOB NOT NULL, message_id TEXT NOT NULL, service TEXT NOT NULL, contract TEXT NOT NULL, enqueued_at REAL NOT NULL DEFAULT 0 , trace_context TEXT);

-- table sb_meta
CREATE TABLE sb_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;

-- table sb_net_endpoint
CREATE TABLE sb_net_endpoint ( id INTEGER PRIMARY KEY CHECK (id = 1), options TEXT NOT NULL, listening_port INTEGER, owner_session INTEGER );

-- table sb_net_inbound
CREATE TABLE sb_net_inbound ( conversation_id TEXT NOT NULL, from_initiator INTEGER NOT NULL, next_seq INTEGER NOT NULL, refused INTEGER NOT NULL DEFAULT 0, delete_after REAL NOT NULL, PRIMARY KEY (conversation_id, from_initiator) ) WITHOUT ROWID;

-- table sb_net_outbox
CREATE TABLE "sb_net_outbox" ( id INTEGER PRIMARY KEY AUTOINCREMENT, conversation_id TEXT NOT NULL, from_initiator INTEGER NOT NULL, msn INTEGER NOT NULL, from_service TEXT NOT NULL, to_service TEXT NOT NULL, contract TEXT NOT NULL, message_type TEXT NOT NULL, body BLOB NOT NULL, priority INTEGER NOT NULL, origin_instance TEXT, target_instance TEXT, expires_at REAL, enqueued_at REAL NOT NULL, transmission_status TEXT NOT NULL DEFAULT '' );

-- table sb_priorities
CREATE TABLE sb_priorities ( name TEXT PRIMARY KEY, contract TEXT NOT NULL, local_service TEXT NOT NULL, remote_service TEXT NOT NULL, priority_level INTEGER NOT NULL CHECK (priority_level BETWEEN 1 AND 10) );

-- table sb_queue_counters
CREATE TABLE sb_queue_counters ( queue_id INTEGER PRIMARY KEY, received INTEGER NOT NULL DEFAULT 0, removed INTEGER NOT NULL DEFAULT 0 );

-- table sb_queue_monitors
CREATE TABLE sb_queue_monitors ( session_id INTEGER NOT NULL, queue_id INTEGER NOT NULL, activation_kind TEXT NOT NULL, state TEXT NOT NULL, last_empty_rowset_time REAL, last_activated_time REAL, tasks_waiting INTEGER NOT NULL, tasks_running INTEGER NOT NULL, tasks_started INTEGER NOT NULL, tasks_failed INTEGER NOT NULL, notifications_sent INTEGER NOT NULL, last_error TEXT, PRIMARY KEY (session_id, queue_id) ) WITHOUT ROWID;

-- table sb_queues
CREATE TABLE sb_queues ( queue_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, status INTEGER NOT NULL DEFAULT 1, retention INTEGER NOT NULL DEFAULT 0, activation_defined INTEGER NOT NULL DEFAULT 0, activation_status INTEGER NOT NULL DEFAULT 0, activation_procedure TEXT, max_queue_readers INTEGER NOT NULL DEFAULT 0, execute_as TEXT, poison_message_handling INTEGER NOT NULL DEFAULT 1, rollback_count INTEGER NOT NULL DEFAULT 0 );

-- table sb_routes
CREATE TABLE sb_routes ( name TEXT PRIMARY KEY, service_name TEXT, broker_instance TEXT, address TEXT NOT NULL, expires_at REAL );

-- table sb_service_contracts
CREATE TABLE sb_service_contracts ( service_id INTEGER NOT NULL REFERENCES sb_services(service_id) ON DELETE CASCADE, contract TEXT NOT NULL REFERENCES sb_contracts(name), PRIMARY KEY (service_id, contract) );

-- table sb_services
CREATE TABLE sb_services ( service_id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, queue_id INTEGER NOT NULL REFERENCES sb_queues(queue_id) );

-- table sb_sessions
CREATE TABLE "sb_sessions" ( session_id INTEGER PRIMARY KEY AUTOINCREMENT, pid INTEGER NOT NULL, start_token TEXT NOT NULL, host TEXT NOT NULL, opened_at REAL NOT NULL );

-- table sb_shared_dialogs
CREATE TABLE sb_shared_dialogs ( key TEXT PRIMARY KEY, handle TEXT NOT NULL ) WITHOUT ROWID;

-- table sb_stream_conversations
CREATE TABLE sb_stream_conversations ( from_service TEXT NOT NULL, to_service TEXT NOT NULL, contract TEXT NOT NULL, conversation_key TEXT NOT NULL, handle TEXT NOT NULL, PRIMARY KEY (from_service, to_service, contract, conversation_key) ) WITHOUT ROWID;

-- table sb_stream_sinks
CREATE TABLE sb_stream_sinks ( query_id TEXT PRIMARY KEY, batch_id INTEGER NOT NULL, committed_at REAL NOT NULL ) WITHOUT ROWID;

-- table sb_stream_sources
CREATE TABLE sb_stream_sources ( queue_id INTEGER PRIMARY KEY REFERENCES sb_queues(queue_id) ON DELETE CASCADE, session_id INTEGER REFERENCES sb_sessions(session_id) ON DELETE SET NULL, claim_token TEXT, claimed_at REAL, committed INTEGER NOT NULL DEFAULT 0, planned INTEGER NOT NULL DEFAULT 0 );

-- table sb_transmission_queue
CREATE TABLE "sb_transmission_queue" ( tq_id INTEGER PRIMARY KEY AUTOINCREMENT, handle TEXT NOT NULL, conversation_id TEXT NOT NULL, is_initiator INTEGER NOT NULL, from_service TEXT NOT NULL, to_service TEXT NOT NULL, to_broker_instance TEXT, contract TEXT NOT NULL, message_type TEXT NOT NULL, msn INTEGER NOT NULL, body BLOB NOT NULL, priority INTEGER NOT NULL, message_id TEXT NOT NULL, enqueued_at REAL NOT NULL, transmission_status TEXT NOT NULL DEFAULT '', target_queue_id INTEGER, is_end_of_conversation INTEGER NOT NULL DEFAULT 0 , trace_context TEXT);

-- table sb_tsql_procedures
CREATE TABLE sb_tsql_procedures ( name TEXT PRIMARY KEY, definition TEXT NOT NULL, modified REAL NOT NULL );

-- trigger sb_endpoints_group_moved
CREATE TRIGGER sb_endpoints_group_moved AFTER UPDATE OF group_id ON sb_endpoints BEGIN UPDATE sb_endpoints SET group_key = coalesce( (SELECT f.group_key FROM sb_endpoints f WHERE f.group_id = new.group_id AND f.conv_order != new.conv_order LIMIT 1), new.conv_order) WHERE conv_order = new.conv_order; UPDATE sb_messages SET group_key = (SELECT group_key FROM sb_endpoints WHERE conv_order = new.conv_order) WHERE group_key = old.group_key AND handle = new.handle; END;

-- trigger sb_endpoints_group_named
CREATE TRIGGER sb_endpoints_group_named AFTER INSERT ON sb_endpoints BEGIN UPDATE sb_endpoints SET group_key = coalesce( (SELECT f.group_key FROM sb_endpoints f WHERE f.group_id = new.group_id AND f.conv_order != new.conv_order LIMIT 1), new.conv_order) WHERE conv_order = new.conv_order; END;

-- trigger sb_sessions_gone
CREATE TRIGGER sb_sessions_gone AFTER DELETE ON sb_sessions BEGIN DELETE FROM sb_group_locks WHERE session_id = old.session_id; DELETE FROM sb_activated_tasks WHERE session_id = old.session_id; DELETE FROM sb_queue_monitors WHERE session_id = old.session_id; END;

-- view ExecutionStatus
CREATE VIEW ExecutionStatus AS SELECT Worker, LogID, CallerID, SchedulerHandle, Pool, StartTime, Task FROM ExecutionLog WHERE Status = 'running';

-- view contracts
CREATE VIEW contracts AS SELECT c.name, m.message_type AS message_type_name, m.sent_by FROM sb_contracts c LEFT JOIN sb_contract_message_types m ON m.contract = c.name;

-- view conversation_endpoints
CREATE VIEW conversation_endpoints AS SELECT e.handle AS conversation_handle, e.conversation_id, e.is_initiator, e.group_id AS conversation_group_id, q.name AS queue_name, e.service AS service_name, e.far_service, e.far_broker_instance, e.contract AS service_contract_name, e.state, CASE e.state WHEN 'SO' THEN 'STARTED_OUTBOUND' WHEN 'SI' THEN 'STARTED_INBOUND' WHEN 'CO' THEN 'CONVERSING' WHEN 'DI' THEN 'DISCONNECTED_INBOUND' WHEN 'DO' THEN 'DISCONNECTED_OUTBOUND' WHEN 'ER' THEN 'ERROR' ELSE 'CLOSED' END AS state_desc, e.priority, e.send_seq AS send_sequence, e.receive_seq AS receive_sequence, e.lifetime_expires AS lifetime, e.timer_at AS dialog_timer, e.created_at FROM sb_endpoints e JOIN sb_queues q ON q.queue_id = e.queue_id;

-- view conversation_groups
CREATE VIEW conversation_groups AS SELECT DISTINCT e.group_id AS conversation_group_id, q.name AS queue_name, l.owner IS NOT NULL AS is_locked FROM sb_endpoints e JOIN sb_queues q ON q.queue_id = e.queue_id LEFT JOIN sb_group_locks l ON l.group_id = e.group_id;

-- view conversation_priorities
CREATE VIEW conversation_priorities AS SELECT name, contract AS service_contract_name, local_service AS local_service_name, remote_service AS remote_service_name, priority_level AS priority FROM sb_priorities;

-- view dm_broker_activated_tasks
CREATE VIEW dm_broker_activated_tasks AS SELECT t.task_id, t.queue_id, q.name AS queue_name, t.procedure_name, t.started_at, t.thread_name, s.host, s.pid, t.session_id FROM sb_activated_tasks t JOIN sb_sessions s ON s.session_id = t.session_id LEFT JOIN sb_queues q ON q.queue_id = t.queue_id;

-- view dm_broker_queue_monitors
CREATE VIEW dm_broker_queue_monitors AS SELECT m.queue_id, q.name AS queue_name, m.activation_kind, m.state, m.last_empty_rowset_time, m.last_activated_time, m.tasks_waiting, m.tasks_running, m.tasks_started, m.tasks_failed, m.notifications_sent, m.last_error, s.host, s.pid, m.session_id FROM sb_queue_monitors m JOIN sb_sessions s ON s.session_id = m.session_id JOIN sb_queues q ON q.queue_id = m.queue_id;

-- view dm_broker_sessions
CREATE VIEW dm_broker_sessions AS SELECT session_id, host, pid, opened_at FROM sb_sessions;

-- view dm_broker_streams
CREATE VIEW dm_broker_streams AS SELECT q.name AS queue_name, c.session_id, s.pid, s.host, CASE WHEN c.session_id IS NULL THEN NULL ELSE c.claimed_at END AS claimed_at, c.committed AS committed_queuing_order, c.planned AS planned_queuing_order FROM sb_stream_sources c JOIN sb_queues q ON q.queue_id = c.queue_id LEFT JOIN sb_sessions s ON s.session_id = c.session_id;

-- view message_types
CREATE VIEW message_types AS SELECT name, validation, json_schema FROM sb_message_types;

-- view queue_stats
CREATE VIEW queue_stats AS SELECT name AS queue_name, status AS is_enabled, activation_status AS is_activation_enabled, poison_message_handling AS is_poison_message_handling_enabled, rollback_count, max_queue_readers, readers_running, queued - marked - locked AS ready_messages, locked AS locked_messages, oldest_enqueue_time, retained_received + marked + received AS messages_received_total, retained_received + marked + received + removed + queued - marked AS messages_enqueued_total FROM ( SELECT q.name, q.status, q.activation_status, q.poison_message_handling, q.rollback_count, q.max_queue_readers, (SELECT count(*) FROM sb_activated_tasks t JOIN sb_sessions s ON s.session_id = t.session_id WHERE t.queue_id = q.queue_id) AS readers_running, (SELECT count(*) FROM sb_messages m WHERE m.queue_id = q.queue_id AND m.status = 1) AS queued, (SELECT count(*) FROM sb_consumed c JOIN sb_messages m ON m.queuing_order = c.queuing_order WHERE m.queue_id = q.queue_id) AS marked, (SELECT count(*) FROM sb_group_locks l JOIN sb_messages m ON m.group_key = ( SELECT e.group_key FROM sb_endpoints e WHERE e.group_id = l.group_id LIMIT 1) WHERE l.queue_id = q.queue_id AND m.status = 1 AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)) AS locked, (SELECT m.enqueued_at FROM sb_messages m WHERE m.queue_id = q.queue_id AND m.status = 1 AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order) ORDER BY m.queuing_order LIMIT 1) AS oldest_enqueue_time, (SELECT count(*) FROM sb_messages m WHERE m.queue_id = q.queue_id AND m.status = 0) AS retained_received, coalesce(k.received, 0) AS received, coalesce(k.removed, 0) AS removed FROM sb_queues q LEFT JOIN sb_queue_counters k ON k.queue_id = q.queue_id );

-- view routes
CREATE VIEW routes AS SELECT name, service_name AS remote_service_name, broker_instance, address, expires_at AS lifetime FROM sb_routes;

-- view service_queues
CREATE VIEW service_queues AS SELECT name, status AS is_receive_enabled, status AS is_enqueue_enabled, retention AS is_retention_enabled, activation_status AS is_activation_enabled, activation_procedure, max_queue_readers, execute_as, poison_message_handling AS is_poison_message_handling_enabled FROM sb_queues;

-- view services
CREATE VIEW services AS SELECT s.name, q.name AS queue_name, (SELECT group_concat(contract, ',') FROM sb_service_contracts c WHERE c.service_id = s.service_id) AS contracts FROM sb_services s JOIN sb_queues q ON q.queue_id = s.queue_id;

-- view transmission_queue
CREATE VIEW transmission_queue AS SELECT t.handle AS conversation_handle, t.to_service AS to_service_name, t.to_broker_instance, t.from_service AS from_service_name, t.contract AS service_contract_name, t.message_type AS message_type_name, t.msn AS message_sequence_number, t.body AS message_body, t.priority, t.enqueued_at AS enqueue_time, t.transmission_status, t.is_end_of_conversation, t.message_id FROM sb_transmission_queue t;
