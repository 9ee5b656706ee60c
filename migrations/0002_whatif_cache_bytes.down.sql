-- Reverts 0002_whatif_cache_bytes.up.sql: the cache goes back to the 0001
-- shape (one jsonb result per row). It is a cache: the rows are dropped.
DROP TABLE IF EXISTS whatif_cache;
CREATE TABLE whatif_cache (
    trace_id     bigint NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    request_hash text NOT NULL CHECK (request_hash ~ '^[0-9a-f]{64}$'),
    result       jsonb NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (trace_id, request_hash)
);
