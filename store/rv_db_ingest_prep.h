/* Ingest, the CPU half (store/rv_db_ingest_prep.c): what an ingest computes
 * before it takes a database connection, so that the connection (and the
 * transaction) is held only for SQL. The SQL half is rv_db_ingest_commit
 * (rv_db_ingest.h). */
#ifndef RV_DB_INGEST_PREP_H
#define RV_DB_INGEST_PREP_H

#include <stddef.h>

#include "rv_db_ingest.h"
#include "util/rv_error.h"
#include "trace/rv_trace.h"

typedef struct rv_db_ingest_prep rv_db_ingest_prep;

/* The CPU half: validates (a trace without events, an empty upload or one
 * over the cap gives RV_ERR_INVALID / RV_ERR_LIMIT), hashes the original,
 * gzips it unless it is gzip already, encodes the snapshot, extracts the
 * overhead samples and builds the summary. Touches no database. t and orig
 * are borrowed and must outlive *out; meta (may be NULL) is copied. *out is
 * new (rv_db_ingest_prep_free). */
int rv_db_ingest_prepare(const rv_trace *t, const void *orig, size_t len,
                         const rv_db_ingest_meta *meta, rv_db_ingest_prep **out, rv_error *err);
/* NULL-safe. */
void rv_db_ingest_prep_free(rv_db_ingest_prep *p);

#endif
