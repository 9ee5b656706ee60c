-- Training jobs: the traces of one distributed run (docs/internals/store.md,
-- "Training jobs"). A trace belongs to the job its name says once it also
-- knows its rank (from the upload or the trace's distributedInfo); the
-- ranks themselves stay on traces (job, rank, world_size), so deleting a
-- trace removes its rank from the job. This table gives each job name a
-- stable id for the API and remembers the largest world size declared.
CREATE TABLE training_jobs (
    id         bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name       text NOT NULL UNIQUE CHECK (name <> ''),
    world_size integer CHECK (world_size >= 1), -- NULL: no rank declared one
    created_at timestamptz NOT NULL DEFAULT now(),
    updated_at timestamptz NOT NULL DEFAULT now()
);

-- The ranks of a job, newest upload first within a rank.
CREATE INDEX traces_job_rank_idx ON traces (job, rank, id) WHERE rank IS NOT NULL;

-- Traces stored before this migration form their jobs too, oldest first.
INSERT INTO training_jobs (name, world_size)
SELECT job, max(world_size) FROM traces
WHERE job <> '' AND rank IS NOT NULL
GROUP BY job ORDER BY min(id);
