-- Durable runs (migrations 0014 and 0019): runs, their tasks, each task's attempts, and the
-- lease of the process that drives a run (apps/pipeline/leases.py decides who drives).
-- Reads name their columns: the Python side reads rows by column name.

-- name: insert_run
-- A run driven by the process that records it: its lease taken at once (token 1).
-- Params: pipeline, file, params (JSON), start time, scheduler handle, schedule, lease
-- session, driver host, driver pid, lease seconds, lease seconds.
INSERT INTO PipelineRuns(Pipeline, File, Params, Status, StartTime, SchedulerHandle, Schedule,
    LeaseToken, LeaseSession, DriverHost, DriverPid, LeaseSeconds, LeaseExpires)
VALUES (%s, %s, %s, 'running', %s, %s, %s, 1, %s, %s, %s, %s,
    extract(epoch FROM clock_timestamp()) + %s)
RETURNING RunID AS run_id, LeaseToken AS lease_token

-- name: insert_submitted_run
-- A run no process drives yet (`sbroker run --submit`): the first server to look takes it.
-- Params: pipeline, file, params (JSON), start time, scheduler handle, lease seconds.
INSERT INTO PipelineRuns(Pipeline, File, Params, Status, StartTime, SchedulerHandle,
    LeaseSeconds)
VALUES (%s, %s, %s, 'running', %s, %s, %s)
RETURNING RunID AS run_id, LeaseToken AS lease_token

-- name: run_by_id
-- Live: whether a driver holds its lease now (the database's clock; its session lives).
SELECT RunID AS run_id, Pipeline AS pipeline, File AS file, Params AS params,
    Status AS status, StartTime AS start_time, EndTime AS end_time,
    SchedulerHandle AS handle, Schedule AS schedule, LeaseToken AS lease_token,
    LeaseSession AS lease_session, LeaseSeconds AS lease_seconds, DriverHost AS driver_host,
    DriverPid AS driver_pid, Takeovers AS takeovers, CancelRequested AS cancel_requested,
    (COALESCE(LeaseExpires, 0) > extract(epoch FROM clock_timestamp())
     AND EXISTS (SELECT 1 FROM dm_broker_sessions s WHERE s.session_id = LeaseSession))
        AS live
FROM PipelineRuns WHERE RunID = %s

-- name: latest_unfinished
SELECT RunID AS run_id FROM PipelineRuns
WHERE Pipeline = %s AND Status NOT IN ('succeeded', 'skipped') ORDER BY RunID DESC LIMIT 1

-- name: run_count
SELECT count(*) AS runs FROM PipelineRuns WHERE Pipeline = %s AND Status <> 'skipped'

-- name: list_runs
SELECT RunID AS run_id, Pipeline AS pipeline, Status AS status, StartTime AS start_time,
    EndTime AS end_time FROM PipelineRuns
ORDER BY RunID DESC LIMIT %s

-- name: list_runs_of
SELECT RunID AS run_id, Pipeline AS pipeline, Status AS status, StartTime AS start_time,
    EndTime AS end_time FROM PipelineRuns WHERE Pipeline = %s
ORDER BY RunID DESC LIMIT %s

-- name: set_run
-- Params: status, end time, scheduler handle, run id.
UPDATE PipelineRuns SET Status = %s, EndTime = %s, SchedulerHandle = %s WHERE RunID = %s

-- name: clear_cancel
-- The cancel asked for is done (or a resume asked to run the run again).
UPDATE PipelineRuns SET CancelRequested = 0 WHERE RunID = %s

-- name: acquire_lease
-- Take the run's lease unless a live driver holds it; one row (the new token) or none.
-- Takeovers counts a running run taken from another session. Params: session, host, pid,
-- lease seconds, lease seconds, session, run id.
UPDATE PipelineRuns SET LeaseToken = LeaseToken + 1, LeaseSession = %s, DriverHost = %s,
    DriverPid = %s, LeaseSeconds = %s,
    LeaseExpires = extract(epoch FROM clock_timestamp()) + %s,
    Takeovers = Takeovers + (Status = 'running' AND LeaseSession IS NOT NULL
                             AND LeaseSession <> %s)::integer
WHERE RunID = %s AND NOT (
    COALESCE(LeaseExpires, 0) > extract(epoch FROM clock_timestamp())
    AND EXISTS (SELECT 1 FROM dm_broker_sessions s WHERE s.session_id = LeaseSession))
RETURNING LeaseToken AS lease_token

-- name: fence
-- A driver's bookkeeping commit: it still holds the lease (one row), which it renews; and
-- whether someone asked to cancel the run. Params: run id, token.
UPDATE PipelineRuns SET LeaseExpires = extract(epoch FROM clock_timestamp()) + LeaseSeconds
WHERE RunID = %s AND LeaseToken = %s
RETURNING CancelRequested AS cancel_requested

-- name: release_lease
-- The driver lets the run go (a server stopping hands it back): expired now.
UPDATE PipelineRuns SET LeaseExpires = 0 WHERE RunID = %s AND LeaseToken = %s

-- name: takeable_runs
-- Running runs no live driver holds: submitted, handed back, or their driver gone.
SELECT RunID AS run_id, Pipeline AS pipeline, File AS file, Params AS params,
    Schedule AS schedule FROM PipelineRuns
WHERE Status = 'running' AND NOT (
    COALESCE(LeaseExpires, 0) > extract(epoch FROM clock_timestamp())
    AND EXISTS (SELECT 1 FROM dm_broker_sessions s WHERE s.session_id = LeaseSession))
ORDER BY RunID

-- name: request_cancel
UPDATE PipelineRuns SET CancelRequested = 1 WHERE RunID = %s AND Status = 'running'

-- name: insert_run_task
-- Params: run id, name, position, after (JSON), definition.
INSERT INTO PipelineRunTasks(RunID, Name, Position, After, Definition) VALUES (%s, %s, %s, %s, %s)

-- name: run_tasks
SELECT Name AS name, Position AS position, After AS after, Definition AS definition,
    Status AS status, Attempts AS attempts, Failures AS failures,
    NextAttempt AS next_attempt, StartTime AS start_time, EndTime AS end_time,
    Value AS value, Error AS error
FROM PipelineRunTasks WHERE RunID = %s ORDER BY Position, length(Name), Name

-- name: set_task
-- Params: status, attempts, failures, next attempt, start, end, value (JSON), error, run id,
-- name.
UPDATE PipelineRunTasks SET Status = %s, Attempts = %s, Failures = %s, NextAttempt = %s,
    StartTime = %s, EndTime = %s, Value = %s, Error = %s
WHERE RunID = %s AND Name = %s

-- name: set_task_status
-- Params: status, end, error, run id, name.
UPDATE PipelineRunTasks SET Status = %s, EndTime = %s, Error = %s WHERE RunID = %s AND Name = %s

-- name: redefine_task
-- Params: position, after (JSON), definition, run id, name.
UPDATE PipelineRunTasks SET Position = %s, After = %s, Definition = %s WHERE RunID = %s AND Name = %s

-- name: delete_run_task
DELETE FROM PipelineRunTasks WHERE RunID = %s AND Name = %s

-- name: insert_attempt
-- Params: log id, run id, task, attempt number, deadline (epoch seconds or NULL), the
-- sending driver's lease token.
INSERT INTO PipelineAttempts(LogID, RunID, Task, Attempt, Deadline, LeaseToken)
VALUES (%s, %s, %s, %s, %s, %s)

-- name: open_attempts
SELECT LogID AS log_id, Task AS task, Deadline AS deadline FROM PipelineAttempts
WHERE RunID = %s AND Outcome IS NULL

-- name: close_attempt
-- Once only: the transaction that records an attempt's outcome (its AsyncDone, its timeout,
-- a cancel) changes one row here; the outcome of an attempt closed already changes none.
UPDATE PipelineAttempts SET Outcome = %s WHERE LogID = %s AND Outcome IS NULL

