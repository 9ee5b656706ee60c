-- The what-if cache keeps the exact bytes sent to clients (text: jsonb would
-- reorder keys and reformat numbers) and, in typed columns, the answer's
-- summary figures (engine/rv_run.h rv_run_summary), so that a fleet row is
-- read without parsing JSON. It is a cache: the old rows are dropped.
DROP TABLE IF EXISTS whatif_cache;
CREATE TABLE whatif_cache (
    trace_id          bigint NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    request_hash      text NOT NULL CHECK (request_hash ~ '^[0-9a-f]{64}$'),
    body              text NOT NULL,
    measured_us       double precision NOT NULL,
    baseline_us       double precision NOT NULL,
    predicted_us      double precision NOT NULL,
    speedup           double precision NOT NULL,
    replay_error      double precision NOT NULL,
    have_energy       boolean NOT NULL,
    baseline_energy_j double precision NOT NULL,
    energy_j          double precision NOT NULL,
    warnings          integer NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (trace_id, request_hash)
);
