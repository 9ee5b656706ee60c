/* Per-platform kernel models in the store (store/rv_db_kmodels.c,
 * migrations/0008_kernel_models.up.sql): the mergeable sums of
 * engine/rv_kmodel_acc.h, kept per trace and per platform. */
#ifndef RV_DB_KMODELS_H
#define RV_DB_KMODELS_H

#include <stddef.h>
#include <stdint.h>

#include "rv_db.h"
#include "util/rv_error.h"
#include "cost/rv_kmodel_acc.h"

/* The platform of trace_id (*platform_id, may be NULL) and its GPU's name
 * (text into gpu, gpu_cap bytes; NULL = not wanted), that platform's sums
 * into *out (zeroed first; all zero when it has none), and a version of
 * them (text into version, cap bytes; NULL = not wanted) that changes when
 * they do. RV_ERR_NOTFOUND: no such trace. */
int rv_db_trace_kmodel(rv_db *db, int64_t trace_id, int64_t *platform_id, char *gpu, size_t gpu_cap,
                       char *version, size_t cap, rv_kmodel_acc *out, rv_error *err);

/* A platform's sums into *out (zeroed first) and the traces that
 * contributed (*ntraces, may be NULL). RV_ERR_NOTFOUND: no such platform. */
int rv_db_platform_kmodel(rv_db *db, int64_t platform_id, rv_kmodel_acc *out, int64_t *ntraces,
                          rv_error *err);

/* The sums of every stored platform whose GPU is the hardware table's row
 * for gpu, into *out (zeroed first; all zero when none, or when gpu is not
 * in the table), with a version (text into version, cap bytes; NULL = not
 * wanted). */
int rv_db_gpu_kmodel(rv_db *db, const char *gpu, rv_kmodel_acc *out, char *version, size_t cap,
                     rv_error *err);

#endif
