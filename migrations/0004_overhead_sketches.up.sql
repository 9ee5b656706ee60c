-- Platform overhead statistics kept as mergeable sketches
-- (engine/rv_sketch.h; docs/internals/store.md, "Overhead statistics").
--
-- An upload adds its own per-group sketches to its platform's in one short
-- upsert (rv_overheads_merge_trace), in O(groups of the new trace), instead
-- of recomputing the statistics over every stored sample. Raw samples are
-- not kept: each trace's sketches are (trace_overhead_sketches), so that a
-- delete or a rebuild recomputes the platform's sketches from the remaining
-- traces' sketches exactly (rv_overheads_rebuild), never from samples.
--
-- A sketch: n values, zeros of them below 0.0005 us, their sum, sum of
-- squares, min and max (us), and the histogram as parallel arrays of bucket
-- keys (ascending) and counts. Bucket k holds (gamma^(k-1), gamma^k] with
-- gamma = 1.01 / 0.99 (1% relative error); the C side and rv_sketch_key
-- below must agree (RV_SKETCH_ALPHA, RV_SKETCH_MIN, RV_SKETCH_KMIN/KMAX).

CREATE TABLE trace_overhead_sketches (
    trace_id bigint NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    type     smallint NOT NULL CHECK (type BETWEEN 1 AND 5),
    op_name  text NOT NULL, -- '*' = the type's overall group
    n        bigint NOT NULL CHECK (n >= 0),
    zeros    bigint NOT NULL CHECK (zeros >= 0),
    sum      double precision NOT NULL,
    sumsq    double precision NOT NULL,
    min      double precision NOT NULL,
    max      double precision NOT NULL,
    keys     integer[] NOT NULL,
    counts   bigint[] NOT NULL,
    PRIMARY KEY (trace_id, type, op_name)
);

CREATE TABLE platform_overhead_sketches (
    platform_id bigint NOT NULL REFERENCES platforms (id) ON DELETE CASCADE,
    type        smallint NOT NULL CHECK (type BETWEEN 1 AND 5),
    op_name     text NOT NULL,
    n           bigint NOT NULL CHECK (n >= 0),
    zeros       bigint NOT NULL CHECK (zeros >= 0),
    sum         double precision NOT NULL,
    sumsq       double precision NOT NULL,
    min         double precision NOT NULL,
    max         double precision NOT NULL,
    keys        integer[] NOT NULL,
    counts      bigint[] NOT NULL,
    updated_at  timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (platform_id, type, op_name)
);

-- The bucket of a value (NULL: the zero bucket), as rv_sketch_key.
CREATE FUNCTION rv_sketch_key(v double precision) RETURNS integer
LANGUAGE sql IMMUTABLE STRICT AS $$
    SELECT CASE WHEN v < 0.0005 THEN NULL
                ELSE greatest(-381, least(1100, ceil(ln(v) / ln(1.01::float8 / 0.99))))::integer
           END
$$;

-- Two histograms added bucket by bucket.
CREATE FUNCTION rv_sketch_merge(k1 integer[], c1 bigint[], k2 integer[], c2 bigint[],
                                OUT keys integer[], OUT counts bigint[])
LANGUAGE sql IMMUTABLE AS $$
    SELECT coalesce(array_agg(k ORDER BY k), '{}'), coalesce(array_agg(c ORDER BY k), '{}')
    FROM (SELECT k, sum(c)::bigint AS c
          FROM (SELECT * FROM unnest(k1, c1) UNION ALL SELECT * FROM unnest(k2, c2)) AS u(k, c)
          GROUP BY k) AS g
$$;

