-- Scheduled data (docs/pipelines.md, "Data intervals and backfills"). ScheduledFor: the time
-- a run is for (ISO 8601, seconds, with the UTC offset of its schedule's timezone): the tick
-- of a scheduled or backfilled run, the start of any other. Tick: that tick in Unix
-- milliseconds, for a run of a schedule's tick. A tick has at most one run that is not a
-- `skipped` record: the key on (Schedule, Tick) lets the live schedule and any number of
-- backfills claim a tick once, and a tick run again is run again in place. Turn: the order
-- in which a schedule's runs may go, max_active_runs at a time (set each time a run of the
-- schedule starts or starts again).
ALTER TABLE PipelineRuns ADD COLUMN ScheduledFor TEXT;
ALTER TABLE PipelineRuns ADD COLUMN Tick INTEGER;
ALTER TABLE PipelineRuns ADD COLUMN Turn INTEGER;
UPDATE PipelineRuns SET Turn = RunID WHERE Schedule IS NOT NULL;
CREATE UNIQUE INDEX PipelineRuns_tick ON PipelineRuns(Schedule, Tick)
    WHERE Tick IS NOT NULL AND Status <> 'skipped';
CREATE INDEX PipelineRuns_schedule ON PipelineRuns(Schedule, Turn) WHERE Status = 'running';
ALTER TABLE PipelineSchedules ADD COLUMN MaxActiveRuns INTEGER NOT NULL DEFAULT 1;
-- sbroker_schedule_runs_total{schedule, outcome} of /metrics: counted in the transaction
-- that starts, skips or drops a tick, so it never goes down and agrees across processes.
CREATE TABLE PipelineScheduleCounters (
    Schedule TEXT NOT NULL,
    Outcome TEXT NOT NULL,
    Total INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (Schedule, Outcome)
);
