-- Attached execution traces go; the snapshots keep the joined shapes.
DROP TABLE IF EXISTS trace_ets;
