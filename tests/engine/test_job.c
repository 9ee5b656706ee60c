/* A distributed job as one global graph, on the real 8-rank DLRM job:
 * replay per rank, the cross-rank edges, stragglers, clock alignment and
 * the job-level what-ifs. Skips (77) without RV_SHARED_TRACES. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/rv_graph.h"
#include "job/rv_job.h"
#include "job/rv_job_int.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_trace.h"
#include "common/rv_test_util.h"

#define NR 8

static const char *traces;
static rv_test_loaded dlrm[NR];
static rv_job *job;

static void build(rv_job_rank *rk, size_t n, rv_job **out)
{
    rv_error err;
    rv_error_clear(&err);
    if (rv_job_build(rk, n, out, &err) != 0)
        fprintf(stderr, "\n  build: %s\n", err.message);
}

static void ranks_of(rv_job_rank *rk)
{
    for (int i = 0; i < NR; i++)
        rk[i] = (rv_job_rank){dlrm[i].g, dlrm[i].s, -1, -1, NULL};
}

/* The answer to doc (NULL: the replay) on j (new; NULL with the error
 * printed). */
static rv_job_result *run(const rv_job *j, const char *doc)
{
    rv_whatif *w = NULL;
    rv_job_result *r = NULL;
    rv_run_opts o = {.iteration = RV_ITER_MEDIAN};
    rv_error err;
    rv_error_clear(&err);
    if (doc && rv_whatif_parse_text(doc, &w, &err) != 0) {
        fprintf(stderr, "\n  %s: %s\n", doc, err.message);
        return NULL;
    }
    if (rv_job_run(j, w, &o, &r, &err) != 0)
        fprintf(stderr, "\n  %s: %s\n", doc ? doc : "replay", err.message);
    rv_whatif_free(w);
    return r;
}

static int first_straggler(const rv_job_result *r)
{
    json_t *o = rv_job_render(r, NULL);
    json_t *s = json_array_get(json_object_get(o, "stragglers"), 0);
    int rank = s ? (int)json_integer_value(json_object_get(s, "rank")) : -1;
    json_decref(o);
    return rank;
}

static int has_warning(const rv_job_result *r, const char *code)
{
    for (size_t i = 0; i < r->nwarnings; i++)
        if (strcmp(r->warnings[i].code, code) == 0)
            return 1;
    return 0;
}

/* Done-when 1: one job, each rank's step replayed within 2%, the slowest
 * rank named, wait and transfer per rank. */
/* The job answer names the dimensions a single trace's answer names:
 * DLRM exchanges sparse features all-to-all (embedding) beside its
 * data-parallel all-reduce, both over all 8 ranks. In the job the time is
 * the transfer only: the wait for the last rank is the collective's wait. */
static void check_parallelism(json_t *o)
{
    json_t *pl = json_object_get(o, "parallelism");
    int seen = 0;
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "parallelism_rank")), 0);
    for (size_t i = 0; i < json_array_size(pl); i++) {
        json_t *d = json_array_get(pl, i);
        const char *dim = json_string_value(json_object_get(d, "dim"));
        double comm = json_number_value(json_object_get(d, "comm_us"));
        double exposed = json_number_value(json_object_get(d, "exposed_comm_us"));
        printf("\n  parallelism %s degree %lld: %.0f collectives, %.1f us (%.1f exposed)",
               dim ? dim : "?", json_integer_value(json_object_get(d, "degree")),
               json_number_value(json_object_get(d, "collectives")), comm, exposed);
        CU_ASSERT(comm > 0 && exposed >= 0 && exposed <= comm + 1e-6);
        if (dim && (!strcmp(dim, "embedding") || !strcmp(dim, "data"))) {
            seen |= !strcmp(dim, "data") ? 1 : 2;
            CU_ASSERT_EQUAL(json_integer_value(json_object_get(d, "degree")), NR);
        }
    }
    CU_ASSERT_EQUAL(seen, 3);
}

