-- What became of each claimed timer slot, written by the claim's own transaction:
-- 'queued' (its run was queued), 'busy' (the job had a run queued or running: the tick is
-- skipped, as on one node) or 'paused'. The timestamps of concurrent transactions (each
-- its start) cannot tell whether a run was still going when a claim looked; this can.
-- NULL for slots claimed before this migration.
ALTER TABLE svc_slots ADD COLUMN outcome text;
