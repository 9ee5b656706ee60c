/* Metrics registry: a small fixed table of series under one mutex. Requests
 * are rare compared with the work each one does, so a mutex is cheap here. */
#include "rv_metrics.h"
#include "util/rv_buf.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SERIES 256
#define MAX_ROUTES 64

static const double bucket_le[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                                   0.25,  0.5,    1.0,   2.5,  5.0,   10.0};
#define NBUCKETS (sizeof(bucket_le) / sizeof(bucket_le[0]))

typedef struct series {
    const char *route, *method;
    int status;
    uint64_t count;
} series;

typedef struct hist {
    const char *route;
    uint64_t buckets[NBUCKETS]; /* non-cumulative; summed on render */
    uint64_t count;
    double sum;
} hist;

struct rv_metrics {
    pthread_mutex_t mu;
    series series[MAX_SERIES];
    size_t nseries;
    hist hists[MAX_ROUTES];
    size_t nhists;
    uint64_t counters[RV_M_COUNT];
    uint64_t busy;
};

static const struct {
    const char *name, *help;
} counter_info[RV_M_COUNT] = {
    [RV_M_INGEST_BYTES] = {"reveried_ingest_bytes_total", "Bytes of accepted trace uploads."},
    [RV_M_UPLOADS] = {"reveried_uploads_total", "Traces stored."},
    [RV_M_UPLOAD_DUPLICATES] = {"reveried_upload_duplicates_total",
                                "Uploads answered with an existing trace id."},
    [RV_M_UPLOAD_REJECTED] = {"reveried_upload_rejected_total", "Uploads refused with a 4xx."},
    [RV_M_SIMULATIONS] = {"reveried_simulations_total", "Simulator runs."},
    [RV_M_CACHE_HITS] = {"reveried_whatif_cache_hits_total",
                         "What-if and diff answers from the cache."},
    [RV_M_CACHE_MISSES] = {"reveried_whatif_cache_misses_total", "What-ifs and diffs computed."},
    [RV_M_FLEET_JOBS] = {"reveried_fleet_jobs_total", "Fleet jobs finished by this replica."},
    [RV_M_BUSY_REJECTS] = {"reveried_busy_rejects_total",
                           "Requests refused with 503 because the worker queue was full."},
    [RV_M_FLEET_ROWS] = {"reveried_fleet_rows_total", "Fleet (trace, scenario) rows made."},
    [RV_M_FLEET_ROWS_CACHED] = {"reveried_fleet_rows_cached_total",
                                "Fleet rows read from the what-if cache (cached errors included)."},
    [RV_M_FLEET_READ_US] = {"reveried_fleet_read_microseconds_total",
                            "Fleet threads' time reading listings and cached rows."},
    [RV_M_FLEET_LOAD_US] = {"reveried_fleet_load_microseconds_total",
                            "Fleet threads' time loading traces (snapshot, graph, baseline)."},
    [RV_M_FLEET_RUN_US] = {"reveried_fleet_run_microseconds_total",
                           "Fleet threads' time in what-ifs (apply, simulate, reports)."},
    [RV_M_FLEET_STORE_US] = {"reveried_fleet_store_microseconds_total",
                             "Fleet threads' time rendering and caching answers."},
    [RV_M_FLEET_MERGE_US] = {"reveried_fleet_merge_microseconds_total",
                             "Fleet threads' time merging shards into answers."},
    [RV_M_FLEET_WORKERS] = {"reveried_fleet_workers",
                            "Fleet threads of this replica (--fleet-workers, default the CPUs)."},
    [RV_M_FLEET_NOTIFIED] = {"reveried_fleet_notified_total",
                             "Fleet threads woken by a job's notification (queued or expanded by "
                             "any replica)."},
    [RV_M_TRACES_CHANGED] = {"reveried_traces_changed_total",
                             "Stored traces changed or deleted (by any replica) whose graph this "
                             "replica dropped from its cache."},
};

rv_metrics *rv_metrics_new(void)
{
    rv_metrics *m = calloc(1, sizeof(*m));

    if (m)
        pthread_mutex_init(&m->mu, NULL);
    return m;
}

void rv_metrics_free(rv_metrics *m)
{
    if (!m)
        return;
    pthread_mutex_destroy(&m->mu);
    free(m);
}

