-- The stage and name of each task a pipeline run sent, beside the scheduler's ExecutionLog,
-- so that the dashboard's timeline shows a run's stages by name.

-- name: create_pipeline_tasks
CREATE TABLE IF NOT EXISTS PipelineTasks (
    LogID bigint PRIMARY KEY,
    SchedulerHandle text NOT NULL,
    Pipeline text NOT NULL,
    StageIndex integer NOT NULL,
    Stage text NOT NULL,
    Task text NOT NULL
)

-- name: insert_pipeline_task
INSERT INTO PipelineTasks(LogID, SchedulerHandle, Pipeline, StageIndex, Stage, Task)
VALUES (%(log_id)s, %(handle)s, %(pipeline)s, %(stage_index)s, %(stage)s, %(task)s)

-- Durable runs (migration 0014): runs, their tasks and each task's attempts.

-- name: insert_run
-- Params: pipeline, file, params (JSON), start time, scheduler handle, schedule.
INSERT INTO PipelineRuns(Pipeline, File, Params, Status, StartTime, SchedulerHandle, Schedule)
VALUES (%s, %s, %s, 'running', %s, %s, %s)
RETURNING RunID

-- name: run_by_id
SELECT RunID, Pipeline, File, Params, Status, StartTime, EndTime, SchedulerHandle
FROM PipelineRuns WHERE RunID = %s

-- name: latest_unfinished
SELECT RunID FROM PipelineRuns WHERE Pipeline = %s AND Status <> 'succeeded'
ORDER BY RunID DESC LIMIT 1

-- name: list_runs
SELECT RunID, Pipeline, Status, StartTime, EndTime FROM PipelineRuns
ORDER BY RunID DESC LIMIT %s

-- name: list_runs_of
SELECT RunID, Pipeline, Status, StartTime, EndTime FROM PipelineRuns WHERE Pipeline = %s
ORDER BY RunID DESC LIMIT %s

-- name: set_run
-- Params: status, end time, scheduler handle, run id.
UPDATE PipelineRuns SET Status = %s, EndTime = %s, SchedulerHandle = %s WHERE RunID = %s

-- name: insert_run_task
-- Params: run id, name, position, after (JSON), definition.
INSERT INTO PipelineRunTasks(RunID, Name, Position, After, Definition) VALUES (%s, %s, %s, %s, %s)

-- name: run_tasks
SELECT Name, Position, After, Definition, Status, Attempts, Failures, NextAttempt, StartTime,
    EndTime, Value, Error
FROM PipelineRunTasks WHERE RunID = %s ORDER BY Position, length(Name), Name

-- name: set_task
-- Params: status, attempts, failures, next attempt, start, end, value (JSON), error, run id,
-- name.
UPDATE PipelineRunTasks SET Status = %s, Attempts = %s, Failures = %s, NextAttempt = %s,
    StartTime = %s, EndTime = %s, Value = %s, Error = %s
WHERE RunID = %s AND Name = %s

-- name: redefine_task
-- Params: position, after (JSON), definition, run id, name.
UPDATE PipelineRunTasks SET Position = %s, After = %s, Definition = %s WHERE RunID = %s AND Name = %s

-- name: delete_run_task
DELETE FROM PipelineRunTasks WHERE RunID = %s AND Name = %s

-- name: insert_attempt
-- Params: log id, run id, task, attempt number, deadline (epoch seconds or NULL).
INSERT INTO PipelineAttempts(LogID, RunID, Task, Attempt, Deadline) VALUES (%s, %s, %s, %s, %s)

-- name: open_attempts
SELECT LogID, Task, Deadline FROM PipelineAttempts WHERE RunID = %s AND Outcome IS NULL

-- name: close_attempt
-- Once only: the transaction that consumes an attempt's AsyncDone changes one row here; an
-- attempt superseded by a changed definition (Outcome set already) changes none.
UPDATE PipelineAttempts SET Outcome = %s WHERE LogID = %s AND Outcome IS NULL

-- name: run_attempts
SELECT a.Task, a.Attempt, a.LogID, e.Status, e.StartTime, e.EndTime, e.Error, a.Outcome
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
SELECT Name, File, Params, Every, Cron, Timezone, Catchup, Overlap, NextDue, Handle
FROM PipelineSchedules WHERE Name = %s

-- name: schedule_by_handle
SELECT Name, File, Params, Every, Cron, Timezone, Catchup, Overlap, NextDue, Handle
FROM PipelineSchedules WHERE Handle = %s

-- name: list_schedules
SELECT Name, File, Params, Every, Cron, Timezone, Catchup, Overlap, NextDue, Handle
FROM PipelineSchedules ORDER BY Name

-- name: set_next_due
UPDATE PipelineSchedules SET NextDue = %s WHERE Name = %s

-- name: delete_schedule
DELETE FROM PipelineSchedules WHERE Name = %s

-- name: running_runs_of_schedule
SELECT count(*) FROM PipelineRuns WHERE Schedule = %s AND Status = 'running'

-- name: insert_skipped_run
-- A due run not started (its previous run still going, overlap = "skip"). Params: pipeline,
-- file, params (JSON), time, schedule.
INSERT INTO PipelineRuns(Pipeline, File, Params, Status, StartTime, EndTime, Schedule, Error)
VALUES (%s, %s, %s, 'skipped', %s, %s, %s, 'the previous run of the schedule was still going')
