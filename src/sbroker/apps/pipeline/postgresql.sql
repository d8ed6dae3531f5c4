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
FROM PipelineRunTasks WHERE RunID = %s ORDER BY Position

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
