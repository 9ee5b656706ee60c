/* The /v1 endpoints of reveried and the application state they share.
 *
 * rv_api_routes gives the route table the HTTP layer dispatches on; every
 * handler gets the rv_app as its app pointer. Handlers not marked inline run
 * on the worker pool and may block on the database and the simulator. */
#ifndef RV_API_H
#define RV_API_H

#include <stddef.h>
#include <stdint.h>

#include "rv_http.h"

struct rv_db;
struct rv_metrics;
struct rv_auth;

typedef struct rv_app_config {
    const char *home;            /* REVERIE_HOME (borrowed) */
    const char *spool_dir;       /* home/spool */
    uint64_t upload_cap;         /* bytes as sent */
    uint64_t max_trace_bytes;    /* decompressed JSON cap for the reader */
    uint64_t max_events;         /* events one trace may keep (ingest) */
    unsigned whatif_budget_ms;   /* wall-time budget of one what-if */
    unsigned fleet_inline_max;   /* traces x scenarios answered inline */
    unsigned timeline_max_tasks; /* cap on max_tasks of a timeline */
    const char *disk_path;       /* the database's data directory; NULL = not watched */
    uint64_t disk_reserve;       /* free bytes kept there: uploads past it get 507 */
    uint64_t max_archive;        /* total inflated bytes of one archive upload */
} rv_app_config;

typedef struct rv_app {
    rv_app_config cfg;
    struct rv_db *db;           /* borrowed; NULL until the database is up */
    struct rv_metrics *metrics; /* borrowed */
    struct rv_auth *auth;       /* borrowed */
    struct rv_gcache *gcache;   /* borrowed; loaded traces, NULL = none */
    struct rv_pending *pending; /* borrowed; answers being cached, NULL = write first */
    const char *version;
    /* Set on SIGTERM (/readyz answers 503, running what-ifs stop); written
     * and read with rv_api_draining / __atomic builtins across threads. */
    int draining;
    /* Wakes this replica's fleet threads (a job was queued or expanded), so
     * that they need not wait for their next poll. May be NULL. */
    void (*fleet_wake)(void *ctx);
    void *fleet_wake_ctx;
} rv_app;

/* Whether the server is shutting down (any thread). */
static inline int rv_api_draining(const rv_app *a)
{
    return __atomic_load_n(&a->draining, __ATOMIC_ACQUIRE);
}

/* The route table (static; *n receives its length). */
const rv_route *rv_api_routes(size_t *n);

#endif
