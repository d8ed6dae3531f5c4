-- The task scheduler's statements on its own tables (ExecutionLog, Schedulers,
-- ExecutorSettings: storage/postgres/migrations/0001), for PostgreSQL.  The tables' names
-- are unquoted (stored in lower case); the views give the documented column names back.

-- name: add_scheduler
INSERT INTO Schedulers(SchedulerHandle, ConversationId, Name, Priority, CreatedTime)
VALUES (%s, %s, %s, %s, %s)

-- name: drop_scheduler
DELETE FROM Schedulers WHERE SchedulerHandle = %s

-- name: scheduler_priorities
SELECT ConversationId, Priority FROM Schedulers

-- name: log_task
-- Returns the new LogID.
INSERT INTO ExecutionLog(CallerID, SchedulerHandle, Task, QueuedTime, Pool)
VALUES (%s, %s, %s, %s, %s)
RETURNING LogID

-- name: cancel_queued
-- Params: now, log id.
UPDATE ExecutionLog SET Status = 'cancelled', EndTime = %s,
    Error = 'cancelled before it started', CancelRequested = 1
WHERE LogID = %s AND Status = 'queued'

-- name: request_cancel
-- Params: why (1: cancel, 2: timed out), log id.
UPDATE ExecutionLog SET CancelRequested = %s
WHERE LogID = %s AND Status = 'running' AND CancelRequested = 0

-- name: queued_among
-- How many of the log ids (a JSON array) are still queued.
SELECT count(*) FROM ExecutionLog
WHERE Status = 'queued' AND LogID IN (SELECT value::bigint FROM json_array_elements_text(%s::json))

-- name: task_start
SELECT StartTime, Status FROM ExecutionLog WHERE LogID = %s

-- name: mark_started
-- Params: start time, worker, worker session, target handle, trace context, log id.
UPDATE ExecutionLog SET Status = 'running', StartTime = %s, Worker = %s, WorkerSession = %s,
    TargetHandle = %s, TraceContext = %s
WHERE LogID = %s AND Status = 'queued' AND CancelRequested = 0

-- name: task_exists
SELECT 1 FROM ExecutionLog WHERE LogID = %s

-- name: mark_finished
-- Params: status, end time, error, error details, job ids (JSON), value (JSON), start time,
-- log id.
UPDATE ExecutionLog SET Status = %s, EndTime = %s, Error = %s, ErrorDetails = %s,
    SparkJobIds = %s, Value = %s, StartTime = COALESCE(StartTime, %s)
WHERE LogID = %s

-- name: mark_ran
-- The outcome of a task this executor ran, recorded only while the row is still its own: a
-- task reported failed meanwhile (its executor's session judged dead while cut off from the
-- database) keeps that outcome, and its AsyncDone is not sent twice. Params: as
-- mark_finished's, then the worker session.
UPDATE ExecutionLog SET Status = %s, EndTime = %s, Error = %s, ErrorDetails = %s,
    SparkJobIds = %s, Value = %s, StartTime = COALESCE(StartTime, %s)
WHERE LogID = %s AND Status = 'running' AND WorkerSession = %s

-- name: cancel_requested
-- Which of the log ids (a JSON array) were asked to stop, and why (1: cancel, 2: timed out).
SELECT LogID, CancelRequested FROM ExecutionLog
WHERE CancelRequested > 0
    AND LogID IN (SELECT value::bigint FROM json_array_elements_text(%s::json))

-- name: running_tasks
SELECT LogID, TargetHandle, WorkerSession FROM ExecutionLog WHERE Status = 'running'

-- name: claim_dead_task
-- A task of a dead executor, taken for reporting by one process only: of two hosts that
-- found it at once, the second waits for the first's row lock and then matches nothing.
-- mark_finished fills in the rest in the same transaction. Params: log id, worker session.
UPDATE ExecutionLog SET Status = 'failed'
WHERE LogID = %s AND Status = 'running' AND WorkerSession = %s

-- name: save_setting
INSERT INTO ExecutorSettings(key, value) VALUES (%s, %s)
ON CONFLICT (key) DO UPDATE SET value = excluded.value

-- name: setting
SELECT value FROM ExecutorSettings WHERE key = %s

-- name: view_ExecutionLog
SELECT LogID AS "LogID", CallerID AS "CallerID", SchedulerHandle AS "SchedulerHandle",
    Worker AS "Worker", WorkerSession AS "WorkerSession", Task AS "Task",
    QueuedTime AS "QueuedTime", StartTime AS "StartTime", EndTime AS "EndTime",
    Status AS "Status", Error AS "Error", SparkJobIds AS "SparkJobIds", Value AS "Value",
    Pool AS "Pool", CancelRequested AS "CancelRequested", TargetHandle AS "TargetHandle",
    ErrorDetails AS "ErrorDetails", TraceContext AS "TraceContext"
FROM ExecutionLog ORDER BY LogID

-- name: view_ExecutionStatus
SELECT Worker AS "Worker", LogID AS "LogID", CallerID AS "CallerID",
    SchedulerHandle AS "SchedulerHandle", Pool AS "Pool", StartTime AS "StartTime",
    Task AS "Task"
FROM ExecutionStatus
