-- Reverie trace store, initial schema. See docs/internals/store.md.
--
-- Every table that holds per-trace data has trace_id first in its primary
-- key, so the trace tables can later be hash-distributed by trace_id (Citus)
-- with shard-local joins; platforms is small and shared (a reference table).

-- The machine a trace came from. identity_key is the lowercase hex SHA-256
-- of the six identity fields joined by newlines (computed by the server, see
-- rv_db_platform_key), so the same machine always maps to the same row.
CREATE TABLE platforms (
    id              bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    identity_key    text NOT NULL UNIQUE CHECK (identity_key ~ '^[0-9a-f]{64}$'),
    gpu_model       text NOT NULL DEFAULT '',
    gpus_per_node   integer NOT NULL DEFAULT 0 CHECK (gpus_per_node >= 0),
    cpu_model       text NOT NULL DEFAULT '',
    driver          text NOT NULL DEFAULT '',
    runtime_version text NOT NULL DEFAULT '', -- e.g. 'CUDA 12.1' or 'ROCm 6.2'
    framework       text NOT NULL DEFAULT '', -- e.g. 'PyTorch 2.1.0'
    created_at      timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE traces (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    job            text NOT NULL DEFAULT '',
    rank           integer CHECK (rank >= 0),            -- NULL: unknown
    world_size     integer CHECK (world_size >= 1),      -- NULL: unknown
    platform_id    bigint NOT NULL REFERENCES platforms (id),
    uploaded_at    timestamptz NOT NULL DEFAULT now(),
    source_format  text NOT NULL,                        -- 'kineto', 'collector'
    measured_us    double precision,                     -- measured iteration time
    tasks          bigint NOT NULL CHECK (tasks > 0),    -- events kept by the reader
    iterations     integer NOT NULL DEFAULT 0 CHECK (iterations >= 0),
    content_sha256 text NOT NULL UNIQUE CHECK (content_sha256 ~ '^[0-9a-f]{64}$'),
    summary        jsonb NOT NULL DEFAULT '{}'::jsonb,
    tags           text[] NOT NULL DEFAULT '{}'
);
CREATE INDEX traces_platform_idx ON traces (platform_id, id);
CREATE INDEX traces_job_idx ON traces (job, id);
CREATE INDEX traces_uploaded_idx ON traces (uploaded_at);
CREATE INDEX traces_tags_idx ON traces USING gin (tags);

-- The upload exactly as received. encoding says how bytes relates to it:
-- 'identity' = bytes are the received bytes (already gzip-compressed on the
-- wire), 'gzip' = bytes are gzip(received bytes). size is the received size.
CREATE TABLE trace_originals (
    trace_id bigint NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    encoding text NOT NULL CHECK (encoding IN ('identity', 'gzip')),
    size     bigint NOT NULL CHECK (size >= 0),
    bytes    bytea NOT NULL,
    PRIMARY KEY (trace_id)
);
-- Already compressed: keep TOAST from trying pglz again.
ALTER TABLE trace_originals ALTER COLUMN bytes SET STORAGE EXTERNAL;

-- The parsed trace in engine/rv_snapshot.h format (zlib inside). Keyed by
-- format version too, so a newer server can add its own beside the old one.
CREATE TABLE trace_snapshots (
    trace_id       bigint NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    format_version integer NOT NULL,
    raw_size       bigint NOT NULL,
    bytes          bytea NOT NULL,
    created_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (trace_id, format_version)
);
ALTER TABLE trace_snapshots ALTER COLUMN bytes SET STORAGE EXTERNAL;

-- Host-overhead samples (T1..T5, engine/rv_overhead.h) of each trace.
-- platform_id is copied from the trace so that a platform's statistics are
-- an index range scan; op_name is the op (or the runtime call for T4).
CREATE TABLE overhead_samples (
    trace_id    bigint NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    seq         integer NOT NULL,
    platform_id bigint NOT NULL,
    type        smallint NOT NULL CHECK (type BETWEEN 1 AND 5),
    op_name     text NOT NULL,
    value_us    double precision NOT NULL,
    PRIMARY KEY (trace_id, seq)
);
CREATE INDEX overhead_samples_platform_idx ON overhead_samples (platform_id, type, op_name);

-- Shared per-platform statistics after IQR outlier removal; op_name '*' is
-- the type's overall row. samples = before removal, count = kept.
CREATE TABLE platform_overheads (
    platform_id bigint NOT NULL REFERENCES platforms (id) ON DELETE CASCADE,
    type        smallint NOT NULL CHECK (type BETWEEN 1 AND 5),
    op_name     text NOT NULL,
    samples     bigint NOT NULL,
    count       bigint NOT NULL,
    mean        double precision NOT NULL,
    std         double precision NOT NULL,
    median      double precision NOT NULL,
    p90         double precision NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (platform_id, type, op_name)
);

-- What-if answers keyed by trace and the SHA-256 of the canonical request.
CREATE TABLE whatif_cache (
    trace_id     bigint NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    request_hash text NOT NULL CHECK (request_hash ~ '^[0-9a-f]{64}$'),
    result       jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (trace_id, request_hash)
);

-- API tokens: only the SHA-256 of a token is stored.
CREATE TABLE api_tokens (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name         text NOT NULL,
    token_sha256 text NOT NULL UNIQUE CHECK (token_sha256 ~ '^[0-9a-f]{64}$'),
    scopes       text[] NOT NULL DEFAULT '{}',
    created_at   timestamptz NOT NULL DEFAULT now(),
    last_used_at timestamptz,
    revoked_at   timestamptz
);

-- Asynchronous work (ingest, fleet-wide what-ifs), claimed by any replica
-- with SELECT ... FOR UPDATE SKIP LOCKED.
CREATE TABLE jobs (
    id           bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    kind         text NOT NULL,
    state        text NOT NULL DEFAULT 'queued'
                 CHECK (state IN ('queued', 'running', 'done', 'failed')),
    request      jsonb NOT NULL DEFAULT '{}'::jsonb,
    progress     real NOT NULL DEFAULT 0 CHECK (progress >= 0 AND progress <= 1),
    result       jsonb,
    error        text,
    locked_by    text,
    attempts     integer NOT NULL DEFAULT 0,
    created_at   timestamptz NOT NULL DEFAULT now(),
    started_at   timestamptz,
    heartbeat_at timestamptz,
    finished_at  timestamptz
);
CREATE INDEX jobs_queued_idx ON jobs (id) WHERE state = 'queued';
CREATE INDEX jobs_running_idx ON jobs (heartbeat_at) WHERE state = 'running';
