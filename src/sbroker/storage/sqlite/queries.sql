-- The engine's statements on SQLite, by name (see sbroker/storage/queries.py).
-- ``live`` rows: a received message stays in sb_messages until a sweep, marked in
-- sb_consumed (sweeper.py); every reader skips marked rows with
--   NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)

-- name: catalog_version
SELECT value FROM sb_meta WHERE key = 'catalog_version'

-- name: register_session
INSERT INTO sb_sessions(pid, start_token, host, opened_at) VALUES (?, ?, ?, ?)

-- name: other_sessions
SELECT session_id, pid, start_token, host FROM sb_sessions WHERE session_id != ?

-- name: session_process
SELECT pid, start_token, host FROM sb_sessions WHERE session_id = ?

-- name: drop_sessions
-- Dead (or closing) sessions (a JSON array); a trigger drops their locks and activation rows.
DELETE FROM sb_sessions WHERE session_id IN (SELECT value FROM json_each(?))

-- name: new_database
-- The broker instance of a new database, and its options.
INSERT INTO sb_meta(key, value) VALUES ('broker_instance', ?), ('catalog_version', '0'),
    ('honor_broker_priority', '0')

-- ---------------------------------------------------------------------------------------
-- RECEIVE: finding and locking a conversation group (locks.py)
-- ---------------------------------------------------------------------------------------

-- name: receive_candidate
-- The first ready row in RECEIVE order that is neither in a group another transaction holds
-- (a lock row, or one of the JSON array of groups held in the writer's memory) nor already
-- received by this transaction (the JSON array of queuing orders); filtered in SQL, so rows
-- of held groups (a backlog, or this transaction's earlier groups) cost no Python loop.
-- None either on a queue a live stream reads.
-- Params: queue, queue, queue, owner, received orders (JSON), groups held in memory (JSON).
SELECT g.group_id FROM sb_messages m CROSS JOIN sb_endpoints g ON g.conv_order = m.conv_order
WHERE m.queue_id = ? AND m.status = 1
    AND NOT EXISTS (SELECT 1 FROM sb_stream_sources s WHERE s.queue_id = ?
                    AND s.session_id IS NOT NULL)
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
    AND g.group_id NOT IN (SELECT group_id FROM sb_group_locks WHERE queue_id = ? AND owner != ?)
    AND m.queuing_order NOT IN (SELECT value FROM json_each(?))
    AND g.group_id NOT IN (SELECT value FROM json_each(?))
ORDER BY m.priority DESC, m.queuing_order LIMIT 1

-- name: receive_fetch
-- A locked group's ready rows in RECEIVE order (the Message fields). Params: group, limit.
SELECT m.status, m.priority, m.queuing_order, ?1, m.handle, m.msn, m.service,
    m.contract, m.message_type, m.validation, m.body, m.message_id, m.enqueued_at,
    m.trace_context
FROM sb_messages m
WHERE m.group_key = (SELECT group_key FROM sb_endpoints WHERE group_id = ?1 LIMIT 1)
    AND m.status = 1
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
ORDER BY m.priority DESC, m.conv_order, m.is_timer DESC, m.msn LIMIT ?2

-- name: receive_fetch_handle
-- The same, for one conversation of the group. Params: group, handle, limit.
SELECT m.status, m.priority, m.queuing_order, ?1, m.handle, m.msn, m.service,
    m.contract, m.message_type, m.validation, m.body, m.message_id, m.enqueued_at,
    m.trace_context
FROM sb_messages m
WHERE m.group_key = (SELECT group_key FROM sb_endpoints WHERE group_id = ?1 LIMIT 1)
    AND m.status = 1 AND m.handle = ?2
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
ORDER BY m.priority DESC, m.conv_order, m.is_timer DESC, m.msn LIMIT ?3

-- name: receive_take_next
-- The common RECEIVE in one statement: nothing received yet in this transaction and no
-- group held in the writer's memory by another one, so the only exclusions are lock rows.
-- A queue a live stream reads yields nothing (the caller says why: stream_holder).
-- Params: queue, queue, owner, limit.
SELECT m.status, m.priority, m.queuing_order, g.group_id, m.handle, m.msn, m.service,
    m.contract, m.message_type, m.validation, m.body, m.message_id, m.enqueued_at,
    m.trace_context
FROM sb_messages m CROSS JOIN sb_endpoints g ON g.conv_order = m.conv_order
WHERE m.group_key = (
        SELECT n.group_key FROM sb_messages n CROSS JOIN sb_endpoints k
            ON k.conv_order = n.conv_order
        WHERE n.queue_id = ? AND n.status = 1
            AND NOT EXISTS (SELECT 1 FROM sb_stream_sources s WHERE s.queue_id = ?
                            AND s.session_id IS NOT NULL)
            AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = n.queuing_order)
            AND NOT EXISTS (SELECT 1 FROM sb_group_locks l WHERE l.group_id = k.group_id
                            AND l.owner != ?)
        ORDER BY n.priority DESC, n.queuing_order LIMIT 1)
    AND m.status = 1
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
ORDER BY m.priority DESC, m.conv_order, m.is_timer DESC, m.msn LIMIT ?

-- name: group_lock_owner
SELECT owner FROM sb_group_locks WHERE group_id = ?

-- name: insert_group_lock
INSERT OR IGNORE INTO sb_group_locks(group_id, queue_id, owner, session_id, acquired_at)
VALUES (?, ?, ?, ?, ?)

-- name: release_group_locks
DELETE FROM sb_group_locks WHERE owner = ?

-- name: queue_locked_by_others
SELECT 1 FROM sb_group_locks WHERE queue_id = ? AND owner != ? LIMIT 1

-- name: probe_queue
-- (ready rows in groups no other transaction holds, groups other transactions hold).
-- Params: queue, owner, queue, owner.
SELECT EXISTS(SELECT 1 FROM sb_messages m WHERE m.queue_id = ? AND m.status = 1
        AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
        AND NOT EXISTS (SELECT 1 FROM sb_group_locks l
                        WHERE l.group_id = (SELECT group_id FROM sb_endpoints
                                            WHERE conv_order = m.conv_order)
                        AND l.owner != ?)),
    EXISTS(SELECT 1 FROM sb_group_locks WHERE queue_id = ? AND owner != ?)

-- name: probe_group
-- (ready rows in the group, the group held by another transaction). Params: group, group, owner.
SELECT EXISTS(SELECT 1 FROM sb_messages m
        WHERE group_key = (SELECT group_key FROM sb_endpoints WHERE group_id = ? LIMIT 1)
        AND status = 1
        AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)),
    EXISTS(SELECT 1 FROM sb_group_locks WHERE group_id = ? AND owner != ?)

