-- The task scheduler's statements on its own tables (ExecutionLog, Schedulers,
-- ExecutorSettings: migration 0005), for SQLite. Named blocks: see sbroker/storage/queries.py.

-- name: add_scheduler
INSERT INTO Schedulers(SchedulerHandle, ConversationId, Name, Priority, CreatedTime)
VALUES (?, ?, ?, ?, ?)

-- name: drop_scheduler
DELETE FROM Schedulers WHERE SchedulerHandle = ?

-- name: scheduler_priorities
SELECT ConversationId, Priority FROM Schedulers

-- name: log_task
-- Returns the new LogID.
INSERT INTO ExecutionLog(CallerID, SchedulerHandle, Task, QueuedTime, Pool)
VALUES (?, ?, ?, ?, ?)
RETURNING LogID

-- name: cancel_queued
-- A queued task is cancelled now (no reader may ever come for it: the caller may be
-- leaving); the executor that takes its message reports it cancelled. Params: now, log id.
UPDATE ExecutionLog SET Status = 'cancelled', EndTime = ?, Error = 'cancelled before it started',
    CancelRequested = 1
WHERE LogID = ? AND Status = 'queued'

-- name: request_cancel
-- A running task: its executor watches CancelRequested and stops it. Params: why (1: cancel,
-- 2: timed out), log id.
UPDATE ExecutionLog SET CancelRequested = ?
WHERE LogID = ? AND Status = 'running' AND CancelRequested = 0

-- name: queued_among
-- How many of the log ids (a JSON array) are still queued.
SELECT count(*) FROM ExecutionLog
WHERE Status = 'queued' AND LogID IN (SELECT value FROM json_each(?))

-- name: task_start
SELECT StartTime, Status FROM ExecutionLog WHERE LogID = ?

-- name: mark_started
-- Params: start time, worker, worker session, target handle, trace context, log id.
UPDATE ExecutionLog SET Status = 'running', StartTime = ?, Worker = ?, WorkerSession = ?,
    TargetHandle = ?, TraceContext = ?
WHERE LogID = ? AND Status = 'queued' AND CancelRequested = 0

-- name: task_exists
SELECT 1 FROM ExecutionLog WHERE LogID = ?

-- name: mark_finished
-- Params: status, end time, error, error details, job ids (JSON), value (JSON), start time,
-- log id.
UPDATE ExecutionLog SET Status = ?, EndTime = ?, Error = ?, ErrorDetails = ?, SparkJobIds = ?,
    Value = ?, StartTime = COALESCE(StartTime, ?)
WHERE LogID = ?

-- name: cancel_requested
-- Which of the log ids (a JSON array) were asked to stop, and why (1: cancel, 2: timed out).
SELECT LogID, CancelRequested FROM ExecutionLog
WHERE CancelRequested > 0 AND LogID IN (SELECT value FROM json_each(?))

-- name: running_tasks
SELECT LogID, TargetHandle, WorkerSession FROM ExecutionLog WHERE Status = 'running'

-- name: claim_dead_task
-- A task of a dead executor, taken for reporting by one process only: of two hosts that
-- found it at once, the second waits for the first's row lock and then matches nothing.
-- mark_finished fills in the rest in the same transaction. Params: log id, worker session.
UPDATE ExecutionLog SET Status = 'failed'
WHERE LogID = ? AND Status = 'running' AND WorkerSession = ?

-- name: save_setting
INSERT OR REPLACE INTO ExecutorSettings(key, value) VALUES (?, ?)

-- name: setting
SELECT value FROM ExecutorSettings WHERE key = ?

-- name: view_ExecutionLog
SELECT * FROM ExecutionLog

-- name: view_ExecutionStatus
SELECT * FROM ExecutionStatus
