-- What the dashboard reads that no view gives whole: counts and pages, so that no page loads a
-- whole queue, and the holder of each group lock. Read-only statements only (each starts with
-- SELECT, so a broker transaction runs it without taking the writer).

-- name: transmission_summary
-- The transmission queue by destination and status.
SELECT to_service_name, coalesce(transmission_status, '') AS transmission_status,
       count(*) AS messages, min(enqueue_time) AS oldest_enqueue_time
FROM transmission_queue GROUP BY to_service_name, coalesce(transmission_status, '')
ORDER BY to_service_name, 2

-- name: transmission_page
-- One page of the transmission queue, oldest first, optionally for one destination.
SELECT conversation_handle, to_service_name, to_broker_instance, from_service_name,
       message_type_name, message_sequence_number, priority, enqueue_time,
       coalesce(transmission_status, '') AS transmission_status,
       length(message_body) AS body_bytes
FROM transmission_queue
WHERE (:to_service IS NULL OR to_service_name = :to_service)
ORDER BY enqueue_time, message_sequence_number LIMIT :limit OFFSET :offset

-- name: transmission_count
SELECT count(*) FROM transmission_queue
WHERE (:to_service IS NULL OR to_service_name = :to_service)

-- name: conversation_states
SELECT state, count(*) AS endpoints FROM conversation_endpoints GROUP BY state

-- name: group_locks
-- Locked conversation groups of a queue, who holds each, and how many messages wait in it.
SELECT l.group_id AS conversation_group_id, l.owner, l.acquired_at, s.host, s.pid,
       (SELECT count(*) FROM sb_messages m WHERE m.status = 1 AND m.group_key = (
           SELECT group_key FROM sb_endpoints e WHERE e.group_id = l.group_id LIMIT 1))
           AS messages
FROM sb_group_locks l JOIN sb_queues q ON q.queue_id = l.queue_id
LEFT JOIN sb_sessions s ON s.session_id = l.session_id
WHERE q.name = :queue ORDER BY l.acquired_at

-- name: groups_page
SELECT conversation_group_id, is_locked FROM conversation_groups WHERE queue_name = :queue
ORDER BY is_locked DESC, conversation_group_id LIMIT :limit OFFSET :offset

-- name: groups_count
SELECT count(*) FROM conversation_groups WHERE queue_name = :queue

-- name: task_counts
SELECT Status, count(*) AS tasks FROM ExecutionLog GROUP BY Status

-- name: running_tasks
SELECT LogID, Pool, Worker, StartTime, QueuedTime, Task, CallerID
FROM ExecutionLog WHERE Status = 'running' ORDER BY LogID

-- name: schedulers
SELECT s.SchedulerHandle, s.Name, s.Priority, s.CreatedTime,
       (SELECT count(*) FROM ExecutionLog l WHERE l.SchedulerHandle = s.SchedulerHandle
            AND l.Status = 'queued') AS queued,
       (SELECT count(*) FROM ExecutionLog l WHERE l.SchedulerHandle = s.SchedulerHandle
            AND l.Status = 'running') AS running
FROM Schedulers s ORDER BY s.CreatedTime DESC LIMIT 100

-- name: log_page
-- The ExecutionLog, newest first, searched by status, scheduler (its pool) and queued time.
SELECT LogID, Pool, Status, Worker, QueuedTime, StartTime, EndTime, Error, Task, SparkJobIds,
    TraceContext
FROM ExecutionLog
WHERE (:status IS NULL OR Status = :status) AND (:pool IS NULL OR Pool = :pool)
    AND (:since IS NULL OR QueuedTime >= :since) AND (:until IS NULL OR QueuedTime < :until)
ORDER BY LogID DESC LIMIT :limit OFFSET :offset

-- name: log_count
SELECT count(*) FROM ExecutionLog
WHERE (:status IS NULL OR Status = :status) AND (:pool IS NULL OR Pool = :pool)
    AND (:since IS NULL OR QueuedTime >= :since) AND (:until IS NULL OR QueuedTime < :until)

-- name: pools
SELECT DISTINCT Pool FROM ExecutionLog WHERE Pool IS NOT NULL ORDER BY Pool LIMIT 500

-- name: recent_runs
-- Pipeline runs: the tasks of one scheduler dialog, the most recent first.
SELECT SchedulerHandle, min(Pool) AS pool, min(QueuedTime) AS queued, max(EndTime) AS ended,
       count(*) AS tasks,
       sum(CASE WHEN Status IN ('queued', 'running') THEN 1 ELSE 0 END) AS open_tasks,
       sum(CASE WHEN Status IN ('failed', 'cancelled') THEN 1 ELSE 0 END) AS failed_tasks
FROM ExecutionLog GROUP BY SchedulerHandle ORDER BY max(LogID) DESC LIMIT :limit

-- name: run_tasks
-- A run's tasks, each with the name its pipeline run gave it (its attempt's; NULL for tasks
-- that other code sent).
SELECT l.LogID, l.Status, l.QueuedTime, l.StartTime, l.EndTime, l.Error, l.Task, l.Worker,
       p.Task AS TaskName
FROM ExecutionLog l LEFT JOIN PipelineAttempts p ON p.LogID = l.LogID
WHERE l.SchedulerHandle = :handle ORDER BY l.LogID LIMIT 2000

-- name: metrics_transmission
SELECT to_service_name, count(*) AS messages FROM transmission_queue GROUP BY to_service_name

-- name: schedule_runs_total
-- sbroker_schedule_runs_total{schedule, outcome}: counted by the transactions that start,
-- skip or drop a schedule's ticks (docs/pipelines.md, "Data intervals and backfills").
SELECT Schedule AS schedule, Outcome AS outcome, Total AS total
FROM PipelineScheduleCounters ORDER BY Schedule, Outcome
