-- Who created a training job (issue 25, item 10): the token id of the upload
-- that first gave the job a rank ('' when the server ran without
-- authentication). Writing another rank into an existing job needs that
-- token or an admin token. Jobs made before this migration have none: only
-- an admin token writes into them.
ALTER TABLE training_jobs ADD COLUMN created_by text;