static void test_replay(void)
{
    rv_job_result *r = run(job, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(rv_job_world_size(job), NR);
    CU_ASSERT_EQUAL(rv_job_nranks(job), NR);
    for (size_t i = 0; i < NR; i++)
        CU_ASSERT_EQUAL(rv_job_rank_at(job, i), (int)i);
    CU_ASSERT_EQUAL(rv_job_rank_at(job, NR), -1);
    CU_ASSERT_EQUAL(r->nslots, NR);
    CU_ASSERT(job->ncoll >= 8);
    json_t *o = rv_job_render(r, "dlrm");
    CU_ASSERT_PTR_NOT_NULL_FATAL(o);
    double worst = 0, wsum = 0, xsum = 0;
    for (size_t i = 0; i < r->nslots; i++) {
        const rv_job_slot *sl = &r->slots[i];
        printf("\n  rank %d measured %.1f replay %.1f error %.2f%% wait %.1f transfer %.1f",
               sl->rank, sl->measured_us, sl->baseline_us, sl->replay_error * 100, sl->wait_us,
               sl->transfer_us);
        CU_ASSERT(sl->replay_error <= 0.02);
        CU_ASSERT(sl->wait_us >= 0 && sl->transfer_us > 0);
        if (sl->replay_error > worst)
            worst = sl->replay_error;
        wsum += sl->wait_us;
        xsum += sl->transfer_us;
    }
    printf("\n  worst per-rank replay error %.3f%%", worst * 100);
    CU_ASSERT(wsum > 0 && xsum > 0);
    /* The contract. */
    static const char *const keys[] = {"measured_us",      "baseline_us", "predicted_us",
                                       "speedup",          "warnings",    "ranks",
                                       "clock_offsets_us", "stragglers"};
    for (size_t k = 0; k < sizeof(keys) / sizeof(keys[0]); k++)
        CU_ASSERT_PTR_NOT_NULL(json_object_get(o, keys[k]));
    json_t *rk = json_array_get(json_object_get(o, "ranks"), 0);
    static const char *const rkeys[] = {"rank",         "measured_us",  "baseline_us",
                                        "predicted_us", "replay_error", "wait_us",
                                        "transfer_us"};
    for (size_t k = 0; k < sizeof(rkeys) / sizeof(rkeys[0]); k++)
        CU_ASSERT_PTR_NOT_NULL(json_object_get(rk, rkeys[k]));
    CU_ASSERT_EQUAL(json_object_size(json_object_get(o, "clock_offsets_us")), NR);
    /* One step per rank: the answer says so, as a single trace's does. */
    CU_ASSERT(has_warning(r, "single_step"));
    /* The last to arrive: rank 7 enters the collectives last in the trace
     * (its NCCL kernels last a few microseconds, the others wait). */
    int s = first_straggler(r);
    printf("\n  first straggler: rank %d", s);
    CU_ASSERT_EQUAL(s, 7);
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "last_arriving_rank")), 7);
    /* The slowest rank has the longest step: rank 1 (19.9 ms). */
    CU_ASSERT_EQUAL(json_integer_value(json_object_get(o, "slowest_rank")), 1);
    CU_ASSERT(json_array_size(json_object_get(o, "critical_path")) > 0);
    CU_ASSERT(json_array_size(json_object_get(o, "collective_waits")) > 0);
    check_parallelism(o);
    json_decref(o);
    rv_job_result_free(r);
}

/* Done-when 1: the cross-rank edges. In the job's run no rank leaves a
 * collective before the last rank entered it, also when one rank is made
 * slower; simulated alone, as before, the slowed rank enters after its
 * peers have already left. */