-- name: probe_group_handle
-- The same for one conversation. Params: group, handle, group, owner.
SELECT EXISTS(SELECT 1 FROM sb_messages m
        WHERE group_key = (SELECT group_key FROM sb_endpoints WHERE group_id = ? LIMIT 1)
        AND status = 1
        AND handle = ?
        AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)),
    EXISTS(SELECT 1 FROM sb_group_locks WHERE group_id = ? AND owner != ?)

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
UPDATE sb_meta SET value = CAST(value AS INTEGER) + 1 WHERE key = 'catalog_version'

-- name: set_option
UPDATE sb_meta SET value = ? WHERE key = ?

-- name: exists_message_type
SELECT 1 FROM sb_message_types WHERE name = ?

-- name: exists_contract
SELECT 1 FROM sb_contracts WHERE name = ?

-- name: exists_queue
SELECT 1 FROM sb_queues WHERE name = ?

-- name: exists_service
SELECT 1 FROM sb_services WHERE name = ?

-- name: exists_route
SELECT 1 FROM sb_routes WHERE name = ?

-- name: exists_priority
SELECT 1 FROM sb_priorities WHERE name = ?

-- name: exists_notification
SELECT 1 FROM sb_event_notifications WHERE name = ?

-- name: delete_message_type
DELETE FROM sb_message_types WHERE name = ?

-- name: delete_contract
DELETE FROM sb_contracts WHERE name = ?

-- name: delete_queue
DELETE FROM sb_queues WHERE name = ?

-- name: delete_service
DELETE FROM sb_services WHERE name = ?

-- name: delete_route
DELETE FROM sb_routes WHERE name = ?

-- name: delete_priority
DELETE FROM sb_priorities WHERE name = ?

-- name: delete_notification
DELETE FROM sb_event_notifications WHERE name = ?

-- name: insert_message_type
INSERT INTO sb_message_types(name, validation, json_schema) VALUES (?, ?, ?)

-- name: contract_using_message_type
SELECT contract FROM sb_contract_message_types WHERE message_type = ?

-- name: insert_contract
INSERT INTO sb_contracts(name) VALUES (?)

-- name: insert_contract_message_type
INSERT INTO sb_contract_message_types(contract, message_type, sent_by) VALUES (?, ?, ?)

-- name: service_using_contract
SELECT s.name FROM sb_service_contracts c JOIN sb_services s USING (service_id)
WHERE c.contract = ?

-- name: insert_queue
INSERT INTO sb_queues(name) VALUES (?)

-- name: queue_options
SELECT status, retention, activation_defined, activation_status, activation_procedure,
    max_queue_readers, execute_as, poison_message_handling, rollback_count
FROM sb_queues WHERE name = ?

-- name: update_queue_options
UPDATE sb_queues SET status = ?, retention = ?, activation_defined = ?,
    activation_status = ?, activation_procedure = ?, max_queue_readers = ?, execute_as = ?,
    poison_message_handling = ?, rollback_count = ?
WHERE name = ?

-- name: service_using_queue
SELECT s.name FROM sb_services s JOIN sb_queues q USING (queue_id) WHERE q.name = ?

-- name: delete_queue_notifications
DELETE FROM sb_event_notifications
WHERE queue_id = (SELECT queue_id FROM sb_queues WHERE name = ?)

-- name: queue_id_by_name
SELECT queue_id FROM sb_queues WHERE name = ?

-- name: insert_service
INSERT INTO sb_services(name, queue_id) VALUES (?, ?) RETURNING service_id

-- name: insert_service_contract
INSERT INTO sb_service_contracts(service_id, contract) VALUES (?, ?)

-- name: insert_route
INSERT INTO sb_routes(name, service_name, broker_instance, address, expires_at)
VALUES (?, ?, ?, ?, ?)

-- name: insert_priority
INSERT INTO sb_priorities(name, contract, local_service, remote_service, priority_level)
VALUES (?, ?, ?, ?, ?)

-- name: insert_notification
INSERT INTO sb_event_notifications(name, queue_id, event, to_service) VALUES (?, ?, ?, ?)

-- name: update_message_type
-- ALTER MESSAGE TYPE. Params: validation, json_schema, name.
UPDATE sb_message_types SET validation = ?, json_schema = ? WHERE name = ?

-- name: service_conversation
-- A conversation endpoint of a local service (ALTER SERVICE ON QUEUE refuses then).
SELECT handle FROM sb_endpoints WHERE service = ? LIMIT 1

-- name: update_service_queue
-- ALTER SERVICE ... ON QUEUE. Params: queue name, service name.
UPDATE sb_services SET queue_id = (SELECT queue_id FROM sb_queues WHERE name = ?)
WHERE name = ?

-- name: add_service_contract
-- ALTER SERVICE ... (ADD CONTRACT). Params: contract, service name.
INSERT INTO sb_service_contracts(service_id, contract)
SELECT service_id, ? FROM sb_services WHERE name = ?

-- name: drop_service_contract
-- ALTER SERVICE ... (DROP CONTRACT). Params: service name, contract.
DELETE FROM sb_service_contracts
WHERE service_id = (SELECT service_id FROM sb_services WHERE name = ?) AND contract = ?

