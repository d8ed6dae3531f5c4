-- The stage and name of each task a pipeline run sent, beside the scheduler's ExecutionLog,
-- so that the dashboard's timeline shows a run's stages by name.

-- name: create_pipeline_tasks
CREATE TABLE IF NOT EXISTS PipelineTasks (
    LogID INTEGER PRIMARY KEY,
    SchedulerHandle TEXT NOT NULL,
    Pipeline TEXT NOT NULL,
    StageIndex INTEGER NOT NULL,
    Stage TEXT NOT NULL,
    Task TEXT NOT NULL
)

-- name: insert_pipeline_task
INSERT INTO PipelineTasks(LogID, SchedulerHandle, Pipeline, StageIndex, Stage, Task)
VALUES (:log_id, :handle, :pipeline, :stage_index, :stage, :task)
