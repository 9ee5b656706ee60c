ALTER TABLE training_jobs DROP COLUMN created_by;
