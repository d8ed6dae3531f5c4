-- Runs that outlive their driver (docs/pipelines.md, "Running in production"): the process
-- that drives a run holds its lease, renewed by each of its bookkeeping commits, which also
-- check its fencing token (LeaseToken, one more at each new driver). A lease is live while
-- LeaseExpires (Unix seconds by the database's clock) is ahead and its broker session
-- (LeaseSession) lives; DriverHost and DriverPid name the driver. Takeovers counts how often
-- another process took a running run over; CancelRequested is `sbroker runs cancel`'s ask.
ALTER TABLE PipelineRuns ADD COLUMN LeaseToken INTEGER NOT NULL DEFAULT 0;
ALTER TABLE PipelineRuns ADD COLUMN LeaseSession INTEGER;
ALTER TABLE PipelineRuns ADD COLUMN LeaseExpires REAL;
ALTER TABLE PipelineRuns ADD COLUMN LeaseSeconds REAL NOT NULL DEFAULT 30;
ALTER TABLE PipelineRuns ADD COLUMN DriverHost TEXT;
ALTER TABLE PipelineRuns ADD COLUMN DriverPid INTEGER;
ALTER TABLE PipelineRuns ADD COLUMN Takeovers INTEGER NOT NULL DEFAULT 0;
ALTER TABLE PipelineRuns ADD COLUMN CancelRequested INTEGER NOT NULL DEFAULT 0;
-- The token of the driver that sent each attempt: attempts in the order they were sent have
-- tokens that never go down (a driver that lost its lease sends nothing more).
ALTER TABLE PipelineAttempts ADD COLUMN LeaseToken INTEGER NOT NULL DEFAULT 0;
-- What servers look through for runs to take over.
CREATE INDEX PipelineRuns_running ON PipelineRuns(RunID) WHERE Status = 'running';
-- The stage runner's names of ExecutionLog rows: runs have one runner now, whose attempts
-- name their tasks (PipelineAttempts).
DROP TABLE IF EXISTS PipelineTasks;