-- name: service_has_contract
SELECT 1 FROM sb_service_contracts c JOIN sb_services s USING (service_id)
WHERE s.name = ? AND c.contract = ?

-- ---------------------------------------------------------------------------------------
-- Conversations at commit (engine/endpoints.py, dialogs.py, lifecycle.py)
-- Endpoint rows are read as the fields of engine.endpoints.Endpoint, in that order.
-- ---------------------------------------------------------------------------------------

-- name: lock_conversations
-- A commit that changes conversations locks them first on PostgreSQL (two hosts must not
-- number one conversation at once); here the group-commit writer already runs one commit
-- at a time, so there is nothing to lock. Returns the catalog version (the commit checks
-- it). Params: the conversation ids (JSON).
SELECT value FROM sb_meta WHERE key = 'catalog_version' AND ? IS NOT NULL

-- name: endpoint_by_handle
SELECT conv_order, handle, conversation_id, is_initiator, group_id, queue_id, service,
    far_service, far_broker_instance, contract, state, priority, send_seq, receive_seq,
    lifetime_expires, timer_at, created_at, encryption FROM sb_endpoints WHERE handle = ?

-- name: endpoint_by_conversation
-- Params: conversation_id, is_initiator.
SELECT conv_order, handle, conversation_id, is_initiator, group_id, queue_id, service,
    far_service, far_broker_instance, contract, state, priority, send_seq, receive_seq,
    lifetime_expires, timer_at, created_at, encryption FROM sb_endpoints WHERE
    conversation_id = ? AND is_initiator = ?

-- name: insert_endpoint
INSERT INTO sb_endpoints(handle, conversation_id, is_initiator, group_id, queue_id, service,
    far_service, far_broker_instance, contract, state, priority, send_seq, receive_seq,
    lifetime_expires, timer_at, created_at, encryption) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?,
    ?, ?, ?, ?, ?, ?, ?, ?) RETURNING conv_order

-- name: save_endpoint_state
UPDATE sb_endpoints SET state = ?, send_seq = ?, receive_seq = ? WHERE handle = ?

-- name: insert_message
-- The group's number is the receiving endpoint's (conv_order, ?4): a lookup by rowid, not by
-- the group's UUID (?2, which the row carries for other backends).
INSERT INTO sb_messages(queue_id, group_key, handle, conv_order, msn, status, priority,
    is_timer, message_type, validation, body, message_id, service, contract, enqueued_at,
    trace_context)
VALUES (?1, (SELECT group_key FROM sb_endpoints WHERE conv_order = ?4),
    ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16)

-- name: delete_endpoint_transmissions
DELETE FROM sb_transmission_queue WHERE handle = ?

-- name: delete_endpoint
DELETE FROM sb_endpoints WHERE handle = ?

-- name: count_leaving_messages
-- The queue's counters take the rows a delete removes: received ones (retained, or marked in
-- sb_consumed and not swept yet) and unreceived ready ones. Params: queue, group, handle.
INSERT INTO sb_queue_counters(queue_id, received, removed)
SELECT ?, count(*) FILTER (WHERE status = 0 OR c.queuing_order IS NOT NULL),
    count(*) FILTER (WHERE status = 1 AND c.queuing_order IS NULL)
FROM sb_messages m LEFT JOIN sb_consumed c ON c.queuing_order = m.queuing_order
WHERE m.group_key = (SELECT group_key FROM sb_endpoints WHERE group_id = ? LIMIT 1)
    AND m.handle = ? AND m.status IN (0, 1)
ON CONFLICT(queue_id) DO UPDATE SET received = received + excluded.received,
    removed = removed + excluded.removed

-- name: delete_conversation_messages
DELETE FROM sb_messages
WHERE group_key = (SELECT group_key FROM sb_endpoints WHERE group_id = ? LIMIT 1) AND handle = ?

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
    p.is_initiator = 1 - s.is_initiator WHERE s.handle = ?

-- name: senders
-- The same for a JSON array of handles.
SELECT s.conv_order, s.handle, s.conversation_id, s.is_initiator, s.group_id, s.queue_id,
    s.service, s.far_service, s.far_broker_instance, s.contract, s.state, s.priority,
    s.send_seq, s.receive_seq, s.lifetime_expires, s.timer_at, s.created_at, s.encryption,
    EXISTS(SELECT 1 FROM sb_transmission_queue t WHERE t.handle = s.handle), p.conv_order,
    p.handle, p.conversation_id, p.is_initiator, p.group_id, p.queue_id, p.service,
    p.far_service, p.far_broker_instance, p.contract, p.state, p.priority, p.send_seq,
    p.receive_seq, p.lifetime_expires, p.timer_at, p.created_at, p.encryption FROM
    sb_endpoints s LEFT JOIN sb_endpoints p ON p.conversation_id = s.conversation_id AND
    p.is_initiator = 1 - s.is_initiator WHERE s.handle IN (SELECT value FROM json_each(?))

-- name: ready_senders
-- The senders (a JSON array of their rowids) whose SENDs a commit can number in memory from
-- their first message: both ends conversing, nothing waiting in the transmission queue; only
-- what the queue row needs. Found by rowid (a third of the cost of the handle index), so
-- the caller checks the handle.
SELECT s.handle, s.conv_order, s.send_seq, s.queue_id, s.far_service,
    s.far_broker_instance, p.queue_id, p.group_id, p.handle, p.conv_order, p.priority,
    p.service, p.contract
FROM sb_endpoints s JOIN sb_endpoints p
    ON p.conversation_id = s.conversation_id AND p.is_initiator = 1 - s.is_initiator
WHERE s.conv_order IN (SELECT value FROM json_each(?)) AND s.state = 'CO' AND p.state = 'CO'
    AND NOT EXISTS(SELECT 1 FROM sb_transmission_queue t WHERE t.handle = s.handle)

-- name: set_send_seq
-- By rowid: no index lookup. Params: send_seq, conv_order.
UPDATE sb_endpoints SET send_seq = ? WHERE conv_order = ?

