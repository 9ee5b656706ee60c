/* What-if answers on their way into the cache. A worker sends the answer
 * first and writes its cache row after (the write took about 1 ms of each
 * uncached what-if); until the row is in, the answer is held here so that
 * the same question asked again meanwhile is still answered from the
 * cache. The table holds one entry per worker writing at most; when it is
 * full the caller writes before answering, as it did before. Thread-safe. */
#ifndef RV_PENDING_H
#define RV_PENDING_H

#include <stddef.h>
#include <stdint.h>

typedef struct rv_pending rv_pending;
typedef struct rv_pending_entry rv_pending_entry;

/* A table of at most cap entries (1..4096). NULL when out of memory. */
rv_pending *rv_pending_new(size_t cap);
/* NULL-safe. Every entry must be done first. */
void rv_pending_free(rv_pending *p);

/* Holds the answer (trace_id, request_hash) -> body (len bytes; taken on
 * success: the table frees it at rv_pending_done). NULL when the table is
 * full or p is NULL: body stays the caller's. */
rv_pending_entry *rv_pending_add(rv_pending *p, int64_t trace_id, const char *request_hash,
                                 char *body, size_t len);

/* The held body (borrowed: valid until rv_pending_done on e). */
const char *rv_pending_body(const rv_pending_entry *e, size_t *len);

/* A copy of the held answer for (trace_id, request_hash): 0 and *body (new,
 * NUL-terminated, free()) of *len bytes; -1 when none is held or out of
 * memory. */
int rv_pending_get(rv_pending *p, int64_t trace_id, const char *request_hash, char **body,
                   size_t *len);

/* The row is written (or its write failed): e leaves the table and its body
 * is freed. NULL-safe. */
void rv_pending_done(rv_pending *p, rv_pending_entry *e);

#endif
