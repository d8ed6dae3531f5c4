-- Durable runs (migrations 0012 and 0015): runs, their tasks, each task's attempts, and the
-- lease of the process that drives a run (apps/pipeline/leases.py decides who drives).
-- Reads name their columns: the Python side reads rows by column name.

-- name: insert_run
-- A run driven by the process that records it: its lease taken at once (token 1).
-- A run of a schedule's tick (Tick not NULL) that the tick has already is not recorded (no
-- row; the key PipelineRuns_tick); its Turn comes after every run of its schedule's.
-- Params: pipeline, file, params (JSON), start time, scheduler handle, scheduled for, tick,
-- schedule, schedule, schedule, lease session, driver host, driver pid, lease seconds, lease
-- seconds.
INSERT INTO PipelineRuns(Pipeline, File, Params, Status, StartTime, SchedulerHandle,
    ScheduledFor, Tick, Schedule, Turn, LeaseToken, LeaseSession, DriverHost, DriverPid,
    LeaseSeconds, LeaseExpires)
VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?,
    CASE WHEN ? IS NULL THEN NULL ELSE
        (SELECT coalesce(max(Turn), 0) + 1 FROM PipelineRuns WHERE Schedule = ?) END,
    1, ?, ?, ?, ?,
    (julianday('now') - 2440587.5) * 86400.0 + ?)
ON CONFLICT DO NOTHING
RETURNING RunID AS run_id, LeaseToken AS lease_token

-- name: insert_submitted_run
-- A run no process drives yet (`sbroker run --submit`, `schedule backfill --submit`): the
-- first server to look takes it. Params: pipeline, file, params (JSON), start time,
-- scheduler handle, scheduled for, tick, schedule, schedule, schedule, lease seconds.
INSERT INTO PipelineRuns(Pipeline, File, Params, Status, StartTime, SchedulerHandle,
    ScheduledFor, Tick, Schedule, Turn, LeaseSeconds)
VALUES (?, ?, ?, 'running', ?, ?, ?, ?, ?,
    CASE WHEN ? IS NULL THEN NULL ELSE
        (SELECT coalesce(max(Turn), 0) + 1 FROM PipelineRuns WHERE Schedule = ?) END, ?)
ON CONFLICT DO NOTHING
RETURNING RunID AS run_id, LeaseToken AS lease_token

