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