-- name: send_direct
-- A commit's SEND on a conversation whose local peer conversed before: the message goes into
-- the peer's queue numbered by the sender's send_seq plus its place among the commit's
-- messages on that conversation (0, 1, ...) if both ends still converse, nothing waits in the
-- transmission queue and the catalog is the one the commit checked (its version): one row
-- inserted, else none (then the ordinary path). The sender and its peer are found by rowid
-- (the unary + keeps the planner off the conversation index), the sender's handle guards
-- against a reused rowid.
-- Params: place, message_type, validation, body, message_id, enqueued_at, trace_context,
-- sender rowid, sender handle, peer rowid, catalog version. The caller then runs
-- bump_send_seq.
INSERT INTO sb_messages(queue_id, group_key, handle, conv_order, msn, status, priority,
    is_timer, message_type, validation, body, message_id, service, contract, enqueued_at,
    trace_context)
SELECT p.queue_id, p.group_key, p.handle, p.conv_order, s.send_seq + ?, 1, p.priority, 0, ?, ?,
    ?, ?, p.service, p.contract, ?, ?
FROM sb_endpoints s, sb_endpoints p
WHERE s.conv_order = ? AND s.handle = ? AND p.conv_order = ? AND s.state = 'CO'
    AND p.state = 'CO' AND +p.conversation_id = s.conversation_id
    AND +p.is_initiator = 1 - s.is_initiator
    AND NOT EXISTS (SELECT 1 FROM sb_transmission_queue t WHERE t.handle = s.handle)
    AND (SELECT value FROM sb_meta WHERE key = 'catalog_version') = ?

-- name: unsend_direct
-- send_direct's rows when some of a commit's did not go in: the newest ones (the single
-- writer inserted them last, AUTOINCREMENT gave them the highest positions). Params: how many.
DELETE FROM sb_messages WHERE queuing_order IN (
    SELECT queuing_order FROM sb_messages ORDER BY queuing_order DESC LIMIT ?)

-- name: bump_send_seq
-- After send_direct: the sender's next sequence number, by rowid. Params: how many messages
-- went, conv_order.
UPDATE sb_endpoints SET send_seq = send_seq + ? WHERE conv_order = ?

-- name: peer_and_pending
-- Does the conversation have messages waiting in the transmission queue (they must go
-- first), and the peer endpoint if it exists. Params: handle, conversation_id, is_initiator.
SELECT EXISTS(SELECT 1 FROM sb_transmission_queue WHERE handle = ?), e.conv_order, e.handle,
    e.conversation_id, e.is_initiator, e.group_id, e.queue_id, e.service, e.far_service,
    e.far_broker_instance, e.contract, e.state, e.priority, e.send_seq, e.receive_seq,
    e.lifetime_expires, e.timer_at, e.created_at, e.encryption FROM (SELECT 1) LEFT JOIN
    sb_endpoints e ON e.conversation_id = ? AND e.is_initiator = ?

-- name: insert_transmission
INSERT INTO sb_transmission_queue(handle, conversation_id, is_initiator, from_service,
    to_service, to_broker_instance, contract, message_type, msn, body, priority, message_id,
    enqueued_at, transmission_status, is_end_of_conversation, trace_context)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: last_inbound_msn
-- The highest sequence number queued for the conversation. Params: group, handle.
SELECT max(msn) FROM sb_messages m
WHERE group_key = (SELECT group_key FROM sb_endpoints WHERE group_id = ? LIMIT 1) AND handle = ?
    AND status != 3
    AND is_timer = 0
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)

-- name: has_transmissions
SELECT 1 FROM sb_transmission_queue WHERE handle = ? LIMIT 1

-- name: keep_closed_endpoint
-- A closed target kept for the anti-replay window. Params: closed_at, delete_after,
-- lifetime_expires (never), handle.
UPDATE sb_endpoints SET state = 'CD', closed_at = ?, delete_after = ?, timer_at = NULL,
    lifetime_expires = ?
WHERE handle = ?

-- name: clear_timer
UPDATE sb_endpoints SET timer_at = NULL WHERE handle = ?

-- name: set_timer
UPDATE sb_endpoints SET timer_at = ? WHERE handle = ?

-- name: move_endpoint
UPDATE sb_endpoints SET group_id = ? WHERE handle = ?

-- name: move_messages
-- Already done: on SQLite the trigger sb_endpoints_group_moved (migration 10) moved the
-- conversation's queue rows with move_endpoint. Params: new group, old group, handle.
SELECT ?, ?, ? WHERE 0

-- name: delete_pending_transmissions
DELETE FROM sb_transmission_queue WHERE handle = ?

-- name: drop_pending_transmissions
-- Toward a remote peer unsent messages become empty placeholders, so that the sequence
-- numbers the peer expects have no gap. Params: placeholder type, handle.
UPDATE sb_transmission_queue SET message_type = ?, body = x'', is_end_of_conversation = 0
WHERE handle = ?

-- name: due_timers
SELECT conv_order, handle, conversation_id, is_initiator, group_id, queue_id, service,
    far_service, far_broker_instance, contract, state, priority, send_seq, receive_seq,
    lifetime_expires, timer_at, created_at, encryption FROM sb_endpoints WHERE timer_at IS
    NOT NULL AND timer_at <= ?

-- name: due_lifetimes
SELECT conv_order, handle, conversation_id, is_initiator, group_id, queue_id, service,
    far_service, far_broker_instance, contract, state, priority, send_seq, receive_seq,
    lifetime_expires, timer_at, created_at, encryption FROM sb_endpoints WHERE
    lifetime_expires <= ? AND state NOT IN ('ER', 'CD')

-- name: set_lifetime
UPDATE sb_endpoints SET lifetime_expires = ? WHERE handle = ?

-- name: delete_expired_endpoints
DELETE FROM sb_endpoints WHERE delete_after IS NOT NULL AND delete_after <= ?

