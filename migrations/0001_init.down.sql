-- Reverts 0001_init.up.sql: drops every table it created, dependents first.
DROP TABLE IF EXISTS jobs;
DROP TABLE IF EXISTS api_tokens;
DROP TABLE IF EXISTS whatif_cache;
DROP TABLE IF EXISTS platform_overheads;
DROP TABLE IF EXISTS overhead_samples;
DROP TABLE IF EXISTS trace_snapshots;
DROP TABLE IF EXISTS trace_originals;
DROP TABLE IF EXISTS traces;
DROP TABLE IF EXISTS platforms;
