/* Execution traces attached to stored traces (store/rv_db_ets.c,
 * migrations/0007_trace_ets.up.sql).
 *
 * The ET of a run, uploaded after its Kineto trace, is kept beside it; the
 * join happens once, in the server, and its result (shapes, memory model)
 * replaces the trace's snapshot in the same transaction that stores the
 * ET, which also drops the trace's cached answers. An ET uploaded alone is
 * a trace of its own (source_format "et"): its original is the ET. */
#ifndef RV_DB_ETS_H
#define RV_DB_ETS_H

#include <stddef.h>
#include <stdint.h>

#include "util/rv_error.h"

typedef struct rv_db rv_db;

/* What the join found, kept with the ET. */
typedef struct rv_db_et_join {
    int64_t ops;        /* trace ops an ET node matched */
    const char *method; /* "id" or "order" */
} rv_db_et_join;

/* Stores et (borrowed, as received: gzip or plain; capped by the caller)
 * for trace id with the joined snapshot snap (borrowed, engine/rv_snapshot.h
 * bytes of the current version), in ONE transaction: the ET row, the
 * trace's snapshots replaced by snap, its what-if cache rows deleted.
 * RV_ERR_NOTFOUND when there is no such trace; RV_ERR_INVALID (err->field
 * "et") when the trace has an ET already; RV_ERR_IO otherwise. */
int rv_db_et_attach(rv_db *db, int64_t id, const void *et, size_t et_len, const uint8_t *snap,
                    size_t snap_len, const rv_db_et_join *join, rv_error *err);

/* Whether trace id has an attached ET: 1, 0, or a negative rv_err. */
int rv_db_et_exists(rv_db *db, int64_t id, rv_error *err);

#endif
