-- Fleet jobs (docs/internals/server.md, "Fleet what-ifs and jobs").
--
-- A parent job expands into its shards once: each shard row names its
-- parent and its index (unique together), and the parent records when it
-- was expanded, so a parent claimed again after a restart never queues its
-- shards a second time. The parent finishes by counting (shards,
-- shards_done, shards_failed, bumped in the transaction that finishes a
-- shard), not by re-reading its shards. A job can be cancelled; created_by
-- is the token id that queued it (NULL without authentication).
ALTER TABLE jobs DROP CONSTRAINT IF EXISTS jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check
    CHECK (state IN ('queued', 'running', 'done', 'failed', 'cancelled'));
ALTER TABLE jobs
    ADD COLUMN parent_id     bigint REFERENCES jobs (id) ON DELETE CASCADE,
    ADD COLUMN shard_index   integer CHECK (shard_index >= 0),
    ADD COLUMN expanded_at   timestamptz,
    ADD COLUMN expansion     jsonb,
    ADD COLUMN shards        integer NOT NULL DEFAULT 0 CHECK (shards >= 0),
    ADD COLUMN shards_done   integer NOT NULL DEFAULT 0 CHECK (shards_done >= 0),
    ADD COLUMN shards_failed integer NOT NULL DEFAULT 0 CHECK (shards_failed >= 0),
    ADD COLUMN created_by    text;
ALTER TABLE jobs ADD CONSTRAINT jobs_parent_shard_key UNIQUE (parent_id, shard_index);
ALTER TABLE jobs ADD CONSTRAINT jobs_shard_has_index
    CHECK ((parent_id IS NULL) = (shard_index IS NULL));

-- Shards queued before this migration named their parent in the request
-- only: link them, in id order, and count them on their parents.
WITH s AS (
    SELECT c.id, p.id AS parent,
           row_number() OVER (PARTITION BY p.id ORDER BY c.id) - 1 AS idx
    FROM jobs c JOIN jobs p ON p.id = (c.request->>'parent')::bigint
    WHERE c.kind = 'fleet_shard' AND c.request->>'parent' ~ '^[0-9]+$'
)
UPDATE jobs j SET parent_id = s.parent, shard_index = s.idx FROM s WHERE j.id = s.id;
UPDATE jobs p SET expanded_at = p.started_at,
                  shards = c.n, shards_done = c.done, shards_failed = c.failed
FROM (SELECT parent_id, count(*) AS n, count(*) FILTER (WHERE state = 'done') AS done,
             count(*) FILTER (WHERE state = 'failed') AS failed
      FROM jobs WHERE parent_id IS NOT NULL GROUP BY parent_id) c
WHERE p.id = c.parent_id;

-- Claims take the lowest shard index first across parents (a small job's
-- shards do not wait behind every shard of a large one), then the oldest.
DROP INDEX IF EXISTS jobs_queued_idx;
CREATE INDEX jobs_queued_fair_idx ON jobs ((coalesce(shard_index, 0)), id)
    WHERE state = 'queued';
