-- name: procedure_definition
SELECT definition FROM sb_tsql_procedures WHERE name = ?

-- name: procedure_create
INSERT INTO sb_tsql_procedures(name, definition, modified) VALUES (?, ?, ?)

-- name: procedure_alter
INSERT INTO sb_tsql_procedures(name, definition, modified) VALUES (?, ?, ?)
ON CONFLICT (name) DO UPDATE SET definition = excluded.definition, modified = excluded.modified

-- name: procedure_drop
DELETE FROM sb_tsql_procedures WHERE name = ?

-- name: scope_identity
SELECT currval(pg_get_serial_sequence(:table, a.attname))
FROM pg_attribute a WHERE a.attrelid = to_regclass(:table) AND a.attidentity <> ''
  AND a.attnum > 0

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
SELECT 1 FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace s ON s.oid = c.relnamespace
WHERE c.relkind IN ('r', 'v', 'p', 'm') AND lower(c.relname) = lower(:name)
  AND s.nspname = ANY (current_schemas(false))
UNION ALL
SELECT 1 FROM sb_tsql_procedures WHERE name = lower(:name)

-- name: sys_service_message_types
SELECT name, name AS message_type_name, validation FROM message_types

-- name: sys_service_contracts
SELECT DISTINCT name FROM contracts

-- name: table_variable_tables
-- The tables that hold table variables (tsql_tv_<spid>_<n>), of every session.
SELECT c.relname FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace s ON s.oid = c.relnamespace
WHERE c.relkind = 'r' AND c.relname LIKE 'tsql\_tv\_%' AND s.nspname = current_schema()

-- name: text_columns
-- The columns of a table with a character type (a T-SQL + on two of them concatenates).
SELECT lower(column_name) FROM information_schema.columns
WHERE table_schema = current_schema() AND lower(table_name) = lower(:table)
  AND data_type IN ('text', 'character varying', 'character')

-- name: sys_service_broker_endpoints
-- The broker endpoint (docs/network.md) with SQL Server's columns: one row when there is one.
SELECT COALESCE(CAST(options AS JSON) ->> 'name', 'ServiceBrokerEndpoint') AS name,
       1 AS endpoint_id, 'TCP' AS protocol_desc, 'SERVICE_BROKER' AS type_desc,
       UPPER(COALESCE(CAST(options AS JSON) ->> 'state', 'started')) AS state_desc,
       CASE WHEN CAST(options AS JSON) ->> 'message_forwarding' = 'true' THEN 1 ELSE 0 END
           AS is_message_forwarding_enabled,
       CAST(CAST(options AS JSON) ->> 'message_forward_size' AS INT) AS message_forwarding_size,
       'CERTIFICATE' AS connection_auth_desc,
       CASE WHEN CAST(options AS JSON) ->> 'encryption' = 'disabled' THEN 'NONE' ELSE 'AES' END
           AS encryption_algorithm_desc
FROM sb_net_endpoint

-- name: sys_tcp_endpoints
SELECT COALESCE(CAST(options AS JSON) ->> 'name', 'ServiceBrokerEndpoint') AS name,
       1 AS endpoint_id, 'SERVICE_BROKER' AS type_desc,
       UPPER(COALESCE(CAST(options AS JSON) ->> 'state', 'started')) AS state_desc,
       CASE WHEN CAST(CAST(options AS JSON) ->> 'port' AS INT) = 0 THEN listening_port
            ELSE CAST(CAST(options AS JSON) ->> 'port' AS INT) END AS port,
       CASE WHEN CAST(CAST(options AS JSON) ->> 'port' AS INT) = 0 THEN 1 ELSE 0 END
           AS is_dynamic_port,
       CAST(options AS JSON) ->> 'host' AS ip_address
FROM sb_net_endpoint

-- name: queue_rows
-- A queue's messages with SQL Server's queue columns (SELECT ... FROM a queue, docs/tsql.md
-- "Querying a queue"): read, never received or locked. :queue_id is bound to the queue's id.
SELECT m.status, m.priority, m.queuing_order, m.group_id AS conversation_group_id,
       m.handle AS conversation_handle, m.msn AS message_sequence_number,
       m.service AS service_name, NULL AS service_id, m.contract AS service_contract_name,
       NULL AS service_contract_id, m.message_type AS message_type_name,
       NULL AS message_type_id, m.validation, m.body AS message_body,
       to_timestamp(m.enqueued_at) AT TIME ZONE 'UTC' AS message_enqueue_time
FROM sb_messages AS m
WHERE m.queue_id = :queue_id
