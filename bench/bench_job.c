/* Distributed-job benchmark: bench_job DIR [RANKS] [TASKS_PER_RANK]
 *
 * DIR holds the real DLRM rank traces worker0..7.kineto.json.gz. Each is
 * tiled in time (its steps repeated) to about TASKS_PER_RANK tasks; RANKS
 * ranks (default 128) take them in turn, each with its own clock offset
 * (a few ms) and one straggler (rank RANKS/2: kernels and CPU work 1.5x).
 * Times building the ranks' graphs, building the job (matching, clock
 * alignment) and running it (merged graph, one simulation, figures), and
 * prints one JSON line with the peak RSS. Run it pinned to one core
 * (taskset -c 0). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "graph/rv_graph.h"
#include "job/rv_job.h"
#include "reader/rv_kineto.h"
#include "simulate/rv_sim.h"

#define NREAL 8

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* CPU time of this process: on a shared machine, what the work cost
 * whatever else ran. */
static double cpu_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Repeats t's events `copies` times, one trace span (plus 100 us) apart,
 * with correlation and external ids kept apart. */
static int tile(rv_trace *t, int copies)
{
    size_t n = t->nevents;
    int64_t lo = INT64_MAX, hi = INT64_MIN, stride = 0;
    for (size_t i = 0; i < n; i++) {
        const rv_event *e = &t->events[i];
        if (e->ts_ns < lo)
            lo = e->ts_ns;
        if (e->ts_ns + e->dur_ns > hi)
            hi = e->ts_ns + e->dur_ns;
        if (e->correlation > stride)
            stride = e->correlation;
        if (e->external_id > stride)
            stride = e->external_id;
    }
    int64_t period = hi - lo + 100000;
    stride += 1;
    for (int c = 1; c < copies; c++)
        for (size_t i = 0; i < n; i++) {
            rv_event e = t->events[i];
            e.ts_ns += c * period;
            if (e.correlation >= 0)
                e.correlation += c * stride;
            if (e.external_id >= 0)
                e.external_id += c * stride;
            if (e.wait_event_corr >= 0)
                e.wait_event_corr += c * stride;
            if (rv_trace_push(t, &e) < 0)
                return -1;
        }
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: bench_job DIR [RANKS] [TASKS_PER_RANK]\n");
        return 2;
    }
    int nranks = argc > 2 ? atoi(argv[2]) : 128;
    long want = argc > 3 ? atol(argv[3]) : 50000;
    if (nranks < 1 || want < 1)
        return 2;
    rv_trace *tr[NREAL] = {0};
    rv_graph **g = calloc((size_t)nranks, sizeof(*g));
    rv_sim *bs[NREAL] = {0};
    rv_job_rank *rk = calloc((size_t)nranks, sizeof(*rk));
    rv_error err;
    rv_error_clear(&err);
    if (!g || !rk)
        return 1;
    for (int i = 0; i < NREAL; i++) {
        char path[4096];
        snprintf(path, sizeof(path), "%s/worker%d.kineto.json.gz", argv[1], i);
        rv_graph *one = NULL;
        if (rv_kineto_read_file(path, NULL, &tr[i], &err) != 0 ||
            rv_graph_build(tr[i], NULL, &one, &err) != 0) {
            fprintf(stderr, "bench_job: %s: %s\n", path, err.message);
            return 1;
        }
        int copies = (int)((want + (long)one->ntasks - 1) / (long)one->ntasks);
        rv_graph_free(one);
        if (tile(tr[i], copies) != 0)
            return 1;
    }
    /* The ranks' graphs, built from the tiled traces; rank r runs real
     * rank r mod 8 with its own clock offset. */
    double t0 = now_s(), c0 = cpu_s();
    size_t tasks = 0;
    for (int r = 0; r < nranks; r++) {
        if (rv_graph_build(tr[r % NREAL], NULL, &g[r], &err) != 0) {
            fprintf(stderr, "bench_job: rank %d: %s\n", r, err.message);
            return 1;
        }
        g[r]->origin_ns += (int64_t)((r * 7919) % 5000) * 1000; /* 0-5 ms */
        tasks += g[r]->ntasks;
    }
    double t1 = now_s(), c1 = cpu_s();
    int straggler = nranks / 2;
    for (size_t i = 0; i < g[straggler]->ntasks; i++) {
        rv_task *t = &g[straggler]->tasks[i];
        if (!(t->flags & RV_TF_NCCL)) {
            t->dur_ns = t->dur_ns * 3 / 2;
            t->gap_ns = t->gap_ns * 3 / 2;
        }
    }
    for (int i = 0; i < NREAL; i++)
        if (rv_sim_run(g[i], RV_SCHED_EARLIEST_START, &bs[i], &err) != 0) {
            fprintf(stderr, "bench_job: %s\n", err.message);
            return 1;
        }
    for (int r = 0; r < nranks; r++)
        rk[r] = (rv_job_rank){g[r], bs[r % NREAL], r, nranks, NULL};
    double t2 = now_s(), c2 = cpu_s();
    rv_job *job = NULL;
    rv_job_result *res = NULL;
    rv_run_opts o = {.iteration = RV_ITER_MEDIAN};
    if (rv_job_build(rk, (size_t)nranks, &job, &err) != 0) {
        fprintf(stderr, "bench_job: build: %s\n", err.message);
        return 1;
    }
    double t3 = now_s();
    if (rv_job_run(job, NULL, &o, &res, &err) != 0) {
        fprintf(stderr, "bench_job: run: %s\n", err.message);
        return 1;
    }
    double t4 = now_s(), c4 = cpu_s();
    json_t *ans = rv_job_render(res, NULL);
    json_t *s0 = json_array_get(json_object_get(ans, "stragglers"), 0);
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("{\"ranks\": %d, \"tasks\": %zu, \"tasks_per_rank\": %zu, \"rank_graphs_s\": %.3f, "
           "\"job_build_s\": %.3f, \"job_run_s\": %.3f, \"job_total_s\": %.3f, "
           "\"tasks_per_s\": %.0f, \"peak_rss_mib\": %.0f, \"first_straggler\": %lld, "
           "\"injected_straggler\": %d, \"collectives\": %lld, \"replay_error\": %.4f, "
           "\"rank_graphs_cpu_s\": %.3f, \"job_total_cpu_s\": %.3f}\n",
           nranks, tasks, tasks / (size_t)nranks, t1 - t0, t3 - t2, t4 - t3, t4 - t2,
           (double)tasks / (t4 - t2), (double)ru.ru_maxrss / 1024.0,
           (long long)json_integer_value(json_object_get(s0, "rank")), straggler,
           (long long)json_integer_value(json_object_get(ans, "collectives")),
           json_number_value(json_object_get(ans, "replay_error")), c1 - c0, c4 - c2);
    json_decref(ans);
    rv_job_result_free(res);
    rv_job_free(job);
    for (int r = 0; r < nranks; r++)
        rv_graph_free(g[r]);
    for (int i = 0; i < NREAL; i++) {
        rv_sim_free(bs[i]);
        rv_trace_free(tr[i]);
    }
    free(g);
    free(rk);
    return 0;
}
