-- Kernel models per platform (docs/models/kernels.md, "Platform models"):
-- each costed kernel's efficiency (roofline / measured) summed per kernel
-- class and size bucket as a count and a sum of logs, so the platform's
-- model is the geometric mean and a trace's share can be added and taken
-- away exactly. A trace's sums are kept with it; the platform's are their
-- total, grown by each upload and rebuilt when a trace is deleted. Traces
-- stored before this migration contribute once uploaded again.
CREATE TABLE trace_kernel_effs (
    trace_id bigint NOT NULL REFERENCES traces (id) ON DELETE CASCADE,
    class    text NOT NULL,
    bucket   integer NOT NULL CHECK (bucket >= 0 AND bucket < 64),
    n        double precision NOT NULL CHECK (n > 0),
    slog     double precision NOT NULL,
    PRIMARY KEY (trace_id, class, bucket)
);

CREATE TABLE platform_kernel_effs (
    platform_id bigint NOT NULL REFERENCES platforms (id) ON DELETE CASCADE,
    class       text NOT NULL,
    bucket      integer NOT NULL CHECK (bucket >= 0 AND bucket < 64),
    n           double precision NOT NULL,
    slog        double precision NOT NULL,
    PRIMARY KEY (platform_id, class, bucket)
);