-- name: run_attempts
-- Status: the attempt's outcome for the run once recorded, else its ExecutionLog row's.
SELECT a.Task AS task, a.Attempt AS attempt, a.LogID AS log_id,
    COALESCE(a.Outcome, e.Status) AS status, e.StartTime AS start_time,
    e.EndTime AS end_time, e.Error AS error
FROM PipelineAttempts a JOIN ExecutionLog e ON e.LogID = a.LogID
WHERE a.RunID = %s ORDER BY a.LogID

-- Schedules (migration 0014): one row and one dialog (its conversation timer) each.

-- name: upsert_schedule
-- Params: name, file, params (JSON), every, cron, timezone, catchup, overlap, next due,
-- dialog handle, created time.
INSERT INTO PipelineSchedules(Name, File, Params, Every, Cron, Timezone, Catchup, Overlap,
    NextDue, Handle, CreatedTime)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (Name) DO UPDATE SET File = excluded.File, Params = excluded.Params,
    Every = excluded.Every, Cron = excluded.Cron, Timezone = excluded.Timezone,
    Catchup = excluded.Catchup, Overlap = excluded.Overlap, NextDue = excluded.NextDue,
    Handle = excluded.Handle

-- name: schedule_by_name
SELECT Name AS name, File AS file, Params AS params, Every AS every, Cron AS cron,
    Timezone AS timezone, Catchup AS catchup, Overlap AS overlap, NextDue AS next_due,
    Handle AS handle
FROM PipelineSchedules WHERE Name = %s

-- name: schedule_by_handle
SELECT Name AS name, File AS file, Params AS params, Every AS every, Cron AS cron,
    Timezone AS timezone, Catchup AS catchup, Overlap AS overlap, NextDue AS next_due,
    Handle AS handle
FROM PipelineSchedules WHERE Handle = %s

-- name: list_schedules
SELECT Name AS name, File AS file, Params AS params, Every AS every, Cron AS cron,
    Timezone AS timezone, Catchup AS catchup, Overlap AS overlap, NextDue AS next_due,
    Handle AS handle
FROM PipelineSchedules ORDER BY Name

-- name: set_next_due
UPDATE PipelineSchedules SET NextDue = %s WHERE Name = %s

-- name: delete_schedule
DELETE FROM PipelineSchedules WHERE Name = %s

-- name: running_runs_of_schedule
SELECT count(*) AS runs FROM PipelineRuns WHERE Schedule = %s AND Status = 'running'

-- name: earlier_running_runs
-- Runs of the schedule still going that came before run RunID (overlap = "queue" waits).
SELECT count(*) AS runs FROM PipelineRuns WHERE Schedule = %s AND Status = 'running' AND RunID < %s

-- name: insert_skipped_run
-- A due run not started (its previous run still going, overlap = "skip"). Params: pipeline,
-- file, params (JSON), time, schedule.
INSERT INTO PipelineRuns(Pipeline, File, Params, Status, StartTime, EndTime, Schedule, Error)
VALUES (%s, %s, %s, 'skipped', %s, %s, %s, 'the previous run of the schedule was still going')