void rv_metrics_request(rv_metrics *m, const char *route, const char *method, int status,
                        double seconds)
{
    if (!m)
        return;
    pthread_mutex_lock(&m->mu);
    size_t i;
    for (i = 0; i < m->nseries; i++)
        if (m->series[i].status == status && strcmp(m->series[i].route, route) == 0 &&
            strcmp(m->series[i].method, method) == 0)
            break;
    if (i == m->nseries && m->nseries < MAX_SERIES)
        m->series[m->nseries++] = (series){route, method, status, 0};
    if (i < m->nseries)
        m->series[i].count++;
    for (i = 0; i < m->nhists; i++)
        if (strcmp(m->hists[i].route, route) == 0)
            break;
    if (i == m->nhists && m->nhists < MAX_ROUTES) {
        memset(&m->hists[i], 0, sizeof(m->hists[i]));
        m->hists[m->nhists++].route = route;
    }
    if (i < m->nhists) {
        hist *h = &m->hists[i];
        size_t b = 0;
        while (b < NBUCKETS && seconds > bucket_le[b])
            b++;
        if (b < NBUCKETS)
            h->buckets[b]++;
        h->count++;
        h->sum += seconds;
    }
    pthread_mutex_unlock(&m->mu);
}

void rv_metrics_add(rv_metrics *m, rv_counter c, uint64_t n)
{
    if (!m || c < 0 || c >= RV_M_COUNT)
        return;
    __atomic_add_fetch(&m->counters[c], n, __ATOMIC_RELAXED);
}

uint64_t rv_metrics_get(rv_metrics *m, rv_counter c)
{
    if (!m || c < 0 || c >= RV_M_COUNT)
        return 0;
    return __atomic_load_n(&m->counters[c], __ATOMIC_RELAXED);
}

void rv_metrics_set_busy(rv_metrics *m, uint64_t busy)
{
    if (m)
        __atomic_store_n(&m->busy, busy, __ATOMIC_RELAXED);
}

/* The exposition text has a hard cap, like every growable buffer. */
#define RENDER_CAP (4u << 20)

char *rv_metrics_render(rv_metrics *m, size_t *len)
{
    rv_buf b = RV_BUF_INIT(RENDER_CAP);

    pthread_mutex_lock(&m->mu);
    rv_buf_printf(&b, "# HELP reveried_requests_total HTTP requests by route, method and status.\n"
                      "# TYPE reveried_requests_total counter\n");
    for (size_t i = 0; i < m->nseries; i++)
        rv_buf_printf(&b,
                      "reveried_requests_total{route=\"%s\",method=\"%s\",status=\"%d\"} %llu\n",
                      m->series[i].route, m->series[i].method, m->series[i].status,
                      (unsigned long long)m->series[i].count);
    rv_buf_printf(&b, "# HELP reveried_request_duration_seconds Request latency by route.\n"
                      "# TYPE reveried_request_duration_seconds histogram\n");
    for (size_t i = 0; i < m->nhists; i++) {
        const hist *h = &m->hists[i];
        uint64_t cum = 0;
        for (size_t k = 0; k < NBUCKETS; k++) {
            cum += h->buckets[k];
            rv_buf_printf(&b,
                          "reveried_request_duration_seconds_bucket{route=\"%s\",le=\"%g\"} %llu\n",
                          h->route, bucket_le[k], (unsigned long long)cum);
        }
        rv_buf_printf(&b,
                      "reveried_request_duration_seconds_bucket{route=\"%s\",le=\"+Inf\"} %llu\n",
                      h->route, (unsigned long long)h->count);
        rv_buf_printf(&b, "reveried_request_duration_seconds_sum{route=\"%s\"} %.6f\n", h->route,
                      h->sum);
        rv_buf_printf(&b, "reveried_request_duration_seconds_count{route=\"%s\"} %llu\n", h->route,
                      (unsigned long long)h->count);
    }
    pthread_mutex_unlock(&m->mu);
    for (int c = 0; c < RV_M_COUNT; c++)
        rv_buf_printf(&b, "# HELP %s %s\n# TYPE %s %s\n%s %llu\n", counter_info[c].name,
                      counter_info[c].help, counter_info[c].name,
                      c == RV_M_FLEET_WORKERS ? "gauge" : "counter", counter_info[c].name,
                      (unsigned long long)rv_metrics_get(m, (rv_counter)c));
    rv_buf_printf(&b,
                  "# HELP reveried_workers_busy Jobs queued or running on the worker pool.\n"
                  "# TYPE reveried_workers_busy gauge\nreveried_workers_busy %llu\n",
                  (unsigned long long)__atomic_load_n(&m->busy, __ATOMIC_RELAXED));
    return rv_buf_take(&b, len); /* NULL when the cap was hit */
}
