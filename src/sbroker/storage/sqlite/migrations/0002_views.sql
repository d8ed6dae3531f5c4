-- The catalog views (docs/concepts.md, "Views"), queryable with plain SQL.
CREATE VIEW conversation_endpoints AS
SELECT e.handle AS conversation_handle, e.conversation_id, e.is_initiator,
       e.group_id AS conversation_group_id, q.name AS queue_name,
       e.service AS service_name, e.far_service, e.far_broker_instance,
       e.contract AS service_contract_name, e.state,
       CASE e.state WHEN 'SO' THEN 'STARTED_OUTBOUND' WHEN 'SI' THEN 'STARTED_INBOUND'
            WHEN 'CO' THEN 'CONVERSING' WHEN 'DI' THEN 'DISCONNECTED_INBOUND'
            WHEN 'DO' THEN 'DISCONNECTED_OUTBOUND' WHEN 'ER' THEN 'ERROR' ELSE 'CLOSED' END
            AS state_desc,
       e.priority, e.send_seq AS send_sequence, e.receive_seq AS receive_sequence,
       e.lifetime_expires AS lifetime, e.timer_at AS dialog_timer, e.created_at
FROM sb_endpoints e JOIN sb_queues q ON q.queue_id = e.queue_id;

CREATE VIEW conversation_groups AS
SELECT DISTINCT e.group_id AS conversation_group_id, q.name AS queue_name,
       l.owner IS NOT NULL AS is_locked
FROM sb_endpoints e JOIN sb_queues q ON q.queue_id = e.queue_id
LEFT JOIN sb_group_locks l ON l.group_id = e.group_id;

CREATE VIEW transmission_queue AS
SELECT t.handle AS conversation_handle, t.to_service AS to_service_name,
       t.to_broker_instance, t.from_service AS from_service_name,
       t.contract AS service_contract_name, t.message_type AS message_type_name,
       t.msn AS message_sequence_number, t.body AS message_body, t.priority,
       t.enqueued_at AS enqueue_time, t.transmission_status,
       t.is_end_of_conversation, t.message_id
FROM sb_transmission_queue t;

CREATE VIEW service_queues AS
SELECT name, status AS is_receive_enabled, status AS is_enqueue_enabled,
       retention AS is_retention_enabled, activation_status AS is_activation_enabled,
       activation_procedure, max_queue_readers, execute_as,
       poison_message_handling AS is_poison_message_handling_enabled
FROM sb_queues;

CREATE VIEW services AS
SELECT s.name, q.name AS queue_name,
       (SELECT group_concat(contract, ',') FROM sb_service_contracts c
         WHERE c.service_id = s.service_id) AS contracts
FROM sb_services s JOIN sb_queues q ON q.queue_id = s.queue_id;

CREATE VIEW contracts AS
SELECT c.name, m.message_type AS message_type_name, m.sent_by
FROM sb_contracts c LEFT JOIN sb_contract_message_types m ON m.contract = c.name;

CREATE VIEW message_types AS
SELECT name, validation, json_schema FROM sb_message_types;

CREATE VIEW routes AS
SELECT name, service_name AS remote_service_name, broker_instance, address,
       expires_at AS lifetime FROM sb_routes;

CREATE VIEW conversation_priorities AS
SELECT name, contract AS service_contract_name, local_service AS local_service_name,
       remote_service AS remote_service_name, priority_level AS priority
FROM sb_priorities;
