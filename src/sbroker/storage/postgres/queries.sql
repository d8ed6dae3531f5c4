-- The engine's statements on PostgreSQL, by name: the same names as storage/sqlite/queries.sql
-- (tests/unit/test_queries.py checks), psycopg placeholders (%s; a literal percent sign is
-- %%).  A list parameter is JSON text (Connection.ids: psycopg quotes one string faster
-- than an array's elements): ``= ANY (sb_bigints(%s::jsonb))``, ``sb_texts(%s::jsonb)``.
-- Received rows are deleted at commit (no sb_consumed), and a conversation group is held by
-- an advisory lock (migrations/0002_locks.sql), so readers outside the holding transaction
-- exclude groups in sb_held_groups where SQLite looks at sb_group_locks.

-- name: catalog_version
SELECT value FROM sb_meta WHERE key = 'catalog_version'

-- name: register_session
INSERT INTO sb_sessions(pid, start_token, host, opened_at) VALUES (%s, %s, %s, %s)
RETURNING session_id

-- name: other_sessions
SELECT session_id, pid, start_token, host FROM sb_sessions WHERE session_id != %s

-- name: session_process
SELECT pid, start_token, host FROM sb_sessions WHERE session_id = %s

-- name: drop_sessions
-- Dead (or closing) sessions; their activation rows go with them (ON DELETE CASCADE).
DELETE FROM sb_sessions WHERE session_id = ANY (sb_bigints(%s::jsonb))

-- name: new_database
INSERT INTO sb_meta(key, value) VALUES ('broker_instance', %s), ('catalog_version', '0'),
    ('honor_broker_priority', '0')

-- ---------------------------------------------------------------------------------------
-- RECEIVE: finding and locking a conversation group (locks.py, the sb_take family)
-- ---------------------------------------------------------------------------------------

-- name: receive_candidate
-- GET CONVERSATION GROUP: lock and return the next group. Params: queue, received orders.
SELECT sb_lock_next(%s::integer, sb_bigints(%s::jsonb))

-- name: receive_fetch
-- Lock a given group and return its ready rows in RECEIVE order (on a queue a live stream
-- reads, one row of status -1). Params: queue, group, limit.
SELECT * FROM sb_take(%s::integer, %s::text, NULL, %s::bigint, '{}')

-- name: receive_fetch_handle
-- The same, for one conversation of the group. Params: queue, group, handle, limit.
SELECT * FROM sb_take(%s::integer, %s::text, %s::text, %s::bigint, '{}')

-- name: receive_take_next
-- Lock the next group and return its ready rows (on a queue a live stream reads, one row
-- of status -1). Params: queue, limit, received orders.
SELECT * FROM sb_take(%s::integer, NULL, NULL, %s::bigint, sb_bigints(%s::jsonb))

-- name: group_lock_owner
-- The backend that holds a group, if one does.
SELECT pid FROM sb_held_groups WHERE key = sb_key(%s) LIMIT 1

-- name: insert_group_lock
-- Lock every group of an array for the rest of the transaction, or none: whether it did.
SELECT sb_lock_groups(sb_texts(%s::jsonb))

-- name: release_group_locks
-- Group locks are transaction locks; this gives back session-level ones a function could
-- leave behind if it failed half-way.
SELECT pg_advisory_unlock_all()

-- name: queue_locked_by_others
-- Whether another backend holds a group with ready rows in the queue. Params: queue.
SELECT 1 FROM sb_messages m WHERE m.queue_id = %s AND m.status = 1 AND EXISTS (
    SELECT 1 FROM sb_held_groups h WHERE h.key = sb_key(m.group_id)
        AND h.pid <> pg_backend_pid()) LIMIT 1

-- name: probe_queue
-- (ready rows in groups no other backend holds, groups other backends hold). Params: queue.
SELECT EXISTS(SELECT 1 FROM sb_messages m WHERE m.queue_id = p.q AND m.status = 1
        AND NOT EXISTS (SELECT 1 FROM sb_held_groups h WHERE h.key = sb_key(m.group_id)
                        AND h.pid <> pg_backend_pid())),
    EXISTS(SELECT 1 FROM sb_held_groups h WHERE h.pid <> pg_backend_pid())
FROM (SELECT %s::integer AS q) p

-- name: probe_group
-- (ready rows in the group, the group held by another backend). Params: group.
SELECT EXISTS(SELECT 1 FROM sb_messages m WHERE m.group_id = p.g AND m.status = 1),
    EXISTS(SELECT 1 FROM sb_held_groups h WHERE h.key = sb_key(p.g)
           AND h.pid <> pg_backend_pid())
FROM (SELECT %s::text AS g) p

-- name: probe_group_handle
-- The same for one conversation. Params: group, handle.
SELECT EXISTS(SELECT 1 FROM sb_messages m WHERE m.group_id = p.g AND m.status = 1
        AND m.handle = p.h),
    EXISTS(SELECT 1 FROM sb_held_groups h WHERE h.key = sb_key(p.g)
           AND h.pid <> pg_backend_pid())
FROM (SELECT %s::text AS g, %s::text AS h) p

-- ---------------------------------------------------------------------------------------
-- The catalog (engine/catalog.py)
-- ---------------------------------------------------------------------------------------

-- name: catalog_meta
SELECT key, value FROM sb_meta

-- name: catalog_message_types
SELECT name, validation, json_schema FROM sb_message_types

-- name: catalog_contracts
SELECT name FROM sb_contracts

-- name: catalog_contract_message_types
SELECT contract, message_type, sent_by FROM sb_contract_message_types

-- name: catalog_queues
SELECT queue_id, name, status, retention, activation_defined, activation_status,
    activation_procedure, max_queue_readers, execute_as, poison_message_handling
FROM sb_queues

-- name: catalog_service_contracts
SELECT service_id, contract FROM sb_service_contracts

-- name: catalog_services
SELECT service_id, name, queue_id FROM sb_services

-- name: catalog_routes
SELECT name, service_name, broker_instance, address, expires_at FROM sb_routes

-- name: catalog_priorities
SELECT name, contract, local_service, remote_service, priority_level FROM sb_priorities

-- name: catalog_notifications
SELECT name, queue_id, event, to_service FROM sb_event_notifications

-- name: bump_catalog_version
UPDATE sb_meta SET value = (value::bigint + 1)::text WHERE key = 'catalog_version'

-- name: set_option
UPDATE sb_meta SET value = %s WHERE key = %s

-- name: exists_message_type
SELECT 1 FROM sb_message_types WHERE name = %s

-- name: exists_contract
SELECT 1 FROM sb_contracts WHERE name = %s

-- name: exists_queue
SELECT 1 FROM sb_queues WHERE name = %s

-- name: exists_service
SELECT 1 FROM sb_services WHERE name = %s

-- name: exists_route
SELECT 1 FROM sb_routes WHERE name = %s

-- name: exists_priority
SELECT 1 FROM sb_priorities WHERE name = %s

-- name: exists_notification
SELECT 1 FROM sb_event_notifications WHERE name = %s

-- name: delete_message_type
DELETE FROM sb_message_types WHERE name = %s

-- name: delete_contract
DELETE FROM sb_contracts WHERE name = %s

-- name: delete_queue
DELETE FROM sb_queues WHERE name = %s

-- name: delete_service
DELETE FROM sb_services WHERE name = %s

-- name: delete_route
DELETE FROM sb_routes WHERE name = %s

-- name: delete_priority
DELETE FROM sb_priorities WHERE name = %s

-- name: delete_notification
DELETE FROM sb_event_notifications WHERE name = %s

-- name: insert_message_type
INSERT INTO sb_message_types(name, validation, json_schema) VALUES (%s, %s, %s)

-- name: contract_using_message_type
SELECT contract FROM sb_contract_message_types WHERE message_type = %s

-- name: insert_contract
INSERT INTO sb_contracts(name) VALUES (%s)

-- name: insert_contract_message_type
INSERT INTO sb_contract_message_types(contract, message_type, sent_by) VALUES (%s, %s, %s)

-- name: service_using_contract
SELECT s.name FROM sb_service_contracts c JOIN sb_services s USING (service_id)
WHERE c.contract = %s

-- name: insert_queue
INSERT INTO sb_queues(name) VALUES (%s)

-- name: queue_options
SELECT status, retention, activation_defined, activation_status, activation_procedure,
    max_queue_readers, execute_as, poison_message_handling, rollback_count
FROM sb_queues WHERE name = %s

-- name: update_queue_options
UPDATE sb_queues SET status = %s, retention = %s, activation_defined = %s,
    activation_status = %s, activation_procedure = %s, max_queue_readers = %s,
    execute_as = %s, poison_message_handling = %s, rollback_count = %s
WHERE name = %s

-- name: service_using_queue
SELECT s.name FROM sb_services s JOIN sb_queues q USING (queue_id) WHERE q.name = %s

-- name: delete_queue_notifications
DELETE FROM sb_event_notifications
WHERE queue_id = (SELECT queue_id FROM sb_queues WHERE name = %s)

-- name: queue_id_by_name
SELECT queue_id FROM sb_queues WHERE name = %s

-- name: insert_service
INSERT INTO sb_services(name, queue_id) VALUES (%s, %s) RETURNING service_id

-- name: insert_service_contract
INSERT INTO sb_service_contracts(service_id, contract) VALUES (%s, %s)

-- name: insert_route
INSERT INTO sb_routes(name, service_name, broker_instance, address, expires_at)
VALUES (%s, %s, %s, %s, %s)

-- name: insert_priority
INSERT INTO sb_priorities(name, contract, local_service, remote_service, priority_level)
VALUES (%s, %s, %s, %s, %s)

-- name: insert_notification
INSERT INTO sb_event_notifications(name, queue_id, event, to_service) VALUES (%s, %s, %s, %s)

-- name: update_message_type
-- ALTER MESSAGE TYPE. Params: validation, json_schema, name.
UPDATE sb_message_types SET validation = %s, json_schema = %s WHERE name = %s

-- name: service_conversation
-- A conversation endpoint of a local service (ALTER SERVICE ON QUEUE refuses then).
SELECT handle FROM sb_endpoints WHERE service = %s LIMIT 1

-- name: update_service_queue
-- ALTER SERVICE ... ON QUEUE. Params: queue name, service name.
UPDATE sb_services SET queue_id = (SELECT queue_id FROM sb_queues WHERE name = %s)
WHERE name = %s

-- name: add_service_contract
-- ALTER SERVICE ... (ADD CONTRACT). Params: contract, service name.
INSERT INTO sb_service_contracts(service_id, contract)
SELECT service_id, %s FROM sb_services WHERE name = %s

-- name: drop_service_contract
-- ALTER SERVICE ... (DROP CONTRACT). Params: service name, contract.
DELETE FROM sb_service_contracts
WHERE service_id = (SELECT service_id FROM sb_services WHERE name = %s) AND contract = %s

-- name: service_has_contract
SELECT 1 FROM sb_service_contracts c JOIN sb_services s USING (service_id)
WHERE s.name = %s AND c.contract = %s

-- ---------------------------------------------------------------------------------------
-- Conversations at commit (engine/endpoints.py, dialogs.py, due.py)
-- ---------------------------------------------------------------------------------------

-- name: lock_conversations
-- A commit that changes conversations (an array of their ids) locks them first: two hosts
-- never number or change one conversation at once. Returns the catalog version.
SELECT value FROM sb_meta, sb_lock_conversations(sb_texts(%s::jsonb))
WHERE key = 'catalog_version'

-- name: endpoint_by_handle
SELECT * FROM sb_endpoint_rows WHERE handle = %s

-- name: endpoint_by_conversation
-- Params: conversation_id, is_initiator.
SELECT * FROM sb_endpoint_rows WHERE conversation_id = %s AND is_initiator = %s

-- name: insert_endpoint
INSERT INTO sb_endpoints(handle, conversation_id, is_initiator, group_id, queue_id, service,
    far_service, far_broker_instance, contract, state, priority, send_seq, receive_seq,
    lifetime_expires, timer_at, created_at, encryption) VALUES (%s, %s, %s, %s, %s, %s, %s,
    %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING conv_order

-- name: save_endpoint_state
UPDATE sb_endpoints SET state = %s, send_seq = %s, receive_seq = %s WHERE handle = %s

-- name: insert_message
INSERT INTO sb_messages(queue_id, group_id, handle, conv_order, msn, status, priority,
    is_timer, message_type, validation, body, message_id, service, contract, enqueued_at,
    trace_context)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)

-- name: delete_endpoint_transmissions
DELETE FROM sb_transmission_queue WHERE handle = %s

-- name: delete_endpoint
DELETE FROM sb_endpoints WHERE handle = %s

-- name: count_leaving_messages
-- The queue's counters take the rows a delete removes: retained received ones and
-- unreceived ready ones (in the slot of this backend). Params: queue, group, handle.
INSERT INTO sb_queue_counters(queue_id, slot, received, removed)
SELECT %s, mod(pg_backend_pid(), 16), count(*) FILTER (WHERE status = 0),
    count(*) FILTER (WHERE status = 1)
FROM sb_messages m WHERE m.group_id = %s AND m.handle = %s AND m.status IN (0, 1)
HAVING count(*) > 0
ON CONFLICT (queue_id, slot) DO UPDATE SET
    received = sb_queue_counters.received + excluded.received,
    removed = sb_queue_counters.removed + excluded.removed

-- name: delete_conversation_messages
DELETE FROM sb_messages WHERE group_id = %s AND handle = %s

-- name: sender
-- SEND at commit, one read: the sender, whether it has messages waiting in the transmission
-- queue (they must go first), and its peer endpoint if that is in this database.
SELECT s.conv_order, s.handle, s.conversation_id, s.is_initiator, s.group_id, s.queue_id,
    s.service, s.far_service, s.far_broker_instance, s.contract, s.state, s.priority,
    s.send_seq, s.receive_seq, s.lifetime_expires, s.timer_at, s.created_at, s.encryption,
    EXISTS(SELECT 1 FROM sb_transmission_queue t WHERE t.handle = s.handle), p.conv_order,
    p.handle, p.conversation_id, p.is_initiator, p.group_id, p.queue_id, p.service,
    p.far_service, p.far_broker_instance, p.contract, p.state, p.priority, p.send_seq,
    p.receive_seq, p.lifetime_expires, p.timer_at, p.created_at, p.encryption FROM
    sb_endpoints s LEFT JOIN sb_endpoints p ON p.conversation_id = s.conversation_id AND
    p.is_initiator = 1 - s.is_initiator WHERE s.handle = %s

-- name: senders
-- The same for an array of handles.
SELECT s.conv_order, s.handle, s.conversation_id, s.is_initiator, s.group_id, s.queue_id,
    s.service, s.far_service, s.far_broker_instance, s.contract, s.state, s.priority,
    s.send_seq, s.receive_seq, s.lifetime_expires, s.timer_at, s.created_at, s.encryption,
    EXISTS(SELECT 1 FROM sb_transmission_queue t WHERE t.handle = s.handle), p.conv_order,
    p.handle, p.conversation_id, p.is_initiator, p.group_id, p.queue_id, p.service,
    p.far_service, p.far_broker_instance, p.contract, p.state, p.priority, p.send_seq,
    p.receive_seq, p.lifetime_expires, p.timer_at, p.created_at, p.encryption FROM
    sb_endpoints s LEFT JOIN sb_endpoints p ON p.conversation_id = s.conversation_id AND
    p.is_initiator = 1 - s.is_initiator WHERE s.handle = ANY (sb_texts(%s::jsonb))

-- name: ready_senders
-- The senders (an array of their conv_order) whose SENDs a commit can number in memory from
-- their first message: both ends conversing, nothing waiting in the transmission queue.
SELECT * FROM sb_ready_senders(sb_bigints(%s::jsonb))

-- name: set_send_seq
-- Params: send_seq, conv_order.
UPDATE sb_endpoints SET send_seq = %s WHERE conv_order = %s

-- name: send_direct
-- A commit's one SEND on a conversation whose local peer conversed before, alone in its
-- transaction: locks the conversation, checks, puts the message in the peer's queue and
-- numbers the next (migrations 0013, 0021). One row (the peer's queue) if it did, none if it
-- wrote nothing. Params: message_type, validation, body, message_id, enqueued_at, sender
-- rowid, sender handle, peer rowid, catalog version, trace_context.
SELECT q FROM sb_send_direct(%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) q WHERE q IS NOT NULL

-- name: send_direct_many
-- The same for a commit of several SENDs (migrations 0013, 0021): one row (how many
-- messages) if it sent them all, none if it wrote nothing. Params: the messages (JSON rows),
-- their bodies (one bytea), enqueued_at, catalog version.
SELECT n FROM sb_send_direct_many(%s::jsonb, %s::bytea, %s, %s) n WHERE n IS NOT NULL

-- name: peer_and_pending
-- Does the conversation have messages waiting in the transmission queue, and the peer
-- endpoint if it exists. Params: handle, conversation_id, is_initiator.
SELECT EXISTS(SELECT 1 FROM sb_transmission_queue WHERE handle = p.h), e.conv_order,
    e.handle, e.conversation_id, e.is_initiator, e.group_id, e.queue_id, e.service,
    e.far_service, e.far_broker_instance, e.contract, e.state, e.priority, e.send_seq,
    e.receive_seq, e.lifetime_expires, e.timer_at, e.created_at, e.encryption
FROM (SELECT %s::text AS h, %s::text AS c, %s::integer AS i) p
LEFT JOIN sb_endpoints e ON e.conversation_id = p.c AND e.is_initiator = p.i

-- name: insert_transmission
INSERT INTO sb_transmission_queue(handle, conversation_id, is_initiator, from_service,
    to_service, to_broker_instance, contract, message_type, msn, body, priority, message_id,
    enqueued_at, transmission_status, is_end_of_conversation, trace_context)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)

-- name: last_inbound_msn
-- The highest sequence number queued for the conversation. Params: group, handle.
SELECT max(msn) FROM sb_messages WHERE group_id = %s AND handle = %s AND status != 3
    AND is_timer = 0

-- name: has_transmissions
SELECT 1 FROM sb_transmission_queue WHERE handle = %s LIMIT 1

-- name: keep_closed_endpoint
-- Params: closed_at, delete_after, lifetime_expires (never), handle.
UPDATE sb_endpoints SET state = 'CD', closed_at = %s, delete_after = %s, timer_at = NULL,
    lifetime_expires = %s
WHERE handle = %s

-- name: clear_timer
UPDATE sb_endpoints SET timer_at = NULL WHERE handle = %s

-- name: set_timer
UPDATE sb_endpoints SET timer_at = %s WHERE handle = %s

-- name: move_endpoint
UPDATE sb_endpoints SET group_id = %s WHERE handle = %s

-- name: move_messages
-- Params: new group, old group, handle.
UPDATE sb_messages SET group_id = %s WHERE group_id = %s AND handle = %s

-- name: delete_pending_transmissions
DELETE FROM sb_transmission_queue WHERE handle = %s

-- name: drop_pending_transmissions
-- Params: placeholder type, handle.
UPDATE sb_transmission_queue SET message_type = %s, body = ''::bytea,
    is_end_of_conversation = 0
WHERE handle = %s

-- name: due_timers
-- Timers due by now whose conversations this transaction locked (fired once: other hosts
-- skip them, and find them cleared after).
SELECT * FROM sb_due_timers(%s)

-- name: due_lifetimes
SELECT * FROM sb_due_lifetimes(%s)

-- name: set_lifetime
UPDATE sb_endpoints SET lifetime_expires = %s WHERE handle = %s

-- name: delete_expired_endpoints
DELETE FROM sb_endpoints WHERE delete_after IS NOT NULL AND delete_after <= %s

-- name: next_deadline
SELECT min(t) FROM (
    SELECT min(timer_at) AS t FROM sb_endpoints WHERE timer_at IS NOT NULL
    UNION ALL SELECT min(lifetime_expires) FROM sb_endpoints WHERE state NOT IN ('ER', 'CD')
    UNION ALL SELECT min(delete_after) FROM sb_endpoints WHERE delete_after IS NOT NULL) d

-- name: waiting_transmissions
SELECT * FROM sb_waiting_transmissions()

-- name: delete_transmission
DELETE FROM sb_transmission_queue WHERE tq_id = %s

-- name: set_transmission_status
UPDATE sb_transmission_queue SET transmission_status = %s WHERE tq_id = %s

-- name: any_transmission
SELECT 1 FROM sb_transmission_queue LIMIT 1

-- name: queue_of_group
SELECT queue_id FROM sb_endpoints WHERE group_id = %s LIMIT 1

-- ---------------------------------------------------------------------------------------
-- The engine's reads outside transactions (engine/engine.py) and poison bookkeeping
-- ---------------------------------------------------------------------------------------

-- name: peek
-- A queue's rows in RECEIVE order, a page of them. Params: queue, limit (-1: all), offset.
SELECT status, priority, queuing_order, group_id, handle, msn, service, contract,
    message_type, validation, body, message_id, enqueued_at, trace_context FROM sb_messages
WHERE queue_id = %s
ORDER BY priority DESC, queuing_order LIMIT nullif(%s::bigint, -1) OFFSET %s

-- name: application_relation
-- The name of the application table or view called so (exactly, else folded to lower case
-- as PostgreSQL folds unquoted names) in the current schema, not the broker's own.
SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace,
    (SELECT %s::text AS name) p
WHERE n.nspname = current_schema() AND c.relkind IN ('r', 'v', 'm', 'p', 'f')
    AND c.relname IN (p.name, lower(p.name)) AND left(c.relname, 3) <> 'sb_'
ORDER BY c.relname = p.name DESC LIMIT 1

-- name: count_rollback
-- A rolled-back RECEIVE of the queue: its count, whether poison handling is on, its status.
UPDATE sb_queues SET rollback_count = rollback_count + 1 WHERE queue_id = %s
RETURNING rollback_count, poison_message_handling, status

-- name: disable_queue
UPDATE sb_queues SET status = 0 WHERE queue_id = %s

-- name: reset_rollback_count
UPDATE sb_queues SET rollback_count = 0 WHERE rollback_count != 0 AND queue_id = %s

-- name: retain_received
UPDATE sb_messages SET status = 0 WHERE queuing_order = %s AND message_id = %s

-- ---------------------------------------------------------------------------------------
-- Views (engine/views.py)
-- ---------------------------------------------------------------------------------------

-- name: view_conversation_endpoints
SELECT * FROM conversation_endpoints

-- name: view_conversation_groups
SELECT * FROM conversation_groups

-- name: view_transmission_queue
SELECT * FROM transmission_queue

-- name: view_service_queues
SELECT * FROM service_queues

-- name: view_services
SELECT * FROM services

-- name: view_contracts
SELECT * FROM contracts

-- name: view_message_types
SELECT * FROM message_types

-- name: view_routes
SELECT * FROM routes

-- name: view_conversation_priorities
SELECT * FROM conversation_priorities

-- name: view_dm_broker_queue_monitors
SELECT * FROM dm_broker_queue_monitors

-- name: view_dm_broker_activated_tasks
SELECT * FROM dm_broker_activated_tasks

-- name: view_queue_stats
SELECT * FROM queue_stats

-- ---------------------------------------------------------------------------------------
-- Event notifications: one shared dialog per subscription (engine/events.py)
-- ---------------------------------------------------------------------------------------

-- name: lock_shared_dialog
-- A write first: it locks the row, so concurrent senders on one key serialize.
UPDATE sb_shared_dialogs SET handle = handle WHERE key = %s

-- name: shared_dialog
SELECT handle FROM sb_shared_dialogs WHERE key = %s

-- name: save_shared_dialog
INSERT INTO sb_shared_dialogs(key, handle) VALUES (%s, %s)
ON CONFLICT (key) DO UPDATE SET handle = excluded.handle

-- name: forget_shared_dialog
DELETE FROM sb_shared_dialogs WHERE handle = %s

-- name: endpoint_state
SELECT state FROM sb_endpoints WHERE handle = %s

-- ---------------------------------------------------------------------------------------
-- Activation (services/activation)
-- ---------------------------------------------------------------------------------------

-- name: queue_look
-- (any ready message, any ready message in a group no transaction holds). Params: queue,
-- groups locked but not visible yet (always empty on PostgreSQL: locks show at once).
-- The held groups are read before the rows (migrations/0012_queue_look_locks_first.sql).
SELECT * FROM sb_queue_look(%s::integer, sb_texts(%s::jsonb))

-- name: save_activated_task
INSERT INTO sb_activated_tasks(session_id, task_id, queue_id, procedure_name, started_at,
    thread_name)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (session_id, task_id) DO UPDATE SET queue_id = excluded.queue_id,
    procedure_name = excluded.procedure_name, started_at = excluded.started_at,
    thread_name = excluded.thread_name

-- name: drop_activated_task
DELETE FROM sb_activated_tasks WHERE session_id = %s AND task_id = %s

-- name: save_monitor
INSERT INTO sb_queue_monitors(session_id, queue_id, activation_kind, state,
    last_empty_rowset_time, last_activated_time, tasks_waiting, tasks_running, tasks_started,
    tasks_failed, notifications_sent, last_error)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (session_id, queue_id) DO UPDATE SET activation_kind = excluded.activation_kind,
    state = excluded.state, last_empty_rowset_time = excluded.last_empty_rowset_time,
    last_activated_time = excluded.last_activated_time,
    tasks_waiting = excluded.tasks_waiting, tasks_running = excluded.tasks_running,
    tasks_started = excluded.tasks_started, tasks_failed = excluded.tasks_failed,
    notifications_sent = excluded.notifications_sent, last_error = excluded.last_error

-- name: drop_session_monitors
DELETE FROM sb_queue_monitors WHERE session_id = %s

-- name: claim_activation_notice
-- May this session send the queue's QUEUE_ACTIVATION notification now? Yes (one row
-- written) if no session sent one yet, this session sent the last, or the last is
-- older than monitor_interval (a monitor of another broker on the database then
-- waits, as one broker's does). Params: queue, session, now, now - monitor_interval.
INSERT INTO sb_activation_notices(queue_id, session_id, notified_at) VALUES (%s, %s, %s)
ON CONFLICT (queue_id) DO UPDATE SET session_id = excluded.session_id,
    notified_at = excluded.notified_at
WHERE sb_activation_notices.session_id = excluded.session_id
    OR sb_activation_notices.notified_at <= %s

-- name: drop_monitor
DELETE FROM sb_queue_monitors WHERE session_id = %s AND queue_id = %s

-- ---------------------------------------------------------------------------------------
-- The transmitter (services/network/transmitter.py)
-- ---------------------------------------------------------------------------------------

-- name: transmission_ids_after
-- Every id above a watermark as one comma-separated text.
SELECT string_agg(tq_id::text, ',') FROM sb_transmission_queue WHERE tq_id > %s

-- name: transmissions_by_ids
-- Rows to hand over (ids: an array) as one JSON text and their bodies as one bytea, in the
-- same order, each body's length last in its JSON row.
SELECT json_agg(json_build_array('tq', t.tq_id, t.conversation_id, t.is_initiator, t.msn,
        t.from_service, t.to_service, t.to_broker_instance, t.contract, t.message_type,
        t.priority, t.enqueued_at, t.transmission_status, e.lifetime_expires,
        e.far_broker_instance, t.trace_context, length(t.body)) ORDER BY t.tq_id)::text,
    string_agg(t.body, ''::bytea ORDER BY t.tq_id)
FROM sb_transmission_queue t JOIN sb_endpoints e ON e.handle = t.handle
WHERE t.tq_id = ANY (sb_bigints(%s::jsonb))

-- name: outbox
SELECT id, conversation_id, from_initiator, msn, from_service, to_service, target_instance,
    contract, message_type, priority, enqueued_at, transmission_status, expires_at,
    origin_instance, body
FROM sb_net_outbox

-- name: handles_of_transmissions
SELECT string_agg(DISTINCT handle, ',') FROM sb_transmission_queue
WHERE tq_id = ANY (sb_bigints(%s::jsonb))

-- name: delete_transmissions
DELETE FROM sb_transmission_queue WHERE tq_id = ANY (sb_bigints(%s::jsonb))

-- name: delete_outbox_message
DELETE FROM sb_net_outbox WHERE id = %s

-- name: delete_closed_initiators
-- Closed initiators (of the handles, an array) whose last message is acknowledged.
DELETE FROM sb_endpoints e WHERE e.handle = ANY (sb_texts(%s::jsonb))
    AND e.state = 'CD' AND e.is_initiator = 1
    AND NOT EXISTS (SELECT 1 FROM sb_transmission_queue t WHERE t.handle = e.handle)
RETURNING e.conversation_id

-- name: set_outbox_status
UPDATE sb_net_outbox SET transmission_status = %s WHERE id = %s

-- name: delete_orphan_transmissions
DELETE FROM sb_transmission_queue t
WHERE NOT EXISTS (SELECT 1 FROM sb_endpoints e WHERE e.handle = t.handle)

-- name: delete_expired_inbound
DELETE FROM sb_net_inbound WHERE delete_after <= %s

-- ---------------------------------------------------------------------------------------
-- The broker endpoint (services/network/config.py)
-- ---------------------------------------------------------------------------------------

-- name: endpoint_options
SELECT options FROM sb_net_endpoint WHERE id = 1

-- name: save_endpoint_options
INSERT INTO sb_net_endpoint(id, options) VALUES (1, %s)
ON CONFLICT (id) DO UPDATE SET options = excluded.options

-- name: drop_endpoint_row
DELETE FROM sb_net_endpoint

-- name: endpoint_owner
-- Read when claiming the endpoint: the row is locked, so two brokers starting at once on
-- two hosts claim it one after the other, the second seeing the first one's claim.
SELECT owner_session FROM sb_net_endpoint FOR UPDATE

-- name: session_exists
SELECT 1 FROM sb_sessions WHERE session_id = %s

-- name: set_endpoint_owner
UPDATE sb_net_endpoint SET owner_session = %s

-- name: release_endpoint
UPDATE sb_net_endpoint SET owner_session = NULL, listening_port = NULL
WHERE owner_session = %s

-- name: set_listening_port
UPDATE sb_net_endpoint SET listening_port = %s

-- ---------------------------------------------------------------------------------------
-- The receiver (services/network/receiver.py, batch.py)
-- ---------------------------------------------------------------------------------------

-- name: endpoint_receive_seq
-- Params: conversation_id, is_initiator.
SELECT receive_seq FROM sb_endpoints WHERE conversation_id = %s AND is_initiator = %s

-- name: inbound_next_seq
SELECT next_seq FROM sb_net_inbound WHERE conversation_id = %s AND from_initiator = %s

-- name: inbound_state
SELECT next_seq, refused FROM sb_net_inbound WHERE conversation_id = %s
    AND from_initiator = %s

-- name: save_inbound
-- Params: conversation_id, from_initiator, next_seq, refused, delete_after.
INSERT INTO sb_net_inbound(conversation_id, from_initiator, next_seq, refused, delete_after)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (conversation_id, from_initiator) DO UPDATE SET
    next_seq = greatest(sb_net_inbound.next_seq, excluded.next_seq),
    delete_after = excluded.delete_after

-- name: set_far_broker_instance
UPDATE sb_endpoints SET far_broker_instance = %s WHERE handle = %s

-- name: set_receive_seq
UPDATE sb_endpoints SET receive_seq = %s WHERE handle = %s

-- name: insert_outbox
INSERT INTO sb_net_outbox(conversation_id, from_initiator, msn, from_service, to_service,
    contract, message_type, body, priority, origin_instance, target_instance, expires_at,
    enqueued_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)

-- name: outbox_bytes
SELECT coalesce(sum(length(body)), 0) FROM sb_net_outbox

-- name: endpoints_by_keys
-- The endpoints of a JSON array of [conversation_id, is_initiator] pairs as one JSON text,
-- their conversations locked first (the receiver's batch changes them).
SELECT sb_endpoints_by_keys(%s::jsonb)

-- name: set_receive_seqs
-- Params: a JSON array of [handle, receive_seq].
UPDATE sb_endpoints e SET receive_seq = (j.value ->> 1)::bigint
FROM jsonb_array_elements(%s::jsonb) j WHERE e.handle = j.value ->> 0

-- name: insert_messages_json
-- Many queue rows in one statement: a JSON array of rows (the columns of insert_message
-- without the body, then the body's 1-based offset and length) and all bodies as one bytea.
INSERT INTO sb_messages(queue_id, group_id, handle, conv_order, msn, status, priority,
    is_timer, message_type, validation, body, message_id, service, contract, enqueued_at,
    trace_context)
SELECT (j.value ->> 0)::integer, j.value ->> 1, j.value ->> 2, (j.value ->> 3)::bigint,
    (j.value ->> 4)::bigint, (j.value ->> 5)::integer, (j.value ->> 6)::integer,
    (j.value ->> 7)::integer, j.value ->> 8, j.value ->> 9,
    substr(p.bodies, (j.value ->> 15)::integer, (j.value ->> 16)::integer),
    j.value ->> 10, j.value ->> 11, j.value ->> 12, (j.value ->> 13)::double precision,
    j.value ->> 14
FROM (SELECT %s::jsonb AS rows, %s::bytea AS bodies) p,
    jsonb_array_elements(p.rows) WITH ORDINALITY j(value, n)
ORDER BY j.n

-- name: ready_groups
-- Groups of a queue with ready messages that no transaction holds: (group, priority,
-- queuing order, conversation) of each group's next message. Params: queue id.
SELECT DISTINCT ON (m.group_id) m.group_id, m.priority, m.queuing_order, e.conversation_id
FROM sb_messages m JOIN sb_endpoints e ON e.handle = m.handle
WHERE m.queue_id = %s AND m.status = 1
    AND NOT EXISTS (SELECT 1 FROM sb_held_groups h WHERE h.key = sb_key(m.group_id))
ORDER BY m.group_id, m.priority DESC, m.conv_order, m.is_timer DESC, m.msn

-- name: view_dm_broker_sessions
SELECT * FROM dm_broker_sessions

-- name: view_dm_broker_streams
SELECT * FROM dm_broker_streams

-- name: message_type_definition
SELECT validation, json_schema FROM sb_message_types WHERE name = %s

-- name: queue_metrics
-- Per queue (pgmq's metrics()): messages ready to receive, in groups a transaction holds,
-- not yet complete, and retained. One read, no lock taken.
SELECT q.name,
    count(m.*) FILTER (WHERE m.status = 1 AND h.key IS NULL),
    count(m.*) FILTER (WHERE m.status = 1 AND h.key IS NOT NULL),
    count(m.*) FILTER (WHERE m.status = 2),
    count(m.*) FILTER (WHERE m.status IN (0, 3))
FROM sb_queues q
LEFT JOIN sb_messages m ON m.queue_id = q.queue_id
LEFT JOIN (SELECT DISTINCT key FROM sb_held_groups) h ON h.key = sb_key(m.group_id)
GROUP BY q.queue_id, q.name ORDER BY q.name

-- ------------------------------------------------------------------------------------------
-- Spark streams on broker queues (docs/stream.md, engine/streams.py). A stream reads a queue by
-- stream position (stream_pos, migrations/0004_stream_positions.sql: numbered by the
-- stream's reader in the order rows became visible, where queuing_order is taken at INSERT),
-- one priority level at a time (the index sb_messages_stream). Received rows are deleted
-- (no sb_consumed) and counted in the queue's counter slots.

-- name: queue_by_name
SELECT queue_id, status, retention, activation_status FROM sb_queues WHERE name = %s

-- name: stream_holder
-- The live claim on a queue: (session, pid, host, queue name), or no row.
SELECT c.session_id, s.pid, s.host, q.name FROM sb_stream_sources c
JOIN sb_sessions s ON s.session_id = c.session_id
JOIN sb_queues q ON q.queue_id = c.queue_id WHERE c.queue_id = %s

-- name: stream_claim
-- Take the queue for a reader (its token, its session) unless another reader holds it (one
-- row changed: taken).
INSERT INTO sb_stream_sources(queue_id, session_id, claim_token, claimed_at)
VALUES (%(queue)s, %(session)s, %(token)s, %(now)s)
ON CONFLICT (queue_id) DO UPDATE SET session_id = excluded.session_id,
    claim_token = excluded.claim_token, claimed_at = excluded.claimed_at
WHERE sb_stream_sources.session_id IS NULL
    OR sb_stream_sources.claim_token = excluded.claim_token

-- name: stream_release
UPDATE sb_stream_sources SET session_id = NULL, claim_token = NULL
WHERE queue_id = %(queue)s AND claim_token = %(token)s

-- name: stream_positions
SELECT committed, planned FROM sb_stream_sources WHERE queue_id = %s

-- name: stream_horizon
-- The highest stream position given in the queue: a row numbered later gets a higher one.
-- Trigger.AvailableNow's end, read once the stream has numbered every committed ready row.
SELECT numbered FROM sb_stream_sources WHERE queue_id = %(queue)s

-- name: queue_locked_groups
-- Conversation groups of the queue that a transaction holds (a RECEIVE in progress); two
-- groups whose keys collide count once, a group of another queue sharing a key counts.
SELECT count(DISTINCT h.key) FROM sb_held_groups h
WHERE h.key IN (SELECT sb_key(e.group_id) FROM sb_endpoints e WHERE e.queue_id = %s)

-- name: stream_number
-- Give stream positions to the queue's committed ready rows that have none, at most :limit
-- (SQLite needs no such step: its positions are given in commit order). NULL: the reader
-- lost its claim.
SELECT sb_stream_number(%(queue)s, %(token)s, %(limit)s)

-- name: level_positions
-- Positions of one priority level's ready messages after :after (and through :through),
-- in position order, at most :limit (-1: all).
SELECT m.stream_pos FROM sb_messages m
WHERE m.queue_id = %(queue)s AND m.priority = %(priority)s AND m.stream_pos > %(after)s
    AND m.stream_pos <= %(through)s AND m.status = 1
ORDER BY m.stream_pos LIMIT nullif(%(limit)s::bigint, -1)

-- name: level_rows
-- One priority level's ready messages in (:after, :through], in position order: the columns
-- of a stream row, then the position.
SELECT m.handle, m.group_id, m.msn, m.message_type, m.service, m.body, m.enqueued_at,
    m.priority, m.stream_pos FROM sb_messages m
WHERE m.queue_id = %(queue)s AND m.priority = %(priority)s AND m.stream_pos > %(after)s
    AND m.stream_pos <= %(through)s AND m.status = 1
ORDER BY m.stream_pos

-- name: snapshot_positions
-- level_positions for a batch read (spark.read): every ready message, numbered by a stream
-- or not, by queuing order (a snapshot needs no positions that hold across runs).
SELECT m.queuing_order FROM sb_messages m
WHERE m.queue_id = %(queue)s AND m.status = 1 AND m.priority = %(priority)s
    AND m.queuing_order > %(after)s AND m.queuing_order <= %(through)s
ORDER BY m.queuing_order LIMIT nullif(%(limit)s::bigint, -1)

-- name: snapshot_rows
-- level_rows for a batch read, by queuing order.
SELECT m.handle, m.group_id, m.msn, m.message_type, m.service, m.body, m.enqueued_at,
    m.priority, m.queuing_order FROM sb_messages m
WHERE m.queue_id = %(queue)s AND m.status = 1 AND m.priority = %(priority)s
    AND m.queuing_order > %(after)s AND m.queuing_order <= %(through)s
ORDER BY m.queuing_order

-- name: stream_plan
-- Remember the highest end offset handed to Spark (never lowered).
UPDATE sb_stream_sources SET planned = %(planned)s
WHERE queue_id = %(queue)s AND claim_token = %(token)s AND session_id IS NOT NULL
    AND planned < %(planned)s

-- name: range_ended_conversations
-- Conversations whose EndDialog or Error is among the messages being received.
SELECT DISTINCT m.handle FROM sb_messages m
WHERE m.queue_id = %(queue)s AND m.stream_pos > %(after)s AND m.stream_pos <= %(through)s
    AND m.status = 1 AND m.message_type IN (%(end_dialog)s, %(error)s)

-- name: range_count_received
-- Count the messages a stream receives (deleted next, by range_delete) in this backend's
-- counter slot; they are locked first, so that an END CONVERSATION removing them meanwhile
-- waits (and then finds them gone) rather than counting them too.
WITH taken AS (
    SELECT 1 FROM sb_messages m
    WHERE m.queue_id = %(queue)s AND m.stream_pos > %(after)s
        AND m.stream_pos <= %(through)s AND m.status = 1
    FOR UPDATE)
INSERT INTO sb_queue_counters(queue_id, slot, received)
SELECT %(queue)s, mod(pg_backend_pid(), 16), count(*) FROM taken HAVING count(*) > 0
ON CONFLICT (queue_id, slot) DO UPDATE SET
    received = sb_queue_counters.received + excluded.received

-- name: range_delete
DELETE FROM sb_messages
WHERE queue_id = %(queue)s AND stream_pos > %(after)s AND stream_pos <= %(through)s
    AND status = 1

-- name: range_retain
-- A queue with RETENTION keeps received messages, as status 0.
UPDATE sb_messages SET status = 0
WHERE queue_id = %(queue)s AND stream_pos > %(after)s AND stream_pos <= %(through)s
    AND status = 1

-- name: stream_commit
UPDATE sb_stream_sources SET committed = %(through)s
WHERE queue_id = %(queue)s AND claim_token = %(token)s AND session_id IS NOT NULL
    AND committed < %(through)s

-- name: stream_owned
SELECT 1 FROM sb_stream_sources
WHERE queue_id = %(queue)s AND claim_token = %(token)s AND session_id IS NOT NULL

-- name: sink_last_batch
SELECT batch_id FROM sb_stream_sinks WHERE query_id = %s

-- name: sink_advance
-- Record a micro-batch as sent; no row changes when it (or a later one) already was.
INSERT INTO sb_stream_sinks(query_id, batch_id, committed_at) VALUES (%s, %s, %s)
ON CONFLICT (query_id) DO UPDATE SET batch_id = excluded.batch_id,
    committed_at = excluded.committed_at
WHERE excluded.batch_id > sb_stream_sinks.batch_id

-- name: sink_conversations
-- The conversations of these keys (a JSON array) and their initiator endpoint's state.
SELECT k.conversation_key, k.handle, e.state FROM sb_stream_conversations k
LEFT JOIN sb_endpoints e ON e.handle = k.handle
WHERE k.from_service = %s AND k.to_service = %s AND k.contract = %s
    AND k.conversation_key = ANY (sb_texts(%s::jsonb))

-- name: sink_map
-- Map keys to conversations ({key: handle} as JSON): new keys, and keys whose conversation
-- ended (their old handle must still be the mapped one, else another writer got there).
INSERT INTO sb_stream_conversations(from_service, to_service, contract, conversation_key,
    handle)
SELECT %(from_service)s, %(to_service)s, %(contract)s, j.key, j.value
FROM jsonb_each_text(%(map)s::jsonb) j
ON CONFLICT (from_service, to_service, contract, conversation_key) DO UPDATE
SET handle = excluded.handle
WHERE sb_stream_conversations.handle = ANY (sb_texts(%(replaced)s::jsonb))
