-- Scheduled data (docs/pipelines.md, "Data intervals and backfills"). ScheduledFor: the time
-- a run is for (ISO 8601, seconds, with the UTC offset of its schedule's timezone): the tick
-- of a scheduled or backfilled run, the start of any other. Tick: that tick in Unix
-- milliseconds, for a run of a schedule's tick. A tick has at most one run that is not a
-- `skipped` record: the key on (Schedule, Tick) lets the live schedule and any number of
-- backfills claim a tick once, and a tick run again is run again in place. Turn: the order
-- in which a schedule's runs may go, max_active_runs at a time (set each time a run of the
-- schedule starts or starts again).
ALTER TABLE PipelineRuns ADD COLUMN ScheduledFor text;
ALTER TABLE PipelineRuns ADD COLUMN Tick bigint;
ALTER TABLE PipelineRuns ADD COLUMN Turn bigint;
UPDATE PipelineRuns SET Turn = RunID WHERE Schedule IS NOT NULL;
CREATE UNIQUE INDEX PipelineRuns_tick ON PipelineRuns(Schedule, Tick)
    WHERE Tick IS NOT NULL AND Status <> 'skipped';
CREATE INDEX PipelineRuns_schedule ON PipelineRuns(Schedule, Turn) WHERE Status = 'running';
ALTER TABLE PipelineSchedules ADD COLUMN MaxActiveRuns integer NOT NULL DEFAULT 1;
-- sbroker_schedule_runs_total{schedule, outcome} of /metrics: counted in the transaction
-- that starts, skips or drops a tick, so it never goes down and agrees across processes.
CREATE TABLE PipelineScheduleCounters (
    Schedule text NOT NULL,
    Outcome text NOT NULL,
    Total bigint NOT NULL DEFAULT 0,
    PRIMARY KEY (Schedule, Outcome)
);