static void test_cross_rank_edges(void)
{
    static const char *const docs[] = {
        NULL, "{\"optimizations\": [{\"kind\": \"scale\", \"factor\": 1.5, \"select\": "
              "{\"kind\": \"kernel\"}, \"ranks\": [7]}]}"};
    for (size_t d = 0; d < 2; d++) {
        rv_job_result *r = run(job, docs[d]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        CU_ASSERT_EQUAL(r->ncolls, job->ncoll);
        for (size_t c = 0; c < r->ncolls; c++)
            CU_ASSERT(r->colls[c].first_leave_us >= r->colls[c].last_enter_us);
        rv_job_result_free(r);
    }
    /* Rank 7 slowed and simulated alone: its collectives start later on
     * the aligned clock while the others' end as measured. */
    rv_whatif *w = NULL;
    rv_run_result *rr = NULL;
    rv_run_opts o = {.iteration = RV_ITER_MEDIAN, .keep_predicted = 1};
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_whatif_parse_text(docs[1], &w, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_run(dlrm[7].g, dlrm[7].s, w, &o, &rr, &err), 0);
    const rv_graph *g3 = rv_run_pred_graph(rr);
    const rv_sim *s3 = rv_run_pred_sim(rr);
    size_t violated = 0;
    for (size_t c = 0; c < job->ncoll; c++) {
        int32_t t3 = job->coll_task[c * NR + 7];
        double enter3 = (double)g3->origin_ns + job->offset_ns[7] + (double)s3->start_ns[t3];
        for (int p = 0; p < NR; p++) {
            if (p == 7)
                continue;
            const rv_task *t = &dlrm[p].g->tasks[job->coll_task[c * NR + p]];
            double leave = (double)dlrm[p].g->origin_ns + job->offset_ns[p] +
                           (double)(dlrm[p].s->end_ns[job->coll_task[c * NR + p]]);
            (void)t;
            if (leave < enter3)
                violated++;
        }
    }
    printf("\n  per-rank simulation: %zu (collective, rank) pairs leave before rank 7 enters",
           violated);
    CU_ASSERT(violated > 0);
    rv_run_result_free(rr);
    rv_whatif_free(w);
}

/* Done-when 2: a rank whose kernels run 1.5x slower becomes the first
 * straggler; removing the straggler from that run gives back the job's
 * step within 5%. */
static void test_straggler(void)
{
    rv_job_result *r0 = run(job, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r0);
    for (int k = 0; k < NR; k++) {
        char doc[512], doc2[640];
        /* The rank's kernels and its CPU work 1.5x slower: DLRM's steps
         * are CPU-bound (about 1 ms of kernels in a 12-20 ms step), so its
         * kernels alone hide behind the host (test_kernels_hidden). */
        snprintf(doc, sizeof(doc),
                 "{\"optimizations\": [{\"kind\": \"scale\", \"factor\": 1.5, \"select\": "
                 "{\"kind\": \"kernel\"}, \"ranks\": [%d]}, {\"kind\": \"cpu_speed\", "
                 "\"factor\": 0.6666667, \"ranks\": [%d]}]",
                 k, k);
        snprintf(doc2, sizeof(doc2), "%s}", doc);
        rv_job_result *r1 = run(job, doc2);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r1);
        int first = first_straggler(r1);
        snprintf(doc2, sizeof(doc2), "%s, \"job\": {\"remove_straggler\": true}}", doc);
        rv_job_result *r2 = run(job, doc2);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r2);
        double back = fabs(r2->sum.predicted_us - r0->sum.baseline_us) / r0->sum.baseline_us;
        printf("\n  rank %d x1.5: job %.1f -> %.1f us, first straggler %d; removed %d: %.1f us "
               "(%.2f%% from the job)",
               k, r0->sum.baseline_us, r1->sum.predicted_us, first, r2->straggler_removed,
               r2->sum.predicted_us, back * 100);
        CU_ASSERT_EQUAL(first, k);
        CU_ASSERT_EQUAL(r2->straggler_removed, k);
        CU_ASSERT(back <= 0.05);
        CU_ASSERT(r1->sum.predicted_us > r0->sum.baseline_us);
        rv_job_result_free(r1);
        rv_job_result_free(r2);
    }
    rv_job_result_free(r0);
}

/* DLRM's kernels alone 1.5x slower on one rank: about 0.5 ms more GPU
 * work that the CPU-bound step hides; the job changes by under 1%. */
static void test_kernels_hidden(void)
{
    rv_job_result *r0 = run(job, NULL);
    rv_job_result *r1 = run(job, "{\"optimizations\": [{\"kind\": \"scale\", \"factor\": 1.5, "
                                 "\"select\": {\"kind\": \"kernel\"}, \"ranks\": [2]}]}");
    CU_ASSERT_PTR_NOT_NULL_FATAL(r0);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r1);
    printf("\n  rank 2 kernels x1.5: %.1f -> %.1f us", r0->sum.baseline_us, r1->sum.predicted_us);
    CU_ASSERT(fabs(r1->sum.predicted_us - r0->sum.baseline_us) <= 0.01 * r0->sum.baseline_us);
    rv_job_result_free(r0);
    rv_job_result_free(r1);
}

/* Done-when 3: a clock offset of a few milliseconds injected into one
 * rank's copy is recovered within 10 us, and the replay is unchanged. */