-- name: next_deadline
SELECT min(t) FROM (
    SELECT min(timer_at) AS t FROM sb_endpoints WHERE timer_at IS NOT NULL
    UNION ALL SELECT min(lifetime_expires) FROM sb_endpoints WHERE state NOT IN ('ER', 'CD')
    UNION ALL SELECT min(delete_after) FROM sb_endpoints WHERE delete_after IS NOT NULL)

-- name: waiting_transmissions
SELECT tq_id, handle, msn, message_type, body, message_id, trace_context
FROM sb_transmission_queue ORDER BY handle, msn

-- name: delete_transmission
DELETE FROM sb_transmission_queue WHERE tq_id = ?

-- name: set_transmission_status
UPDATE sb_transmission_queue SET transmission_status = ? WHERE tq_id = ?

-- name: any_transmission
SELECT 1 FROM sb_transmission_queue LIMIT 1

-- name: queue_of_group
SELECT queue_id FROM sb_endpoints WHERE group_id = ? LIMIT 1

-- ---------------------------------------------------------------------------------------
-- The engine's reads outside transactions (engine/engine.py) and poison bookkeeping
-- ---------------------------------------------------------------------------------------

-- name: peek
-- A queue's live rows in RECEIVE order, a page of them. Params: queue, limit (-1: all),
-- offset.
SELECT m.status, m.priority, m.queuing_order, g.group_id, m.handle, m.msn, m.service,
    m.contract, m.message_type, m.validation, m.body, m.message_id, m.enqueued_at,
    m.trace_context
FROM sb_messages m CROSS JOIN sb_endpoints g ON g.conv_order = m.conv_order
WHERE m.queue_id = ?
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
ORDER BY m.priority DESC, m.queuing_order LIMIT ? OFFSET ?

-- name: application_relation
-- Whether an application table or view of this name exists (not the broker's own).
SELECT 1 FROM sqlite_schema WHERE type IN ('table', 'view') AND name = ?
    AND substr(name, 1, 3) != 'sb_' AND substr(name, 1, 7) != 'sqlite_'

-- name: count_rollback
-- A rolled-back RECEIVE of the queue: its count, whether poison handling is on, its status.
UPDATE sb_queues SET rollback_count = rollback_count + 1 WHERE queue_id = ?
RETURNING rollback_count, poison_message_handling, status

-- name: disable_queue
UPDATE sb_queues SET status = 0 WHERE queue_id = ?

-- name: reset_rollback_count
-- A committed RECEIVE resets the count of its queue (no write when it is 0 already).
UPDATE sb_queues SET rollback_count = 0 WHERE rollback_count != 0 AND queue_id = ?

-- name: retain_received
-- A received message of a queue with retention stays, as status 0. Params: order, id.
UPDATE sb_messages SET status = 0 WHERE queuing_order = ? AND message_id = ?

-- ---------------------------------------------------------------------------------------
-- Views (engine/views.py): each view of docs/concepts.md is also a view in the database
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
-- A write first: it takes the write lock, so concurrent senders on one key serialize.
UPDATE sb_shared_dialogs SET handle = handle WHERE key = ?

-- name: shared_dialog
SELECT handle FROM sb_shared_dialogs WHERE key = ?

-- name: save_shared_dialog
INSERT OR REPLACE INTO sb_shared_dialogs(key, handle) VALUES (?, ?)

-- name: forget_shared_dialog
DELETE FROM sb_shared_dialogs WHERE handle = ?

-- name: endpoint_state
SELECT state FROM sb_endpoints WHERE handle = ?

-- ---------------------------------------------------------------------------------------
-- Activation (services/activation): monitor looks, and the instance-wide DMV rows
-- ---------------------------------------------------------------------------------------

-- name: queue_look
-- (any ready message, any ready message in a group no transaction holds). Params: queue,
-- groups locked in the writer's memory only (JSON).
SELECT EXISTS (SELECT 1 FROM sb_messages m WHERE m.queue_id = ?1 AND m.status = 1
        AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)),
    EXISTS (SELECT 1 FROM sb_messages m WHERE m.queue_id = ?1 AND m.status = 1
        AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
        AND (SELECT group_id FROM sb_endpoints g WHERE g.conv_order = m.conv_order) NOT IN (
            SELECT group_id FROM sb_group_locks UNION ALL SELECT value FROM json_each(?2)))

-- name: save_activated_task
INSERT OR REPLACE INTO sb_activated_tasks(session_id, task_id, queue_id, procedure_name,
    started_at, thread_name)
VALUES (?, ?, ?, ?, ?, ?)

-- name: drop_activated_task
DELETE FROM sb_activated_tasks WHERE session_id = ? AND task_id = ?

-- name: save_monitor
INSERT OR REPLACE INTO sb_queue_monitors(session_id, queue_id, activation_kind, state,
    last_empty_rowset_time, last_activated_time, tasks_waiting, tasks_running, tasks_started,
    tasks_failed, notifications_sent, last_error)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: drop_session_monitors
DELETE FROM sb_queue_monitors WHERE session_id = ?