-- name: run_by_id
-- Live: whether a driver holds its lease now (the database's clock; its session lives).
SELECT RunID AS run_id, Pipeline AS pipeline, File AS file, Params AS params,
    Status AS status, StartTime AS start_time, EndTime AS end_time,
    SchedulerHandle AS handle, Schedule AS schedule, LeaseToken AS lease_token,
    LeaseSession AS lease_session, LeaseSeconds AS lease_seconds, DriverHost AS driver_host,
    DriverPid AS driver_pid, Takeovers AS takeovers, CancelRequested AS cancel_requested,
    ScheduledFor AS scheduled_for, Tick AS tick, Turn AS turn,
    (COALESCE(LeaseExpires, 0) > (julianday('now') - 2440587.5) * 86400.0
     AND EXISTS (SELECT 1 FROM dm_broker_sessions s WHERE s.session_id = LeaseSession))
        AS live
FROM PipelineRuns WHERE RunID = ?

-- name: latest_unfinished
SELECT RunID AS run_id FROM PipelineRuns
WHERE Pipeline = ? AND Status NOT IN ('succeeded', 'skipped') ORDER BY RunID DESC LIMIT 1

-- name: run_count
SELECT count(*) AS runs FROM PipelineRuns WHERE Pipeline = ? AND Status <> 'skipped'

-- name: list_runs
SELECT RunID AS run_id, Pipeline AS pipeline, Status AS status, StartTime AS start_time,
    EndTime AS end_time, ScheduledFor AS scheduled_for FROM PipelineRuns
ORDER BY RunID DESC LIMIT ?

-- name: list_runs_of
SELECT RunID AS run_id, Pipeline AS pipeline, Status AS status, StartTime AS start_time,
    EndTime AS end_time, ScheduledFor AS scheduled_for FROM PipelineRuns WHERE Pipeline = ?
ORDER BY RunID DESC LIMIT ?

-- name: set_run
-- Params: status, end time, scheduler handle, run id.
UPDATE PipelineRuns SET Status = ?, EndTime = ?, SchedulerHandle = ? WHERE RunID = ?

-- name: clear_cancel
-- The cancel asked for is done (or a resume asked to run the run again).
UPDATE PipelineRuns SET CancelRequested = 0 WHERE RunID = ?

-- name: acquire_lease
-- Take the run's lease unless a live driver holds it; one row (the new token) or none.
-- Takeovers counts a running run taken from another session. Params: session, host, pid,
-- lease seconds, lease seconds, session, run id.
UPDATE PipelineRuns SET LeaseToken = LeaseToken + 1, LeaseSession = ?, DriverHost = ?,
    DriverPid = ?, LeaseSeconds = ?,
    LeaseExpires = (julianday('now') - 2440587.5) * 86400.0 + ?,
    Takeovers = Takeovers + (Status = 'running' AND LeaseSession IS NOT NULL
                             AND LeaseSession <> ?)
WHERE RunID = ? AND NOT (
    COALESCE(LeaseExpires, 0) > (julianday('now') - 2440587.5) * 86400.0
    AND EXISTS (SELECT 1 FROM dm_broker_sessions s WHERE s.session_id = LeaseSession))
RETURNING LeaseToken AS lease_token

-- name: fence
-- A driver's bookkeeping commit: it still holds the lease (one row), which it renews; and
-- whether someone asked to cancel the run. Params: run id, token.
UPDATE PipelineRuns SET LeaseExpires = (julianday('now') - 2440587.5) * 86400.0 + LeaseSeconds
WHERE RunID = ? AND LeaseToken = ?
RETURNING CancelRequested AS cancel_requested

-- name: release_lease
-- The driver lets the run go (a server stopping hands it back): expired now.
UPDATE PipelineRuns SET LeaseExpires = 0 WHERE RunID = ? AND LeaseToken = ?

-- name: takeable_runs
-- Running runs no live driver holds: submitted, handed back, or their driver gone.
SELECT RunID AS run_id, Pipeline AS pipeline, File AS file, Params AS params,
    Schedule AS schedule FROM PipelineRuns
WHERE Status = 'running' AND NOT (
    COALESCE(LeaseExpires, 0) > (julianday('now') - 2440587.5) * 86400.0
    AND EXISTS (SELECT 1 FROM dm_broker_sessions s WHERE s.session_id = LeaseSession))
ORDER BY RunID

-- name: request_cancel
UPDATE PipelineRuns SET CancelRequested = 1 WHERE RunID = ? AND Status = 'running'

-- name: insert_run_task
-- Params: run id, name, position, after (JSON), definition.
INSERT INTO PipelineRunTasks(RunID, Name, Position, After, Definition) VALUES (?, ?, ?, ?, ?)

-- name: run_tasks
SELECT Name AS name, Position AS position, After AS after, Definition AS definition,
    Status AS status, Attempts AS attempts, Failures AS failures,
    NextAttempt AS next_attempt, StartTime AS start_time, EndTime AS end_time,
    Value AS value, Error AS error
FROM PipelineRunTasks WHERE RunID = ? ORDER BY Position, length(Name), Name

-- name: set_task
-- Params: status, attempts, failures, next attempt, start, end, value (JSON), error, run id,
-- name.
UPDATE PipelineRunTasks SET Status = ?, Attempts = ?, Failures = ?, NextAttempt = ?,
    StartTime = ?, EndTime = ?, Value = ?, Error = ?
WHERE RunID = ? AND Name = ?

-- name: set_task_status
-- Params: status, end, error, run id, name.
UPDATE PipelineRunTasks SET Status = ?, EndTime = ?, Error = ? WHERE RunID = ? AND Name = ?

-- name: redefine_task
-- Params: position, after (JSON), definition, run id, name.
UPDATE PipelineRunTasks SET Position = ?, After = ?, Definition = ? WHERE RunID = ? AND Name = ?

-- name: delete_run_task
DELETE FROM PipelineRunTasks WHERE RunID = ? AND Name = ?

-- name: insert_attempt
-- Params: log id, run id, task, attempt number, deadline (epoch seconds or NULL), the
-- sending driver's lease token.
INSERT INTO PipelineAttempts(LogID, RunID, Task, Attempt, Deadline, LeaseToken)
VALUES (?, ?, ?, ?, ?, ?)

-- name: open_attempts
SELECT LogID AS log_id, Task AS task, Deadline AS deadline FROM PipelineAttempts
WHERE RunID = ? AND Outcome IS NULL

-- name: close_attempt
-- Once only: the transaction that records an attempt's outcome (its AsyncDone, its timeout,
-- a cancel) changes one row here; the outcome of an attempt closed already changes none.
UPDATE PipelineAttempts SET Outcome = ? WHERE LogID = ? AND Outcome IS NULL

-- name: run_attempts
-- Status: the attempt's outcome for the run once recorded, else its ExecutionLog row's.
SELECT a.Task AS task, a.Attempt AS attempt, a.LogID AS log_id,
    COALESCE(a.Outcome, e.Status) AS status, e.StartTime AS start_time,
    e.EndTime AS end_time, e.Error AS error
FROM PipelineAttempts a JOIN ExecutionLog e ON e.LogID = a.LogID
WHERE a.RunID = ? ORDER BY a.LogID

