-- What the dashboard reads that no view gives whole, for PostgreSQL (see sqlite.sql).
-- Read-only statements only (each starts with SELECT).  Mixed-case column names are quoted
-- aliases: PostgreSQL folds unquoted names to lower case.

-- name: transmission_summary
SELECT to_service_name, coalesce(transmission_status, '') AS transmission_status,
       count(*) AS messages, min(enqueue_time) AS oldest_enqueue_time
FROM transmission_queue GROUP BY to_service_name, coalesce(transmission_status, '')
ORDER BY to_service_name, 2

-- name: transmission_page
SELECT conversation_handle, to_service_name, to_broker_instance, from_service_name,
       message_type_name, message_sequence_number, priority, enqueue_time,
       coalesce(transmission_status, '') AS transmission_status,
       length(message_body) AS body_bytes
FROM transmission_queue
WHERE (%(to_service)s::text IS NULL OR to_service_name = %(to_service)s)
ORDER BY enqueue_time, message_sequence_number LIMIT %(limit)s OFFSET %(offset)s

-- name: transmission_count
SELECT count(*) FROM transmission_queue
WHERE (%(to_service)s::text IS NULL OR to_service_name = %(to_service)s)

-- name: conversation_states
SELECT state, count(*) AS endpoints FROM conversation_endpoints GROUP BY state

-- name: group_locks
-- Locked conversation groups of a queue, who holds each (the session of the backend that
-- holds its advisory lock, from its application_name), and how many messages wait in it.
SELECT g.group_id AS conversation_group_id, 'session ' || s.session_id AS owner,
       extract(epoch FROM a.xact_start)::double precision AS acquired_at, s.host, s.pid,
       (SELECT count(*) FROM sb_messages m WHERE m.group_id = g.group_id AND m.status = 1)
           AS messages
FROM (SELECT DISTINCT e.group_id FROM sb_endpoints e JOIN sb_queues q
        ON q.queue_id = e.queue_id WHERE q.name = %(queue)s) g
JOIN sb_held_groups h ON h.key = sb_key(g.group_id)
LEFT JOIN pg_stat_activity a ON a.pid = h.pid
LEFT JOIN sb_sessions s ON 'sbroker ' || s.session_id = a.application_name
ORDER BY acquired_at

-- name: groups_page
SELECT conversation_group_id, is_locked FROM conversation_groups WHERE queue_name = %(queue)s
ORDER BY is_locked DESC, conversation_group_id LIMIT %(limit)s OFFSET %(offset)s

-- name: groups_count
SELECT count(*) FROM conversation_groups WHERE queue_name = %(queue)s

-- name: task_counts
SELECT Status AS "Status", count(*) AS tasks FROM ExecutionLog GROUP BY Status

-- name: running_tasks
SELECT LogID AS "LogID", Pool AS "Pool", Worker AS "Worker", StartTime AS "StartTime",
       QueuedTime AS "QueuedTime", Task AS "Task", CallerID AS "CallerID"
FROM ExecutionLog WHERE Status = 'running' ORDER BY LogID

-- name: schedulers
SELECT s.SchedulerHandle AS "SchedulerHandle", s.Name AS "Name", s.Priority AS "Priority",
       s.CreatedTime AS "CreatedTime",
       (SELECT count(*) FROM ExecutionLog l WHERE l.SchedulerHandle = s.SchedulerHandle
            AND l.Status = 'queued') AS queued,
       (SELECT count(*) FROM ExecutionLog l WHERE l.SchedulerHandle = s.SchedulerHandle
            AND l.Status = 'running') AS running
FROM Schedulers s ORDER BY s.CreatedTime DESC LIMIT 100

-- name: log_page
SELECT LogID AS "LogID", Pool AS "Pool", Status AS "Status", Worker AS "Worker",
       QueuedTime AS "QueuedTime", StartTime AS "StartTime", EndTime AS "EndTime",
       Error AS "Error", Task AS "Task", SparkJobIds AS "SparkJobIds",
       TraceContext AS "TraceContext"
FROM ExecutionLog
WHERE (%(status)s::text IS NULL OR Status = %(status)s)
    AND (%(pool)s::text IS NULL OR Pool = %(pool)s)
    AND (%(since)s::text IS NULL OR QueuedTime >= %(since)s)
    AND (%(until)s::text IS NULL OR QueuedTime < %(until)s)
ORDER BY LogID DESC LIMIT %(limit)s OFFSET %(offset)s

-- name: log_count
SELECT count(*) FROM ExecutionLog
WHERE (%(status)s::text IS NULL OR Status = %(status)s)
    AND (%(pool)s::text IS NULL OR Pool = %(pool)s)
    AND (%(since)s::text IS NULL OR QueuedTime >= %(since)s)
    AND (%(until)s::text IS NULL OR QueuedTime < %(until)s)

-- name: pools
SELECT DISTINCT Pool AS "Pool" FROM ExecutionLog WHERE Pool IS NOT NULL ORDER BY 1 LIMIT 500

-- name: recent_runs
SELECT SchedulerHandle AS "SchedulerHandle", min(Pool) AS pool, min(QueuedTime) AS queued,
       max(EndTime) AS ended, count(*) AS tasks,
       sum(CASE WHEN Status IN ('queued', 'running') THEN 1 ELSE 0 END) AS open_tasks,
       sum(CASE WHEN Status IN ('failed', 'cancelled') THEN 1 ELSE 0 END) AS failed_tasks
FROM ExecutionLog GROUP BY SchedulerHandle ORDER BY max(LogID) DESC LIMIT %(limit)s

-- name: run_tasks
-- A run's tasks, each with the name its pipeline run gave it (its attempt's; NULL for tasks
-- that other code sent).
SELECT l.LogID AS "LogID", l.Status AS "Status", l.QueuedTime AS "QueuedTime",
       l.StartTime AS "StartTime", l.EndTime AS "EndTime", l.Error AS "Error",
       l.Task AS "Task", l.Worker AS "Worker", p.Task AS "TaskName"
FROM ExecutionLog l LEFT JOIN PipelineAttempts p ON p.LogID = l.LogID
WHERE l.SchedulerHandle = %(handle)s ORDER BY l.LogID LIMIT 2000

-- name: metrics_transmission
SELECT to_service_name, count(*) AS messages FROM transmission_queue GROUP BY to_service_name

-- name: schedule_runs_total
-- sbroker_schedule_runs_total{schedule, outcome}: counted by the transactions that start,
-- skip or drop a schedule's ticks (docs/pipelines.md, "Data intervals and backfills").
SELECT Schedule AS schedule, Outcome AS outcome, Total AS total
FROM PipelineScheduleCounters ORDER BY Schedule, Outcome
