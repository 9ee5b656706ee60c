/* Per-platform host-overhead statistics (store/rv_db_overheads.c). */
#ifndef RV_DB_OVERHEADS_H
#define RV_DB_OVERHEADS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "util/rv_error.h"
#include "graph/rv_overhead.h"

typedef struct rv_db rv_db;

typedef struct rv_db_overhead_row {
    int type;      /* rv_overhead_type */
    char *op_name; /* "*" = the type's overall row */
    rv_overhead_stat stat;
} rv_db_overhead_row;

/* Rows of a platform, ordered by type then op name. *rows new; free with
 * rv_db_overhead_rows_free. */
int rv_db_overheads_load(rv_db *db, int64_t platform_id, rv_db_overhead_row **rows, size_t *n,
                         rv_error *err);
void rv_db_overhead_rows_free(rv_db_overhead_row *rows, size_t n);
/* The platform of trace_id (*platform_id, may be NULL) and a version of that
 * platform's statistics (text into version, cap bytes; NULL = not wanted)
 * that changes whenever they are recomputed: row count and latest update.
 * With rows non-NULL also the rows, read by the same statement so that they
 * match the version (*rows new, free with rv_db_overhead_rows_free; *n = 0
 * when the platform has no statistics yet). RV_ERR_NOTFOUND: no such trace. */
int rv_db_trace_overheads(rv_db *db, int64_t trace_id, int64_t *platform_id, char *version,
                          size_t cap, rv_db_overhead_row **rows, size_t *n, rv_error *err);
/* Whose host statistics a "host_overheads": "platform" what-if uses. */
typedef struct rv_db_host_stats {
    int64_t platform_id;
    int target;          /* 1: a stored platform of the requested GPU, not the trace's */
    char gpu_model[128]; /* that platform's GPU as its traces name it */
    char version[256];   /* changes whenever its statistics are recomputed */
} rv_db_host_stats;

/* The host statistics for trace_id moved to gpu (NULL or "": not moved):
 * with gpu another row of the hardware table than the trace's GPU, the
 * stored platform of that GPU with the most samples (the target
 * machine's host), else the trace's own platform. *out always; with rows
 * non-NULL also that platform's rows (*rows new, free with
 * rv_db_overhead_rows_free; *n = 0 when it has none yet). The version and
 * the rows are read by two statements: an update between them keys an
 * answer by the older version, which only costs a recomputation later.
 * RV_ERR_NOTFOUND: no such trace. */
int rv_db_host_overheads(rv_db *db, int64_t trace_id, const char *gpu, rv_db_host_stats *out,
                         rv_db_overhead_row **rows, size_t *n, rv_error *err);
/* Same as a JSON array of {type, op_name, samples, count, mean_us, std_us,
 * p25_us, median_us, p75_us, p90_us, updated_at} (new reference). */
int rv_db_overheads_get(rv_db *db, int64_t platform_id, json_t **out, rv_error *err);
/* Recomputes the statistics of a platform (0 = all platforms) from its
 * stored traces' sketches (raw samples are not kept); *groups (may be
 * NULL) = rows written. */
int rv_db_overheads_rebuild(rv_db *db, int64_t platform_id, size_t *groups, rv_error *err);

#endif
