-- Reverts 0003_fleet_jobs.up.sql. Cancelled jobs become failed ones (0002
-- has no cancelled state); the shard links and counters are dropped (the
-- shards keep their parent in request->>'parent').
DROP INDEX IF EXISTS jobs_queued_fair_idx;
CREATE INDEX IF NOT EXISTS jobs_queued_idx ON jobs (id) WHERE state = 'queued';
UPDATE jobs SET state = 'failed', error = coalesce(error, 'cancelled') WHERE state = 'cancelled';
ALTER TABLE jobs
    DROP COLUMN parent_id,
    DROP COLUMN shard_index,
    DROP COLUMN expanded_at,
    DROP COLUMN expansion,
    DROP COLUMN shards,
    DROP COLUMN shards_done,
    DROP COLUMN shards_failed,
    DROP COLUMN created_by;
ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('queued', 'running', 'done', 'failed'));
