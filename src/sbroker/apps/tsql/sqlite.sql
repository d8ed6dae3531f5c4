-- name: procedure_definition
SELECT definition FROM sb_tsql_procedures WHERE name = ?

-- name: procedure_create
INSERT INTO sb_tsql_procedures(name, definition, modified) VALUES (?, ?, ?)

-- name: procedure_alter
INSERT INTO sb_tsql_procedures(name, definition, modified) VALUES (?, ?, ?)
ON CONFLICT(name) DO UPDATE SET definition = excluded.definition, modified = excluded.modified

-- name: procedure_drop
DELETE FROM sb_tsql_procedures WHERE name = ?

-- name: scope_identity
SELECT last_insert_rowid() WHERE :table IS NOT NULL

-- name: sys_service_queues
SELECT name AS object_id, name, is_receive_enabled, is_enqueue_enabled, is_retention_enabled,
       is_activation_enabled, activation_procedure, max_queue_readers, execute_as,
       is_poison_message_handling_enabled
FROM service_queues

-- name: sys_dm_broker_activated_tasks
SELECT session_id * 100000 + task_id AS spid, 1 AS database_id, queue_name AS queue_id,
       procedure_name, task_id, queue_name, started_at, host, pid
FROM dm_broker_activated_tasks

-- name: relation_exists
SELECT 1 FROM sqlite_master WHERE type IN ('table', 'view') AND lower(name) = lower(:name)
UNION ALL
SELECT 1 FROM sb_tsql_procedures WHERE name = lower(:name)

-- name: sys_service_message_types
SELECT name, name AS message_type_name, validation FROM message_types

-- name: sys_service_contracts
SELECT DISTINCT name FROM contracts

-- name: table_variable_tables
-- The tables that hold table variables (tsql_tv_<spid>_<n>), of every session.
SELECT name FROM sqlite_master WHERE type = 'table' AND name LIKE 'tsql\_tv\_%' ESCAPE '\'

-- name: text_columns
-- The columns of a table with a character type (a T-SQL + on two of them concatenates).
SELECT lower(name) FROM pragma_table_info(:table)
WHERE upper(type) LIKE '%CHAR%' OR upper(type) LIKE '%TEXT%' OR upper(type) LIKE '%CLOB%'

-- name: sys_service_broker_endpoints
-- The broker endpoint (docs/network.md) with SQL Server's columns: one row when there is one.
SELECT COALESCE(options ->> '$.name', 'ServiceBrokerEndpoint') AS name, 1 AS endpoint_id,
       'TCP' AS protocol_desc, 'SERVICE_BROKER' AS type_desc,
       UPPER(COALESCE(options ->> '$.state', 'started')) AS state_desc,
       options ->> '$.message_forwarding' AS is_message_forwarding_enabled,
       options ->> '$.message_forward_size' AS message_forwarding_size,
       'CERTIFICATE' AS connection_auth_desc,
       CASE WHEN options ->> '$.encryption' = 'disabled' THEN 'NONE' ELSE 'AES' END
           AS encryption_algorithm_desc
FROM sb_net_endpoint

-- name: sys_tcp_endpoints
SELECT COALESCE(options ->> '$.name', 'ServiceBrokerEndpoint') AS name, 1 AS endpoint_id,
       'SERVICE_BROKER' AS type_desc,
       UPPER(COALESCE(options ->> '$.state', 'started')) AS state_desc,
       CASE WHEN options ->> '$.port' = 0 THEN listening_port ELSE options ->> '$.port' END
           AS port,
       CASE WHEN options ->> '$.port' = 0 THEN 1 ELSE 0 END AS is_dynamic_port,
       options ->> '$.host' AS ip_address
FROM sb_net_endpoint

-- name: queue_rows
-- A queue's messages with SQL Server's queue columns (SELECT ... FROM a queue, docs/tsql.md
-- "Querying a queue"): read, never received or locked. :queue_id is bound to the queue's id.
-- Received messages not yet deleted (sb_consumed) have left the queue.
SELECT m.status, m.priority, m.queuing_order, g.group_id AS conversation_group_id,
       m.handle AS conversation_handle, m.msn AS message_sequence_number,
       m.service AS service_name, NULL AS service_id, m.contract AS service_contract_name,
       NULL AS service_contract_id, m.message_type AS message_type_name,
       NULL AS message_type_id, m.validation, m.body AS message_body,
       strftime('%Y-%m-%d %H:%M:%f', m.enqueued_at, 'unixepoch') AS message_enqueue_time
FROM sb_messages AS m JOIN sb_endpoints AS g ON g.conv_order = m.conv_order
WHERE m.queue_id = :queue_id
  AND NOT EXISTS (SELECT 1 FROM sb_consumed AS c WHERE c.queuing_order = m.queuing_order)
