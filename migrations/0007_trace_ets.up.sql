-- Execution traces attached to stored Kineto traces (docs/internals/store.md,
-- "Execution traces"). The ET of a run, uploaded after its Kineto trace,
-- is kept as received (gzip-compressed unless it was already) beside the
-- trace; the joined shapes and memory model go into the trace's snapshot.
-- An ET uploaded alone is a trace of its own (source_format 'et') whose
-- original is the ET: it needs no row here.
CREATE TABLE trace_ets (
    trace_id    bigint NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    encoding    text NOT NULL CHECK (encoding IN ('identity', 'gzip')),
    size        bigint NOT NULL CHECK (size >= 0),
    bytes       bytea NOT NULL,
    ops         integer NOT NULL CHECK (ops >= 0),        -- trace ops an ET node matched
    join_method text NOT NULL CHECK (join_method IN ('id', 'order')),
    attached_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (trace_id)
);
-- Already compressed: keep TOAST from trying pglz again.
ALTER TABLE trace_ets ALTER COLUMN bytes SET STORAGE EXTERNAL;