-- name: claim_activation_notice
-- May this session send the queue's QUEUE_ACTIVATION notification now? Yes (one row
-- written) if no session sent one yet, this session sent the last, or the last is
-- older than monitor_interval (a monitor of another broker on the database then
-- waits, as one broker's does). Params: queue, session, now, now - monitor_interval.
INSERT INTO sb_activation_notices(queue_id, session_id, notified_at) VALUES (?, ?, ?)
ON CONFLICT (queue_id) DO UPDATE SET session_id = excluded.session_id,
    notified_at = excluded.notified_at
WHERE sb_activation_notices.session_id = excluded.session_id
    OR sb_activation_notices.notified_at <= ?

-- name: drop_monitor
DELETE FROM sb_queue_monitors WHERE session_id = ? AND queue_id = ?

-- ---------------------------------------------------------------------------------------
-- The transmitter (services/network/transmitter.py)
-- ---------------------------------------------------------------------------------------

-- name: transmission_ids_after
-- Every id above a watermark as one row (group_concat): stepping through thousands of rows
-- would hand the GIL over at each step. The (handle, msn) index covers tq_id.
SELECT group_concat(tq_id) FROM sb_transmission_queue INDEXED BY sb_tq_handle WHERE tq_id > ?

-- name: transmissions_by_ids
-- Rows to hand over (ids: a JSON array) as one JSON value and their bodies as one blob (in
-- the same order, each body's length last in its JSON row): one step for a chunk instead of
-- one per row, and no hex to encode and decode.
SELECT json_group_array(json_array('tq', t.tq_id, t.conversation_id, t.is_initiator, t.msn,
        t.from_service, t.to_service, t.to_broker_instance, t.contract, t.message_type,
        t.priority, t.enqueued_at, t.transmission_status, e.lifetime_expires,
        e.far_broker_instance, t.trace_context, length(CAST(t.body AS BLOB)))),
    CAST(group_concat(t.body, x'') AS BLOB)
FROM sb_transmission_queue t CROSS JOIN sb_endpoints e ON e.handle = t.handle
WHERE t.tq_id IN (SELECT value FROM json_each(?))

-- name: outbox
SELECT id, conversation_id, from_initiator, msn, from_service, to_service, target_instance,
    contract, message_type, priority, enqueued_at, transmission_status, expires_at,
    origin_instance, body
FROM sb_net_outbox

-- name: handles_of_transmissions
SELECT group_concat(DISTINCT handle) FROM sb_transmission_queue
WHERE tq_id IN (SELECT value FROM json_each(?))

-- name: delete_transmissions
DELETE FROM sb_transmission_queue WHERE tq_id IN (SELECT value FROM json_each(?))

-- name: delete_outbox_message
DELETE FROM sb_net_outbox WHERE id = ?

-- name: delete_closed_initiators
-- Closed initiators (of the handles, a JSON array) whose last message is acknowledged.
DELETE FROM sb_endpoints WHERE handle IN (SELECT value FROM json_each(?))
    AND state = 'CD' AND is_initiator = 1
    AND NOT EXISTS (SELECT 1 FROM sb_transmission_queue t WHERE t.handle = sb_endpoints.handle)
RETURNING conversation_id

-- name: set_outbox_status
UPDATE sb_net_outbox SET transmission_status = ? WHERE id = ?

-- name: delete_orphan_transmissions
DELETE FROM sb_transmission_queue
WHERE NOT EXISTS (SELECT 1 FROM sb_endpoints e WHERE e.handle = sb_transmission_queue.handle)

-- name: delete_expired_inbound
DELETE FROM sb_net_inbound WHERE delete_after <= ?

-- ---------------------------------------------------------------------------------------
-- The broker endpoint (services/network/config.py)
-- ---------------------------------------------------------------------------------------

-- name: endpoint_options
SELECT options FROM sb_net_endpoint WHERE id = 1

-- name: save_endpoint_options
INSERT INTO sb_net_endpoint(id, options) VALUES (1, ?)
ON CONFLICT(id) DO UPDATE SET options = excluded.options

-- name: drop_endpoint_row
DELETE FROM sb_net_endpoint

-- name: endpoint_owner
SELECT owner_session FROM sb_net_endpoint

-- name: session_exists
SELECT 1 FROM sb_sessions WHERE session_id = ?

-- name: set_endpoint_owner
UPDATE sb_net_endpoint SET owner_session = ?

-- name: release_endpoint
UPDATE sb_net_endpoint SET owner_session = NULL, listening_port = NULL
WHERE owner_session = ?

-- name: set_listening_port
UPDATE sb_net_endpoint SET listening_port = ?

-- ---------------------------------------------------------------------------------------
-- The receiver (services/network/receiver.py, batch.py)
-- ---------------------------------------------------------------------------------------

-- name: endpoint_receive_seq
-- Params: conversation_id, is_initiator.
SELECT receive_seq FROM sb_endpoints WHERE conversation_id = ? AND is_initiator = ?

-- name: inbound_next_seq
SELECT next_seq FROM sb_net_inbound WHERE conversation_id = ? AND from_initiator = ?

-- name: inbound_state
SELECT next_seq, refused FROM sb_net_inbound WHERE conversation_id = ? AND from_initiator = ?

-- name: save_inbound
-- Params: conversation_id, from_initiator, next_seq, refused, delete_after.
INSERT INTO sb_net_inbound(conversation_id, from_initiator, next_seq, refused, delete_after)
VALUES (?, ?, ?, ?, ?)
ON CONFLICT DO UPDATE SET next_seq = max(next_seq, excluded.next_seq),
    delete_after = excluded.delete_after

-- name: set_far_broker_instance
UPDATE sb_endpoints SET far_broker_instance = ? WHERE handle = ?

-- name: set_receive_seq
UPDATE sb_endpoints SET receive_seq = ? WHERE handle = ?

-- name: insert_outbox
INSERT INTO sb_net_outbox(conversation_id, from_initiator, msn, from_service, to_service,
    contract, message_type, body, priority, origin_instance, target_instance, expires_at,
    enqueued_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)

-- name: outbox_bytes
SELECT coalesce(sum(length(body)), 0) FROM sb_net_outbox

-- name: endpoints_by_keys
-- The endpoints of a JSON array of [conversation_id, is_initiator] pairs, as one JSON value
-- (one step instead of one per row: the transport's loop decodes on another thread, and a
-- step per row can wait a switch interval for the GIL). REAL columns travel as quote(x)
-- text, exact, where JSON would round them to 15 digits.
SELECT json_group_array(json_array(e.conv_order, e.handle, e.conversation_id,
        e.is_initiator, e.group_id, e.queue_id, e.service, e.far_service,
        e.far_broker_instance, e.contract, e.state, e.priority, e.send_seq, e.receive_seq,
        quote(e.lifetime_expires), quote(e.timer_at), quote(e.created_at), e.encryption))
FROM json_each(?) j CROSS JOIN sb_endpoints e
    ON e.conversation_id = json_extract(j.value, '$[0]')
    AND e.is_initiator = json_extract(j.value, '$[1]')

-- name: set_receive_seqs
-- Params: a JSON array of [handle, receive_seq].
UPDATE sb_endpoints SET receive_seq = json_extract(j.value, '$[1]') FROM json_each(?) j
WHERE sb_endpoints.handle = json_extract(j.value, '$[0]')

-- name: insert_messages_json
-- Many queue rows in one statement: a JSON array of rows (the columns of insert_message
-- without the body, then the body's 1-based offset and length) and all bodies as one blob.
INSERT INTO sb_messages(queue_id, group_key, handle, conv_order, msn, status, priority,
    is_timer, message_type, validation, body, message_id, service, contract, enqueued_at,
    trace_context)
SELECT json_extract(j.value, '$[0]'),
    (SELECT group_key FROM sb_endpoints WHERE conv_order = json_extract(j.value, '$[3]')),
    json_extract(j.value, '$[2]'), json_extract(j.value, '$[3]'),
    json_extract(j.value, '$[4]'), json_extract(j.value, '$[5]'),
    json_extract(j.value, '$[6]'), json_extract(j.value, '$[7]'),
    json_extract(j.value, '$[8]'), json_extract(j.value, '$[9]'),
    CAST(substr(?2, json_extract(j.value, '$[15]'), json_extract(j.value, '$[16]')) AS BLOB),
    json_extract(j.value, '$[10]'), json_extract(j.value, '$[11]'),
    json_extract(j.value, '$[12]'), json_extract(j.value, '$[13]'),
    json_extract(j.value, '$[14]')
FROM json_each(?1) j

-- name: ready_groups
-- Unlocked groups of a queue with ready messages: (group, priority, queuing order,
-- conversation) of each group's next message. A skip scan over the groups that have messages
-- (index sb_messages_group), so it costs a few lookups per group, not a pass over every
-- queued message: a scheduler with thousands of tasks queued does not slow a take down.
-- Params: queue id.
WITH RECURSIVE g(id) AS (
    SELECT (SELECT min(group_key) FROM sb_messages)
    UNION ALL
    SELECT (SELECT min(group_key) FROM sb_messages WHERE group_key > g.id)
    FROM g WHERE g.id IS NOT NULL
)
SELECT e.group_id, m.priority, m.queuing_order, e.conversation_id
FROM g JOIN sb_messages m ON m.queuing_order = (
    SELECT queuing_order FROM sb_messages s WHERE group_key = g.id AND status = 1
        AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = s.queuing_order)
    ORDER BY priority DESC, conv_order, is_timer DESC, msn LIMIT 1)
JOIN sb_endpoints e ON e.handle = m.handle
WHERE g.id IS NOT NULL AND m.queue_id = ?
    AND NOT EXISTS (SELECT 1 FROM sb_group_locks l WHERE l.group_id = e.group_id)

-- name: view_dm_broker_sessions
SELECT * FROM dm_broker_sessions

-- name: view_dm_broker_streams
SELECT * FROM dm_broker_streams

-- name: message_type_definition
SELECT validation, json_schema FROM sb_message_types WHERE name = ?

-- name: queue_metrics
-- Per queue (pgmq's metrics()): messages ready to receive, in groups a transaction holds,
-- not yet complete, and retained. One read, no lock taken.
SELECT q.name,
    coalesce(sum(m.status = 1 AND l.group_id IS NULL), 0),
    coalesce(sum(m.status = 1 AND l.group_id IS NOT NULL), 0),
    coalesce(sum(m.status = 2), 0),
    coalesce(sum(m.status IN (0, 3)), 0)
FROM sb_queues q
LEFT JOIN sb_messages m ON m.queue_id = q.queue_id
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
LEFT JOIN sb_group_locks l
    ON l.group_id = (SELECT group_id FROM sb_endpoints g WHERE g.conv_order = m.conv_order)
GROUP BY q.queue_id ORDER BY q.name

-- ------------------------------------------------------------------------------------------
-- Spark streams on broker queues (docs/stream.md, engine/streams.py). A stream reads a queue by
-- position (queuing_order), one priority level at a time: the index sb_messages_ready
-- (queue_id, status, priority, queuing_order) then hands out each level's rows in position
-- order from any position on, whatever other queues hold.

-- name: queue_by_name
SELECT queue_id, status, retention, activation_status FROM sb_queues WHERE name = ?

-- name: stream_holder
-- The live claim on a queue: (session, pid, host, queue name), or no row.
SELECT c.session_id, s.pid, s.host, q.name FROM sb_stream_sources c
JOIN sb_sessions s ON s.session_id = c.session_id
JOIN sb_queues q ON q.queue_id = c.queue_id WHERE c.queue_id = ?

-- name: stream_claim
-- Take the queue for a reader (its token, its session) unless another reader holds it (one
-- row changed: taken).
INSERT INTO sb_stream_sources(queue_id, session_id, claim_token, claimed_at)
VALUES (:queue, :session, :token, :now)
ON CONFLICT(queue_id) DO UPDATE SET session_id = excluded.session_id,
    claim_token = excluded.claim_token, claimed_at = excluded.claimed_at
WHERE session_id IS NULL OR claim_token = excluded.claim_token

-- name: stream_release
UPDATE sb_stream_sources SET session_id = NULL, claim_token = NULL
WHERE queue_id = :queue AND claim_token = :token

-- name: stream_positions
SELECT committed, planned FROM sb_stream_sources WHERE queue_id = ?

-- name: stream_horizon
-- The highest position given so far (AUTOINCREMENT keeps it, over every queue): a message
-- committed later gets a higher one. Trigger.AvailableNow's end. (:queue is PostgreSQL's.)
SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = 'sb_messages'), 0)
WHERE :queue IS NOT NULL

