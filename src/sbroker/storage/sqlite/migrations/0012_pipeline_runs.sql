-- Durable pipeline runs (docs/pipelines.md, apps/pipeline): a run, each of its tasks, and each attempt
-- of a task (an ExecutionLog row).  A run keeps one scheduler dialog (SchedulerHandle) for
-- its whole life, across processes: a resume takes the AsyncDone messages a dead process
-- left on it, and the retry timer is that dialog's conversation timer.  An attempt's Outcome
-- is written once, in the transaction that consumes its AsyncDone.  Schedules fire on
-- conversation timers of their own dialogs.
CREATE TABLE PipelineRuns (
    RunID INTEGER PRIMARY KEY AUTOINCREMENT,
    Pipeline TEXT NOT NULL,
    File TEXT,
    Params TEXT NOT NULL DEFAULT '{}',
    Status TEXT NOT NULL DEFAULT 'running',
    StartTime TEXT NOT NULL,
    EndTime TEXT,
    SchedulerHandle TEXT,
    Schedule TEXT,
    Error TEXT
);
CREATE INDEX PipelineRuns_pipeline ON PipelineRuns(Pipeline, RunID);
CREATE TABLE PipelineRunTasks (
    RunID INTEGER NOT NULL,
    Name TEXT NOT NULL,
    Position INTEGER NOT NULL,
    After TEXT NOT NULL DEFAULT '[]',
    Definition TEXT NOT NULL,
    Status TEXT NOT NULL DEFAULT 'pending',
    Attempts INTEGER NOT NULL DEFAULT 0,
    Failures INTEGER NOT NULL DEFAULT 0,
    NextAttempt REAL,
    StartTime TEXT,
    EndTime TEXT,
    Value TEXT,
    Error TEXT,
    PRIMARY KEY (RunID, Name)
);
CREATE TABLE PipelineAttempts (
    LogID INTEGER PRIMARY KEY,
    RunID INTEGER NOT NULL,
    Task TEXT NOT NULL,
    Attempt INTEGER NOT NULL,
    Deadline REAL,
    Outcome TEXT
);
CREATE INDEX PipelineAttempts_run ON PipelineAttempts(RunID, Task);
CREATE TABLE PipelineSchedules (
    Name TEXT PRIMARY KEY,
    File TEXT NOT NULL,
    Params TEXT NOT NULL DEFAULT '{}',
    Every REAL,
    Cron TEXT,
    Timezone TEXT NOT NULL DEFAULT 'UTC',
    Catchup INTEGER NOT NULL DEFAULT 0,
    Overlap TEXT NOT NULL DEFAULT 'skip',
    NextDue REAL NOT NULL,
    Handle TEXT,
    CreatedTime TEXT NOT NULL
);
