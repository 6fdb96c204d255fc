-- Cluster mode's schema: what the controllers of one cluster share. Every guarantee that
-- several nodes must keep together rests on a key or a constraint here, not on the code
-- of one node (see docs/cluster.md).

-- The nodes, as each one announces itself; heartbeat_at says which are alive.
CREATE TABLE svc_nodes (
    name            text PRIMARY KEY,
    started_at      timestamptz NOT NULL,
    heartbeat_at    timestamptz NOT NULL,
    max_job_running integer NOT NULL CHECK (max_job_running > 0)
);

-- One row per job of the cluster: its pause state and its last run counter. The counter
-- row is locked while a run takes its number, so counters are handed out one at a time.
CREATE TABLE svc_jobs (
    kind    text NOT NULL CHECK (kind IN ('job', 'job_http')),
    id      text NOT NULL,
    paused  boolean NOT NULL DEFAULT false,
    counter bigint NOT NULL DEFAULT 0 CHECK (counter >= 0),
    PRIMARY KEY (kind, id)
);

-- The hash of each node's definition of each job, to tell a node whose definitions differ.
CREATE TABLE svc_job_defs (
    kind     text NOT NULL,
    id       text NOT NULL,
    node     text NOT NULL,
    def_hash text NOT NULL,
    seen_at  timestamptz NOT NULL,
    PRIMARY KEY (kind, id, node),
    FOREIGN KEY (kind, id) REFERENCES svc_jobs ON DELETE CASCADE
);

-- Timer slots: whoever inserts (kind, id, slot) first runs it; the key makes it once.
CREATE TABLE svc_slots (
    kind       text NOT NULL,
    id         text NOT NULL,
    slot       timestamptz NOT NULL,
    node       text NOT NULL,
    claimed_at timestamptz NOT NULL,
    PRIMARY KEY (kind, id, slot),
    FOREIGN KEY (kind, id) REFERENCES svc_jobs ON DELETE CASCADE
);

-- Runs, from the accepted trigger (queued) through the run (running, on one node, under a
-- lease) to its end (done).
CREATE TABLE svc_runs (
    run_id      bigserial PRIMARY KEY,
    kind        text NOT NULL,
    id          text NOT NULL,
    state       text NOT NULL CHECK (state IN ('queued', 'running', 'done')),
    counter     bigint,
    trigger     jsonb NOT NULL,
    attempt     integer NOT NULL DEFAULT 1 CHECK (attempt > 0),
    accepted_by text NOT NULL,
    accepted_at timestamptz NOT NULL,
    node        text,
    lease_until timestamptz,
    started_at  timestamptz,
    ended_at    timestamptz,
    status      text CHECK (status IN ('success', 'fail', 'canceled', 'timeout', 'interrupted')),
    exit_code   integer,
    signal      integer,
    http_status integer,
    summary     text,
    FOREIGN KEY (kind, id) REFERENCES svc_jobs,
    -- A queued run belongs to no node yet; a running one has its node, number and lease;
    -- a done one its end.
    CHECK (state <> 'queued' OR (node IS NULL AND counter IS NULL AND lease_until IS NULL)),
    CHECK (state <> 'running'
           OR (node IS NOT NULL AND counter IS NOT NULL AND lease_until IS NOT NULL
               AND started_at IS NOT NULL)),
    CHECK (state <> 'done' OR (ended_at IS NOT NULL AND status IS NOT NULL))
);
-- The one-slot queue, cluster-wide: at most one queued run per job.
CREATE UNIQUE INDEX svc_runs_one_queued ON svc_runs (kind, id) WHERE state = 'queued';
-- One run at a time per job, cluster-wide.
CREATE UNIQUE INDEX svc_runs_one_running ON svc_runs (kind, id) WHERE state = 'running';
-- Run counters are never given twice.
CREATE UNIQUE INDEX svc_runs_counter ON svc_runs (kind, id, counter) WHERE counter IS NOT NULL;
-- What the claimers scan (oldest first) and the reaper looks at.
CREATE INDEX svc_runs_queued ON svc_runs (run_id) WHERE state = 'queued';
CREATE INDEX svc_runs_leases ON svc_runs (lease_until) WHERE state = 'running';
-- A job's runs, newest first (history, the UI).
CREATE INDEX svc_runs_by_job ON svc_runs (kind, id, run_id DESC);

-- The replay stores (delivery IDs, nonces, spent signatures): a key is accepted once.
CREATE TABLE svc_replay (
    store   text NOT NULL,
    key     bytea NOT NULL,
    seen_at timestamptz NOT NULL,
    PRIMARY KEY (store, key)
);
CREATE INDEX svc_replay_seen ON svc_replay (seen_at);

-- The audit log, numbered by the database.
CREATE TABLE svc_audit (
    seq   bigserial PRIMARY KEY,
    at    timestamptz NOT NULL,
    entry jsonb NOT NULL
);

-- Run logs, in chunks numbered per run.
CREATE TABLE svc_log_chunks (
    run_id bigint NOT NULL REFERENCES svc_runs ON DELETE CASCADE,
    seq    integer NOT NULL CHECK (seq >= 0),
    data   bytea NOT NULL,
    PRIMARY KEY (run_id, seq)
);

-- Named leases (the housekeeping leader's): held by one holder until they expire.
CREATE TABLE svc_leases (
    name       text PRIMARY KEY,
    holder     text NOT NULL,
    expires_at timestamptz NOT NULL
);