static void test_clock_offset(void)
{
    const int64_t inject = 3217000; /* ns */
    rv_graph *shifted = rv_graph_clone(dlrm[5].g);
    CU_ASSERT_PTR_NOT_NULL_FATAL(shifted);
    shifted->origin_ns += inject; /* every time of rank 5 reads 3.217 ms late */
    rv_job_rank rk[NR];
    ranks_of(rk);
    rk[5].graph = shifted;
    rv_job *j2 = NULL;
    build(rk, NR, &j2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j2);
    double before = rv_job_clock_offset_us(job, 5), after = rv_job_clock_offset_us(j2, 5);
    double err_us = fabs((after - before) + (double)inject / 1e3);
    printf("\n  offset of rank 5: %.3f us, with %.3f ms injected %.3f us: recovered within %.3f us",
           before, (double)inject / 1e6, after, err_us);
    CU_ASSERT(err_us <= 10);
    for (int p = 0; p < NR; p++)
        if (p != 5)
            CU_ASSERT(fabs(rv_job_clock_offset_us(j2, (size_t)p) -
                           rv_job_clock_offset_us(job, (size_t)p)) < 1e-6);
    rv_job_result *a = run(job, NULL), *b = run(j2, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a);
    CU_ASSERT_PTR_NOT_NULL_FATAL(b);
    for (size_t i = 0; i < NR; i++) {
        CU_ASSERT(fabs(a->slots[i].baseline_us - b->slots[i].baseline_us) <= 1.0);
        CU_ASSERT(fabs(a->slots[i].wait_us - b->slots[i].wait_us) <= 1.0);
    }
    CU_ASSERT(fabs(a->sum.baseline_us - b->sum.baseline_us) <= 1.0);
    rv_job_result_free(a);
    rv_job_result_free(b);
    rv_job_free(j2);
    rv_graph_free(shifted);
}

/* Sanity over the range: more bandwidth is never slower; fewer ranks at
 * the same bandwidth are never slower per step. */
static void test_monotone(void)
{
    /* The sizes the annotations name: 394241 floats, 24 long ints. */
    CU_ASSERT_EQUAL(job->ncoll, 8);
    for (size_t c = 0; c < job->ncoll; c++)
        CU_ASSERT(job->coll_bytes[c] > 0);
    CU_ASSERT_DOUBLE_EQUAL(job->coll_bytes[4], 394241.0 * 4, 0.5);
    CU_ASSERT_DOUBLE_EQUAL(job->coll_bytes[1], 24.0 * 8, 0.5);
    static const double bw[] = {1, 5, 10, 25, 50, 100, 200, 400, 800, 1600, 6400};
    double prev = INFINITY;
    for (size_t i = 0; i < sizeof(bw) / sizeof(bw[0]); i++) {
        char doc[128];
        snprintf(doc, sizeof(doc), "{\"job\": {\"bandwidth_gbps\": %g}}", bw[i]);
        rv_job_result *r = run(job, doc);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        printf("\n  %7.0f Gb/s: %.1f us", bw[i], r->sum.predicted_us);
        CU_ASSERT(r->sum.predicted_us <= prev + 1e-6);
        /* Every collective's size comes from its nccl:* annotation. */
        CU_ASSERT(!has_warning(r, "message_sizes_inferred"));
        prev = r->sum.predicted_us;
        rv_job_result_free(r);
    }
    for (size_t b = 0; b < 3; b++) {
        static const double at[] = {10, 100, 1000};
        prev = 0;
        for (int n = 1; n <= 16; n++) {
            char doc[128];
            snprintf(doc, sizeof(doc), "{\"job\": {\"bandwidth_gbps\": %g, \"world_size\": %d}}",
                     at[b], n);
            rv_job_result *r = run(job, doc);
            CU_ASSERT_PTR_NOT_NULL_FATAL(r);
            if (b == 1)
                printf("\n  %2d ranks at %g Gb/s: %.1f us", n, at[b], r->sum.predicted_us);
            CU_ASSERT(r->sum.predicted_us >= prev - 1e-6);
            CU_ASSERT_EQUAL(r->nslots, (size_t)n);
            prev = r->sum.predicted_us;
            rv_job_result_free(r);
        }
    }
}

/* A partial job (rank 0 of 2) simulates, naming what is missing; a what-if
 * naming a rank the job lacks is refused. */
