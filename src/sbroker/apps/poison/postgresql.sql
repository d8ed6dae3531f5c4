-- Poison-message handling's statements (tables: storage/postgres/migrations/0001), for
-- PostgreSQL.

-- name: incidents_of
SELECT count(*) FROM poison_message_details WHERE conversation_handle = %s

-- name: record_incident
INSERT INTO poison_message_details(queue_name, conversation_handle, message_id,
    message_type_name, error, occurred_at)
VALUES (%s, %s, %s, %s, %s, %s)

-- name: last_incident_error
SELECT error FROM poison_message_details WHERE conversation_handle = %s
ORDER BY incident_id DESC LIMIT 1

-- name: record_removal
-- Returns the record id.
INSERT INTO poison_messages(queue_name, conversation_handle, conversation_group_id,
    message_id, message_sequence_number, message_type_name, service_name,
    service_contract_name, priority, message_body, attempts, last_error, policy, state,
    removed_at, resend_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
RETURNING record_id

-- name: forget_incidents
DELETE FROM poison_message_details WHERE conversation_handle = %s

-- name: list_messages
-- Params: queue, queue, state, state (NULL: any).
SELECT * FROM poison_messages
WHERE (%s::text IS NULL OR queue_name = %s) AND (%s::text IS NULL OR state = %s)
ORDER BY record_id

-- name: list_incidents
SELECT * FROM poison_message_details WHERE (%s::text IS NULL OR queue_name = %s)
ORDER BY incident_id

-- name: mark_redriven
-- Params: now, record id.
UPDATE poison_messages SET state = 'redriven', redriven_at = %s, resend_at = NULL,
    redrive_error = NULL
WHERE record_id = %s AND state IN ('logged', 'notified', 'parked')

-- name: removal
SELECT state, conversation_handle, message_type_name, message_body FROM poison_messages
WHERE record_id = %s

-- name: peer_handle
-- The other endpoint of a conversation, when it is in this database.
SELECT p.conversation_handle FROM conversation_endpoints e
JOIN conversation_endpoints p ON p.conversation_id = e.conversation_id
    AND p.is_initiator != e.is_initiator
WHERE e.conversation_handle = %s

-- name: parked_due
SELECT record_id FROM poison_messages
WHERE state = 'parked' AND resend_at IS NOT NULL AND resend_at <= %s ORDER BY resend_at

-- name: redrive_failed
UPDATE poison_messages SET resend_at = NULL, redrive_error = %s WHERE record_id = %s

-- name: next_parked
SELECT min(resend_at) FROM poison_messages WHERE state = 'parked' AND resend_at IS NOT NULL