-- name: queue_locked_groups
-- Conversation groups of the queue that a transaction holds (a RECEIVE in progress).
SELECT count(*) FROM sb_group_locks WHERE queue_id = ?

-- name: level_positions
-- Positions of one priority level's ready messages after :after (and through :through),
-- in position order, at most :limit.
SELECT m.queuing_order FROM sb_messages m
WHERE m.queue_id = :queue AND m.status = 1 AND m.priority = :priority
    AND m.queuing_order > :after AND m.queuing_order <= :through
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
ORDER BY m.queuing_order LIMIT :limit

-- name: level_rows
-- One priority level's ready messages in (:after, :through], in position order: the columns
-- of a stream row, then the position.
SELECT m.handle, (SELECT group_id FROM sb_endpoints g WHERE g.conv_order = m.conv_order),
    m.msn, m.message_type, m.service, m.body, m.enqueued_at,
    m.priority, m.queuing_order FROM sb_messages m
WHERE m.queue_id = :queue AND m.status = 1 AND m.priority = :priority
    AND m.queuing_order > :after AND m.queuing_order <= :through
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
ORDER BY m.queuing_order

-- name: snapshot_positions
-- level_positions for a batch read (the same here; PostgreSQL's stream positions cover only
-- what a stream numbered, so its batch read goes by queuing_order).
SELECT m.queuing_order FROM sb_messages m
WHERE m.queue_id = :queue AND m.status = 1 AND m.priority = :priority
    AND m.queuing_order > :after AND m.queuing_order <= :through
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
ORDER BY m.queuing_order LIMIT :limit