-- Adds trace tid's sketches to platform pid's. Ingests of one platform share
-- the platform's advisory lock (a rebuild takes it alone) and lock the rows
-- they touch in (type, op_name) order, so two of them never deadlock; the
-- row locks last until the caller commits, which follows at once.
-- updated_at is the clock's time, not the transaction's start, so that a
-- platform's version (row count and latest update, rv_db_trace_overheads)
-- moves forward even when an ingest that began earlier commits later.
CREATE FUNCTION rv_overheads_merge_trace(pid bigint, tid bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    nrows bigint;
BEGIN
    PERFORM pg_advisory_xact_lock_shared(19, (pid % 2147483647)::integer);
    INSERT INTO platform_overhead_sketches AS p
        (platform_id, type, op_name, n, zeros, sum, sumsq, min, max, keys, counts, updated_at)
    SELECT pid, s.type, s.op_name, s.n, s.zeros, s.sum, s.sumsq, s.min, s.max, s.keys, s.counts,
           clock_timestamp()
    FROM trace_overhead_sketches s WHERE s.trace_id = tid ORDER BY s.type, s.op_name
    ON CONFLICT (platform_id, type, op_name) DO UPDATE SET
        n = p.n + EXCLUDED.n, zeros = p.zeros + EXCLUDED.zeros, sum = p.sum + EXCLUDED.sum,
        sumsq = p.sumsq + EXCLUDED.sumsq, min = least(p.min, EXCLUDED.min),
        max = greatest(p.max, EXCLUDED.max),
        (keys, counts) = (SELECT m.keys, m.counts
                          FROM rv_sketch_merge(p.keys, p.counts, EXCLUDED.keys, EXCLUDED.counts) m),
        updated_at = EXCLUDED.updated_at;
    GET DIAGNOSTICS nrows = ROW_COUNT;
    RETURN nrows;
END
$$;

-- Recomputes platform pid's sketches from the sketches of its stored traces
-- (after a delete, or on demand). Waits for the ingests in flight on the
-- platform to commit, so that none of them is lost.
CREATE FUNCTION rv_overheads_rebuild(pid bigint) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    nrows bigint;
BEGIN
    PERFORM pg_advisory_xact_lock(19, (pid % 2147483647)::integer);
    DELETE FROM platform_overhead_sketches WHERE platform_id = pid;
    INSERT INTO platform_overhead_sketches
        (platform_id, type, op_name, n, zeros, sum, sumsq, min, max, keys, counts, updated_at)
    WITH s AS (SELECT o.* FROM trace_overhead_sketches o JOIN traces t ON t.id = o.trace_id
               WHERE t.platform_id = pid),
    m AS (SELECT type, op_name, sum(n)::bigint AS n, sum(zeros)::bigint AS zeros, sum(sum) AS sum,
                 sum(sumsq) AS sumsq, min(min) AS min, max(max) AS max
          FROM s GROUP BY type, op_name),
    b AS (SELECT s.type, s.op_name, u.k, sum(u.c)::bigint AS c
          FROM s, unnest(s.keys, s.counts) AS u(k, c) GROUP BY s.type, s.op_name, u.k),
    h AS (SELECT type, op_name, array_agg(k ORDER BY k) AS keys, array_agg(c ORDER BY k) AS counts
          FROM b GROUP BY type, op_name)
    SELECT pid, m.type, m.op_name, m.n, m.zeros, m.sum, m.sumsq, m.min, m.max,
           coalesce(h.keys, '{}'), coalesce(h.counts, '{}'), clock_timestamp()
    FROM m LEFT JOIN h USING (type, op_name) ORDER BY m.type, m.op_name;
    GET DIAGNOSTICS nrows = ROW_COUNT;
    RETURN nrows;
END
$$;

-- Stored traces keep their statistics: their samples become sketches.
INSERT INTO trace_overhead_sketches
    (trace_id, type, op_name, n, zeros, sum, sumsq, min, max, keys, counts)
WITH s AS (SELECT trace_id, type, op_name, value_us AS v FROM overhead_samples
           UNION ALL SELECT trace_id, type, '*', value_us FROM overhead_samples),
m AS (SELECT trace_id, type, op_name, count(*) AS n, count(*) FILTER (WHERE v < 0.0005) AS zeros,
             sum(v) AS sum, sum(v * v) AS sumsq, min(v) AS min, max(v) AS max
      FROM s GROUP BY trace_id, type, op_name),
b AS (SELECT trace_id, type, op_name, rv_sketch_key(v) AS k, count(*) AS c
      FROM s WHERE v >= 0.0005 GROUP BY trace_id, type, op_name, rv_sketch_key(v)),
h AS (SELECT trace_id, type, op_name, array_agg(k ORDER BY k) AS keys,
             array_agg(c ORDER BY k) AS counts
      FROM b GROUP BY trace_id, type, op_name)
SELECT m.trace_id, m.type, m.op_name, m.n, m.zeros, m.sum, m.sumsq, m.min, m.max,
       coalesce(h.keys, '{}'), coalesce(h.counts, '{}')
FROM m LEFT JOIN h USING (trace_id, type, op_name);
SELECT rv_overheads_rebuild(id) FROM platforms ORDER BY id;

DROP TABLE platform_overheads;
DROP TABLE overhead_samples;
