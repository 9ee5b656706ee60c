-- Reverts 0004_overhead_sketches.up.sql. The raw samples were not kept, so
-- the old tables come back empty: statistics reappear as traces are
-- uploaded again (the old `reverie overheads rebuild` has no samples to
-- read).
CREATE TABLE IF NOT EXISTS overhead_samples (
    trace_id    bigint NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    seq         integer NOT NULL,
    platform_id bigint NOT NULL,
    type        smallint NOT NULL CHECK (type BETWEEN 1 AND 5),
    op_name     text NOT NULL,
    value_us    double precision NOT NULL,
    PRIMARY KEY (trace_id, seq)
);
CREATE INDEX IF NOT EXISTS overhead_samples_platform_idx
    ON overhead_samples (platform_id, type, op_name);
CREATE TABLE IF NOT EXISTS platform_overheads (
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
DROP FUNCTION IF EXISTS rv_overheads_rebuild(bigint);
DROP FUNCTION IF EXISTS rv_overheads_merge_trace(bigint, bigint);
DROP FUNCTION IF EXISTS rv_sketch_merge(integer[], bigint[], integer[], bigint[]);
DROP FUNCTION IF EXISTS rv_sketch_key(double precision);
DROP TABLE IF EXISTS platform_overhead_sketches;
DROP TABLE IF EXISTS trace_overhead_sketches;
