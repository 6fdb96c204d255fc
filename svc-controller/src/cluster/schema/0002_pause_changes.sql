-- The nodes read pause states back now and then, for signals lost while a listener
-- reconnected. Each change of a job's pause state takes the next number of one sequence,
-- under a transaction lock, so that the numbers commit in order: a node then reads only
-- the rows changed since the highest number it saw, instead of every job every time.
CREATE SEQUENCE svc_pause_changes;
ALTER TABLE svc_jobs ADD COLUMN paused_change bigint NOT NULL DEFAULT 0;
CREATE INDEX svc_jobs_paused_change ON svc_jobs (paused_change) WHERE paused_change > 0;