static void test_partial(void)
{
    rv_test_loaded l;
    CU_ASSERT_EQUAL_FATAL(rv_test_load(traces, "hta/a100-2rank-nccl.json.gz", &l), 0);
    rv_job_rank rk = {l.g, l.s, -1, -1, "a100-2rank"};
    rv_job *j = NULL;
    build(&rk, 1, &j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(rv_job_world_size(j), 2);
    rv_job_result *r = run(j, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT(has_warning(r, "partial_job"));
    json_t *o = rv_job_render(r, "partial");
    json_t *miss = json_object_get(o, "missing_ranks");
    CU_ASSERT_EQUAL(json_array_size(miss), 1);
    CU_ASSERT_EQUAL(json_integer_value(json_array_get(miss, 0)), 1);
    CU_ASSERT(r->slots[0].replay_error <= 0.05);
    json_decref(o);
    rv_job_result_free(r);
    r = run(j, "{\"job\": {\"remove_straggler\": true, \"straggler_rank\": 1}}");
    CU_ASSERT_PTR_NULL(r);
    rv_job_free(j);
    rv_test_unload(&l);
    /* Traces that name no rank take the order given, and say so. */
    CU_ASSERT_EQUAL_FATAL(rv_test_load(traces, "param/linear-2080ti.kineto.json.gz", &l), 0);
    rv_job_rank two[2] = {{l.g, l.s, -1, -1, "a"}, {l.g, l.s, -1, -1, "b"}};
    build(two, 2, &j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_EQUAL(rv_job_rank_at(j, 1), 1);
    r = run(j, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT(has_warning(r, "rank_from_order"));
    CU_ASSERT(has_warning(r, "no_collectives"));
    CU_ASSERT(r->slots[0].replay_error <= 0.05);
    rv_job_result_free(r);
    rv_job_free(j);
    rv_test_unload(&l);
}

/* The critical path walks back through the gangs to the rank that
 * arrived last, so on DLRM it crosses ranks (it was one run on rank 4). */
static void test_critical_path(void)
{
    rv_job_result *r = run(job, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    int ranks = 0;
    unsigned seen = 0;
    printf("\n ");
    for (size_t i = 0; i < r->npath; i++) {
        const rv_job_path_seg *p = &r->path[i];
        printf(" rank %d [%.1f, %.1f] us (%zu tasks, %zu inferred links)%s", p->rank, p->start_us,
               p->end_us, p->tasks, p->inferred, i + 1 < r->npath ? " <-" : "");
        if (!(seen & (1u << p->rank)))
            ranks++;
        seen |= 1u << p->rank;
        CU_ASSERT(p->start_us <= p->end_us);
        if (i > 0)
            CU_ASSERT(p->start_us <= r->path[i - 1].start_us);
    }
    CU_ASSERT(r->npath >= 2);
    CU_ASSERT(ranks >= 2);
    /* DLRM's traces name no process group: matched by order, and said so. */
    int said = 0;
    for (size_t i = 0; i < job->nwarn; i++)
        said |= !strcmp(job->warn[i].code, "collectives_matched_by_order");
    CU_ASSERT(said);
    rv_job_result_free(r);
}

int main(void)
{
    traces = rv_test_require_shared_traces("param/dlrm-8rank/worker0.kineto.json.gz");
    for (int i = 0; i < NR; i++) {
        char rel[128];
        snprintf(rel, sizeof(rel), "param/dlrm-8rank/worker%d.kineto.json.gz", i);
        if (rv_test_load(traces, rel, &dlrm[i]) != 0)
            return 1;
    }
    rv_job_rank rk[NR];
    ranks_of(rk);
    build(rk, NR, &job);
    if (!job)
        return 1;
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("job", NULL, NULL);
    CU_add_test(s, "DLRM 8 ranks replay as one job", test_replay);
    CU_add_test(s, "no rank leaves a collective before the last entered", test_cross_rank_edges);
    CU_add_test(s, "a slowed rank is the straggler; removing it gives the job back",
                test_straggler);
    CU_add_test(s, "kernels alone hide behind DLRM's host", test_kernels_hidden);
    CU_add_test(s, "an injected clock offset is recovered", test_clock_offset);
    CU_add_test(s, "bandwidth and rank count are monotone", test_monotone);
    CU_add_test(s, "a partial job says what is missing", test_partial);
    CU_add_test(s, "the critical path crosses ranks", test_critical_path);
    unsigned fails = rv_test_run();
    rv_job_free(job);
    for (int i = 0; i < NR; i++)
        rv_test_unload(&dlrm[i]);
    return fails ? 1 : 0;
}
