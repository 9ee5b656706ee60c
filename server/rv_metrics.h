/* Prometheus metrics of reveried: request counts and latency histograms per
 * route, plus plain counters (ingest bytes, simulations, cache hits, ...).
 * Thread-safe; rendered in the Prometheus text exposition format 0.0.4. */
#ifndef RV_SERVER_METRICS_H
#define RV_SERVER_METRICS_H

#include <stddef.h>
#include <stdint.h>

typedef struct rv_metrics rv_metrics;

typedef enum rv_counter {
    RV_M_INGEST_BYTES = 0,  /* bytes of accepted uploads, as sent */
    RV_M_UPLOADS,           /* traces stored (new) */
    RV_M_UPLOAD_DUPLICATES, /* uploads answered with an existing id */
    RV_M_UPLOAD_REJECTED,   /* uploads refused (4xx) */
    RV_M_SIMULATIONS,       /* simulator runs */
    RV_M_CACHE_HITS,        /* what-if answers from the cache */
    RV_M_CACHE_MISSES,
    RV_M_FLEET_JOBS,   /* fleet jobs finished by this replica */
    RV_M_BUSY_REJECTS, /* 503s because the worker queue was full */
    /* Where fleet rows spend their time, in microseconds summed over the
     * fleet threads (bench/fleet.sh divides them by the rows). */
    RV_M_FLEET_ROWS,        /* (trace, scenario) rows made */
    RV_M_FLEET_ROWS_CACHED, /* rows read from the what-if cache (errors included) */
    RV_M_FLEET_READ_US,     /* listings and cached rows read */
    RV_M_FLEET_LOAD_US,     /* snapshot read, decode, graph build, baseline (graph cache misses) */
    RV_M_FLEET_RUN_US,      /* what-if apply, simulation, reports */
    RV_M_FLEET_STORE_US,    /* answer rendered and stored in the what-if cache */
    RV_M_FLEET_MERGE_US,    /* aggregates and the job's answer written */
    RV_M_FLEET_WORKERS,     /* gauge: fleet threads of this replica */
    RV_M_FLEET_NOTIFIED,    /* wake-ups by a job's NOTIFY (any replica's) */
    RV_M_TRACES_CHANGED,    /* graph-cache evictions by a trace's NOTIFY (any replica's) */
    RV_M_COUNT
} rv_counter;

/* Returns a new registry or NULL. */
rv_metrics *rv_metrics_new(void);
void rv_metrics_free(rv_metrics *m);

/* Records one finished request. route is a static label (borrowed, must
 * outlive m); method "GET"...; seconds is the wall time from the first byte. */
void rv_metrics_request(rv_metrics *m, const char *route, const char *method, int status,
                        double seconds);

/* Adds n to a counter. NULL-safe on m. */
void rv_metrics_add(rv_metrics *m, rv_counter c, uint64_t n);
uint64_t rv_metrics_get(rv_metrics *m, rv_counter c);

/* Sets the gauge "reveried_workers_busy" (jobs queued or running). */
void rv_metrics_set_busy(rv_metrics *m, uint64_t busy);

/* Returns the exposition text (new, malloc'd; caller frees) and its length. */
char *rv_metrics_render(rv_metrics *m, size_t *len);

#endif