-- name: snapshot_rows
-- level_rows for a batch read (the same here).
SELECT m.handle, (SELECT group_id FROM sb_endpoints g WHERE g.conv_order = m.conv_order),
    m.msn, m.message_type, m.service, m.body, m.enqueued_at,
    m.priority, m.queuing_order FROM sb_messages m
WHERE m.queue_id = :queue AND m.status = 1 AND m.priority = :priority
    AND m.queuing_order > :after AND m.queuing_order <= :through
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
ORDER BY m.queuing_order

-- name: stream_plan
-- Remember the highest end offset handed to Spark (never lowered).
UPDATE sb_stream_sources SET planned = :planned
WHERE queue_id = :queue AND claim_token = :token AND session_id IS NOT NULL
    AND planned < :planned

-- name: range_ended_conversations
-- Conversations whose EndDialog or Error is among the messages being received.
SELECT DISTINCT m.handle FROM sb_messages m
WHERE m.queue_id = :queue AND m.status = 1 AND m.queuing_order > :after
    AND m.queuing_order <= :through AND m.message_type IN (:end_dialog, :error)
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)

-- name: range_count_received
-- Count the messages a stream receives (they leave sb_messages: see 0004_operations.sql).
INSERT INTO sb_queue_counters(queue_id, received)
SELECT :queue, count(*) FROM sb_messages m
WHERE m.queue_id = :queue AND m.status = 1 AND m.queuing_order > :after
    AND m.queuing_order <= :through
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = m.queuing_order)
ON CONFLICT(queue_id) DO UPDATE SET received = received + excluded.received

-- name: range_delete
DELETE FROM sb_messages
WHERE queue_id = :queue AND status = 1 AND queuing_order > :after
    AND queuing_order <= :through
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = sb_messages.queuing_order)

-- name: range_retain
-- A queue with RETENTION keeps received messages, as status 0.
UPDATE sb_messages SET status = 0
WHERE queue_id = :queue AND status = 1 AND queuing_order > :after
    AND queuing_order <= :through
    AND NOT EXISTS (SELECT 1 FROM sb_consumed c WHERE c.queuing_order = sb_messages.queuing_order)

-- name: stream_commit
UPDATE sb_stream_sources SET committed = :through
WHERE queue_id = :queue AND claim_token = :token AND session_id IS NOT NULL
    AND committed < :through

-- name: stream_owned
SELECT 1 FROM sb_stream_sources
WHERE queue_id = :queue AND claim_token = :token AND session_id IS NOT NULL

-- name: stream_number
-- Nothing to number here: queuing_order is given under the single writer, so positions
-- become visible in their order (PostgreSQL numbers rows as they become visible: see its
-- queries.sql; :limit is for it). One row (0) while the reader holds its claim, else none.
SELECT 0 FROM sb_stream_sources
WHERE queue_id = :queue AND claim_token = :token AND session_id IS NOT NULL

-- name: sink_last_batch
SELECT batch_id FROM sb_stream_sinks WHERE query_id = ?

-- name: sink_advance
-- Record a micro-batch as sent; no row changes when it (or a later one) already was.
INSERT INTO sb_stream_sinks(query_id, batch_id, committed_at) VALUES (?, ?, ?)
ON CONFLICT(query_id) DO UPDATE SET batch_id = excluded.batch_id,
    committed_at = excluded.committed_at
WHERE excluded.batch_id > batch_id

-- name: sink_conversations
-- The conversations of these keys (a JSON array) and their initiator endpoint's state.
SELECT k.conversation_key, k.handle, e.state FROM sb_stream_conversations k
LEFT JOIN sb_endpoints e ON e.handle = k.handle
WHERE k.from_service = ? AND k.to_service = ? AND k.contract = ?
    AND k.conversation_key IN (SELECT value FROM json_each(?))

-- name: sink_map
-- Map keys to conversations ({key: handle} as JSON): new keys, and keys whose conversation
-- ended (their old handle must still be the mapped one, else another writer got there).
INSERT INTO sb_stream_conversations(from_service, to_service, contract, conversation_key,
    handle)
SELECT :from_service, :to_service, :contract, j.key, j.value FROM json_each(:map) j WHERE true
ON CONFLICT(from_service, to_service, contract, conversation_key) DO UPDATE
SET handle = excluded.handle
WHERE handle IN (SELECT value FROM json_each(:replaced))