-- Schedules (migration 0012): one row and one dialog (its conversation timer) each.

-- name: upsert_schedule
-- Params: name, file, params (JSON), every, cron, timezone, catchup, overlap, max active
-- runs, next due, dialog handle, created time.
INSERT INTO PipelineSchedules(Name, File, Params, Every, Cron, Timezone, Catchup, Overlap,
    MaxActiveRuns, NextDue, Handle, CreatedTime)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (Name) DO UPDATE SET File = excluded.File, Params = excluded.Params,
    Every = excluded.Every, Cron = excluded.Cron, Timezone = excluded.Timezone,
    Catchup = excluded.Catchup, Overlap = excluded.Overlap,
    MaxActiveRuns = excluded.MaxActiveRuns, NextDue = excluded.NextDue,
    Handle = excluded.Handle

-- name: schedule_by_name
SELECT Name AS name, File AS file, Params AS params, Every AS every, Cron AS cron,
    Timezone AS timezone, Catchup AS catchup, Overlap AS overlap,
    MaxActiveRuns AS max_active_runs, NextDue AS next_due, Handle AS handle
FROM PipelineSchedules WHERE Name = ?

-- name: schedule_by_handle
SELECT Name AS name, File AS file, Params AS params, Every AS every, Cron AS cron,
    Timezone AS timezone, Catchup AS catchup, Overlap AS overlap,
    MaxActiveRuns AS max_active_runs, NextDue AS next_due, Handle AS handle
FROM PipelineSchedules WHERE Handle = ?

-- name: list_schedules
SELECT Name AS name, File AS file, Params AS params, Every AS every, Cron AS cron,
    Timezone AS timezone, Catchup AS catchup, Overlap AS overlap,
    MaxActiveRuns AS max_active_runs, NextDue AS next_due, Handle AS handle
FROM PipelineSchedules ORDER BY Name

-- name: set_next_due
UPDATE PipelineSchedules SET NextDue = ? WHERE Name = ?

-- name: delete_schedule
DELETE FROM PipelineSchedules WHERE Name = ?

-- name: running_runs_of_schedule
SELECT count(*) AS runs FROM PipelineRuns WHERE Schedule = ? AND Status = 'running'

-- name: runs_ahead
-- A run of a schedule goes when fewer than its max_active_runs runs of the schedule are
-- running ahead of it (an earlier Turn); it waits meanwhile (overlap = "queue", backfills).
-- A run whose schedule was removed goes one at a time.
SELECT (SELECT count(*) FROM PipelineRuns r
        WHERE r.Schedule = me.Schedule AND r.Status = 'running' AND r.Turn < me.Turn) AS ahead,
    coalesce((SELECT s.MaxActiveRuns FROM PipelineSchedules s WHERE s.Name = me.Schedule), 1)
        AS most
FROM PipelineRuns me WHERE me.RunID = ?

-- name: insert_skipped_run
-- A tick not run: max_active_runs runs of the schedule going (overlap = "skip"), or the tick
-- has a run already. Params: pipeline, file, params (JSON), time, time, schedule, scheduled
-- for, tick, why.
INSERT INTO PipelineRuns(Pipeline, File, Params, Status, StartTime, EndTime, Schedule,
    ScheduledFor, Tick, Error)
VALUES (?, ?, ?, 'skipped', ?, ?, ?, ?, ?, ?)

-- Scheduled data (migration 0016): the ticks a schedule's runs are for, claimed once.

-- name: lock_schedule
-- First in a transaction that claims ticks of the schedule or counts its runs in flight:
-- such transactions go one at a time (SQLite: the write lock; PostgreSQL: the row's lock).
UPDATE PipelineSchedules SET MaxActiveRuns = MaxActiveRuns WHERE Name = ?

-- name: tick_run
-- The run of a tick of the schedule (not a `skipped` record), if it has one.
SELECT RunID AS run_id, Status AS status, ScheduledFor AS scheduled_for, File AS file,
    Params AS params FROM PipelineRuns
WHERE Schedule = ? AND Tick = ? AND Status <> 'skipped'

-- name: requeue_run
-- A run of a schedule run again (a backfill's reprocess): its turn after every other's.
UPDATE PipelineRuns SET Turn = (SELECT coalesce(max(Turn), 0) + 1 FROM PipelineRuns
                                WHERE Schedule = ?)
WHERE RunID = ?

-- name: count_schedule_runs
-- sbroker_schedule_runs_total{schedule, outcome}. Params: schedule, outcome, how many.
INSERT INTO PipelineScheduleCounters(Schedule, Outcome, Total) VALUES (?, ?, ?)
ON CONFLICT (Schedule, Outcome)
DO UPDATE SET Total = PipelineScheduleCounters.Total + excluded.Total
