-- A cancel asked of a running run is kept with it: the node running it reads its own
-- requests back every few seconds, so a cancel whose signal it missed (its listening
-- connection was down) still ends the run.
ALTER TABLE svc_runs ADD COLUMN cancel_requested boolean NOT NULL DEFAULT false;
CREATE INDEX svc_runs_cancel_requested ON svc_runs (node)
    WHERE state = 'running' AND cancel_requested;
