-- Reverts 0006_training_jobs.up.sql; the traces keep their job, rank and world size.
DROP INDEX IF EXISTS traces_job_rank_idx;
DROP TABLE IF EXISTS training_jobs;
