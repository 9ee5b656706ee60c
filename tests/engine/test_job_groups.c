/* Collectives matched by process group, sub-groups and point-to-point
 * pairs, on jobs derived from a real A100 trace (tests/data/jobs, made by
 * its derive.py): a 2-rank job whose windows start at different
 * collectives (sequence numbers), and a 4-rank job with two tensor-
 * parallel pairs, a world group and two send/recv pairs. The old
 * stream-and-order matching is checked to gang them wrongly. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace/rv_coll.h"
#include "graph/rv_graph.h"
#include "job/rv_job.h"
#include "job/rv_job_int.h"
#include "reader/rv_kineto.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "reader/rv_snapshot.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_trace.h"
#include "common/rv_test_util.h"

#define DIR "tests/data/jobs"

static int load(const char *prefix, int n, rv_test_loaded *l, rv_job_rank *rk)
{
    char rel[64];
    for (int i = 0; i < n; i++) {
        snprintf(rel, sizeof(rel), "%s-rank%d.json.gz", prefix, i);
        if (rv_test_load(DIR, rel, &l[i]) != 0)
            return -1;
        rk[i] = (rv_job_rank){l[i].g, l[i].s, -1, -1, NULL};
    }
    return 0;
}

static rv_job *build(const rv_job_rank *rk, size_t n)
{
    rv_job *j = NULL;
    rv_error err;
    rv_error_clear(&err);
    if (rv_job_build(rk, n, &j, &err) != 0)
        fprintf(stderr, "\n  build: %s\n", err.message);
    return j;
}

static const rv_warning *job_warning(const rv_job *j, const char *code)
{
    for (size_t i = 0; i < j->nwarn; i++)
        if (!strcmp(j->warn[i].code, code))
            return &j->warn[i];
    return NULL;
}

/* The member ranks of collective c as a bit mask. */
static unsigned members(const rv_job *j, size_t c)
{
    unsigned m = 0;
    for (size_t p = 0; p < j->n; p++)
        if (j->coll_task[c * j->n + p] >= 0)
            m |= 1u << j->r[p].rank;
    return m;
}

static const rv_event *event_of(const rv_job *j, size_t c, size_t p)
{
    const rv_graph *g = j->r[p].g;
    return &g->trace->events[g->tasks[j->coll_task[c * j->n + p]].event];
}

static rv_job_result *replay(const rv_job *j)
{
    rv_job_result *r = NULL;
    rv_run_opts o = {.iteration = RV_ITER_MEDIAN};
    rv_error err;
    rv_error_clear(&err);
    if (rv_job_run(j, NULL, &o, &r, &err) != 0)
        fprintf(stderr, "\n  replay: %s\n", err.message);
    return r;
}

/* Forgets the process groups, as a trace of older Kineto would hold. */
static void drop_groups(rv_test_loaded *l, int n)
{
    for (int i = 0; i < n; i++)
        for (size_t e = 0; e < l[i].tr->nevents; e++)
            l[i].tr->events[e].pg = 0;
}

/* (a) Two ranks; rank 0's window lacks the first collective. Matching by
 * sequence number pairs the same collectives; order would not. */
static void test_two_ranks_by_sequence(void)
{
    rv_test_loaded l[2] = {0};
    rv_job_rank rk[2];
    CU_ASSERT_EQUAL_FATAL(load("pg2", 2, l, rk), 0);
    rv_job *j = build(rk, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    printf("\n  %zu collectives matched", j->ncoll);
    CU_ASSERT_EQUAL(j->ncoll, 6);
    CU_ASSERT_PTR_NULL(job_warning(j, "collectives_matched_by_order"));
    CU_ASSERT_PTR_NULL(job_warning(j, "collective_mismatch"));
    const rv_warning *w = job_warning(j, "collective_count_mismatch");
    CU_ASSERT(w && strstr(w->message, "process group '0'"));
    for (size_t c = 0; c < j->ncoll; c++) {
        CU_ASSERT_EQUAL(members(j, c), 3u);
        const rv_event *a = event_of(j, c, 0), *b = event_of(j, c, 1);
        CU_ASSERT(a->seq >= 2 && a->seq == b->seq);
        CU_ASSERT_EQUAL(a->bytes, b->bytes);
    }
    double off = rv_job_clock_offset_us(j, 1);
    printf(", offset of rank 1 %.3f us (injected 2345.678)", off);
    CU_ASSERT(fabs(off + 2345.678) < 1);
    rv_job_result *r = replay(j);
    CU_ASSERT_PTR_NOT_NULL(r);
    if (r)
        CU_ASSERT(r->sum.replay_error < 0.01);
    rv_job_result_free(r);
    rv_job_free(j);

    /* By order instead: the first pair is two different collectives. */
    drop_groups(l, 2);
    j = build(rk, 2);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_PTR_NOT_NULL(job_warning(j, "collectives_matched_by_order"));
    CU_ASSERT(j->ncoll < 6 || event_of(j, 0, 0)->seq != event_of(j, 0, 1)->seq);
    printf("; by order: %zu matched, the first pairs seq %d with %d", j->ncoll,
           j->ncoll ? event_of(j, 0, 0)->seq : -1, j->ncoll ? event_of(j, 0, 1)->seq : -1);
    rv_job_free(j);
    for (int i = 0; i < 2; i++)
        rv_test_unload(&l[i]);
}

/* (b, c) Four ranks: pairs {0,1} and {2,3}, a world group, and send/recv
 * 0->2 and 1->3. Each gang holds only its group's (or pair's) members. */
static void test_subgroups_and_pairs(void)
{
    rv_test_loaded l[4] = {0};
    rv_job_rank rk[4];
    CU_ASSERT_EQUAL_FATAL(load("sub4", 4, l, rk), 0);
    rv_job *j = build(rk, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    size_t pair01 = 0, pair23 = 0, world = 0, p02 = 0, p13 = 0, other = 0;
    for (size_t c = 0; c < j->ncoll; c++) {
        unsigned m = members(j, c);
        int op = j->coll_op[c];
        if (m == 0x3 && op == RV_COLL_ALLREDUCE)
            pair01++;
        else if (m == 0xc && op == RV_COLL_ALLREDUCE)
            pair23++;
        else if (m == 0xf && op == RV_COLL_BROADCAST)
            world++;
        else if (m == 0x5 && op == RV_COLL_ALLTOALL)
            p02++;
        else if (m == 0xa && op == RV_COLL_ALLTOALL)
            p13++;
        else
            other++;
    }
    printf("\n  %zu gangs: %zu of {0,1}, %zu of {2,3}, %zu of all, send/recv %zu of {0,2}, "
           "%zu of {1,3}, %zu other",
           j->ncoll, pair01, pair23, world, p02, p13, other);
    CU_ASSERT_EQUAL(j->ncoll, 12);
    CU_ASSERT_EQUAL(pair01, 4);
    CU_ASSERT_EQUAL(pair23, 4);
    CU_ASSERT_EQUAL(world, 2);
    CU_ASSERT_EQUAL(p02, 1);
    CU_ASSERT_EQUAL(p13, 1);
    CU_ASSERT_EQUAL(other, 0);
    CU_ASSERT_EQUAL(j->nwarn, 0);
    /* Ranks 2 and 3 share no pair collective with rank 0: aligned through
     * the world group. */
    for (size_t p = 1; p < 4; p++) {
        double off = rv_job_clock_offset_us(j, p);
        CU_ASSERT(fabs(off + 1234.5 * (double)p) < 1);
    }
    rv_job_result *r = replay(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(r);
    CU_ASSERT_EQUAL(r->ncolls, 12);
    for (size_t i = 0; i < r->ncolls; i++)
        CU_ASSERT(r->colls[i].first_leave_us >= r->colls[i].last_enter_us - 1e-3);
    CU_ASSERT(r->sum.replay_error < 0.01);
    rv_job_result_free(r);
    rv_job_free(j);

    /* A size that differs between a pair's members is named, not fatal. */
    const rv_graph *g3 = l[3].g;
    for (size_t i = 0; i < g3->ntasks; i++)
        if ((g3->tasks[i].flags & RV_TF_NCCL) && strstr(rv_task_name(g3, i), "AllReduce")) {
            l[3].tr->events[g3->tasks[i].event].bytes += 4;
            break;
        }
    j = build(rk, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    const rv_warning *w = job_warning(j, "collective_size_mismatch");
    CU_ASSERT(w && strstr(w->message, "process group '2'"));
    CU_ASSERT_EQUAL(j->ncoll, 12);
    rv_job_free(j);

    /* The old matching, by stream and order, gangs all four ranks in each
     * pair's all-reduce and in each send/recv. */
    drop_groups(l, 4);
    j = build(rk, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    CU_ASSERT_PTR_NOT_NULL(job_warning(j, "collectives_matched_by_order"));
    size_t wrong = 0;
    for (size_t c = 0; c < j->ncoll; c++)
        wrong += members(j, c) == 0xf && j->coll_op[c] != RV_COLL_BROADCAST;
    printf("; by order: %zu gangs, %zu of them all four ranks in a pair's collective", j->ncoll,
           wrong);
    CU_ASSERT_EQUAL(wrong, 5);
    rv_job_free(j);
    for (int i = 0; i < 4; i++)
        rv_test_unload(&l[i]);
}

/* The answer to doc on j (new; NULL with the error printed). */
static rv_job_result *answer(const rv_job *j, const char *doc)
{
    rv_whatif *w = NULL;
    rv_job_result *r = NULL;
    rv_run_opts o = {.iteration = RV_ITER_MEDIAN};
    rv_error err;
    rv_error_clear(&err);
    if (rv_whatif_parse_text(doc, &w, &err) != 0 || rv_job_run(j, w, &o, &r, &err) != 0)
        fprintf(stderr, "\n  %s: %s\n", doc, err.message);
    rv_whatif_free(w);
    return r;
}

/* The first straggler of r's answer and its delay (rank -1 when none). */
static int first_straggler(const rv_job_result *r, double *delay_us)
{
    json_t *o = rv_job_render(r, NULL);
    json_t *s = json_array_get(json_object_get(o, "stragglers"), 0);
    int rank = s ? (int)json_integer_value(json_object_get(s, "rank")) : -1;
    *delay_us = s ? json_number_value(json_object_get(s, "delay_us")) : 0;
    json_decref(o);
    return rank;
}

/* Unlike the host-bound DLRM job (test_job), the A100 ranks' kernels are
 * what the collectives wait for: slowing one rank's kernels alone by 1.5
 * makes it the first straggler, and removing the straggler on that
 * predicted run takes the wait away again. */
static void test_kernel_straggler(void)
{
    rv_test_loaded l[4] = {0};
    rv_job_rank rk[4];
    CU_ASSERT_EQUAL_FATAL(load("sub4", 4, l, rk), 0);
    rv_job *j = build(rk, 4);
    CU_ASSERT_PTR_NOT_NULL_FATAL(j);
    rv_job_result *base = replay(j);
    CU_ASSERT_PTR_NOT_NULL_FATAL(base);
    for (int slow = 0; slow < 4; slow++) {
        char doc[256];
#define SLOW_DOC                                                                                   \
    "{\"optimizations\": [{\"kind\": \"scale\", \"select\": {\"kind\": \"kernel\"}, "              \
    "\"factor\": 1.5, \"ranks\": [%d]}]%s}"
        snprintf(doc, sizeof(doc), SLOW_DOC, slow, "");
        rv_job_result *r = answer(j, doc);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        double delay = 0, after = 0;
        CU_ASSERT_EQUAL(first_straggler(r, &delay), slow);
        CU_ASSERT(delay > 100);
        snprintf(doc, sizeof(doc), SLOW_DOC, slow, ", \"job\": {\"remove_straggler\": true}");
        rv_job_result *fixed = answer(j, doc);
        CU_ASSERT_PTR_NOT_NULL_FATAL(fixed);
        first_straggler(fixed, &after);
        CU_ASSERT(after < 0.05 * delay);
        CU_ASSERT(fabs(fixed->sum.predicted_us - base->sum.predicted_us) <=
                  0.05 * base->sum.predicted_us);
        printf("%s rank %d: %.0f us delay, %.1f us after removing it", slow ? ";" : "", slow, delay,
               after);
        rv_job_result_free(fixed);
        rv_job_result_free(r);
    }
    rv_job_result_free(base);
    rv_job_free(j);
    for (int i = 0; i < 4; i++)
        rv_test_unload(&l[i]);
}

/* The store keeps traces as snapshots: the groups survive the round trip. */
static void test_snapshot_keeps_groups(void)
{
    const char *files[] = {"pg2-rank1.json.gz", "sub4-rank0.json.gz", "sub4-rank3.json.gz"};
    for (size_t f = 0; f < 3; f++) {
        rv_test_loaded l = {0};
        CU_ASSERT_EQUAL_FATAL(rv_test_load(DIR, files[f], &l), 0);
        uint8_t *buf = NULL;
        size_t len = 0;
        rv_trace *back = NULL;
        rv_error err;
        rv_error_clear(&err);
        CU_ASSERT_EQUAL_FATAL(rv_snapshot_encode(l.tr, 1, &buf, &len, &err), 0);
        CU_ASSERT_EQUAL_FATAL(rv_snapshot_decode(buf, len, &back, &err), 0);
        CU_ASSERT_EQUAL_FATAL(back->nevents, l.tr->nevents);
        size_t grouped = 0, seqs = 0, peers = 0, bad = 0;
        for (size_t i = 0; i < back->nevents; i++) {
            const rv_event *x = &l.tr->events[i], *y = &back->events[i];
            bad += x->pg != y->pg || x->pg_ranks != y->pg_ranks || x->seq != y->seq ||
                   x->peer != y->peer;
            grouped += x->pg != 0;
            seqs += x->seq >= 0;
            peers += x->peer >= 0;
        }
        printf("\n  %s: %zu events with a group, %zu with a sequence number, %zu with a peer; "
               "%zu differ after the round trip",
               files[f], grouped, seqs, peers, bad);
        CU_ASSERT(grouped > 0);
        CU_ASSERT_EQUAL(bad, 0);
        rv_trace_free(back);
        free(buf);
        rv_test_unload(&l);
    }
}

/* The reader: a group's members from the kernel's list, else from
 * distributedInfo.pg_config, else from the rank range; Seq and the peer. */
static void test_reader_groups(void)
{
    static const char doc[] =
        "{\"distributedInfo\": {\"rank\": 2, \"world_size\": 8, \"pg_config\": ["
        "{\"pg_name\": \"0\", \"pg_desc\": \"default_pg\", \"ranks\": [0, 1, 2, 3, 4, 5, 6, 7]},"
        "{\"pg_name\": \"7\", \"ranks\": [2, 5]}, {\"pg_name\": \"8\", \"ranks\": []}]},"
        "\"traceEvents\": ["
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclKernel_AllReduce\", \"pid\": 0, "
        "\"tid\": 7, \"ts\": 10, \"dur\": 5, \"args\": {\"stream\": 7, \"device\": 0, "
        "\"Process Group Name\": \"7\", \"Seq\": 42}},"
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclKernel_AllReduce\", \"pid\": 0, "
        "\"tid\": 7, \"ts\": 20, \"dur\": 5, \"args\": {\"stream\": 7, \"device\": 0, "
        "\"Process Group Name\": \"9\", \"Global rank start\": 1, \"Global rank stride\": 2, "
        "\"Group size\": 3}},"
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclKernel_SendRecv\", \"pid\": 0, "
        "\"tid\": 7, \"ts\": 30, \"dur\": 5, \"args\": {\"stream\": 7, \"device\": 0, "
        "\"Process Group Name\": \"0\", \"Process Group Ranks\": \"[0, 2]\", \"Dst Rank\": 0}},"
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclKernel_AllReduce\", \"pid\": 0, "
        "\"tid\": 7, \"ts\": 40, \"dur\": 5, \"args\": {\"stream\": 7, \"device\": 0, "
        "\"Process Group Name\": \"8\"}}]}";
    FILE *f = fmemopen((void *)doc, sizeof(doc) - 1, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    rv_trace *t = NULL;
    rv_error err;
    rv_error_clear(&err);
    int rc = rv_kineto_read_stream(f, NULL, &t, &err);
    fclose(f);
    if (rc != 0)
        fprintf(stderr, "\n  %s\n", err.message);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL_FATAL(t->nevents, 4);
    const rv_event *e = t->events;
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, e[0].pg), "7");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, e[0].pg_ranks), "[2, 5]");
    CU_ASSERT_EQUAL(e[0].seq, 42);
    CU_ASSERT_EQUAL(e[0].peer, RV_NONE);
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, e[1].pg_ranks), "[1, 3, 5]");
    CU_ASSERT_EQUAL(e[1].seq, RV_NONE);
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, e[2].pg_ranks), "[0, 2]");
    CU_ASSERT_EQUAL(e[2].peer, 0);
    CU_ASSERT_EQUAL(e[3].pg_ranks, 0); /* an empty member list is no list */
    rv_trace_free(t);
}

/* A collective kernel without its group (as some PyTorch versions write
 * them) takes the group, members, sequence number and peer of the CPU op
 * of the same External id that has them (record_param_comms); a kernel
 * with its own keeps them, and one without a matching op stays without. */
static void test_reader_groups_from_ops(void)
{
    static const char doc[] =
        "{\"traceEvents\": ["
        "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"pid\": 1, "
        "\"tid\": 1, \"ts\": 1, \"dur\": 8, \"args\": {\"External id\": 5, "
        "\"Process Group Name\": \"3\", \"Process Group Ranks\": \"[0, 1]\", \"Seq\": 9}},"
        "{\"ph\": \"X\", \"cat\": \"cpu_op\", \"name\": \"record_param_comms\", \"pid\": 1, "
        "\"tid\": 1, \"ts\": 20, \"dur\": 8, \"args\": {\"External id\": 6, "
        "\"Process Group Name\": \"3\", \"Process Group Ranks\": \"[0, 1]\", \"Dst Rank\": 1}},"
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclKernel_AllReduce\", \"pid\": 0, "
        "\"tid\": 7, \"ts\": 10, \"dur\": 5, \"args\": {\"stream\": 7, \"device\": 0, "
        "\"External id\": 5}},"
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclKernel_SendRecv\", \"pid\": 0, "
        "\"tid\": 7, \"ts\": 30, \"dur\": 5, \"args\": {\"stream\": 7, \"device\": 0, "
        "\"External id\": 6}},"
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclKernel_AllReduce\", \"pid\": 0, "
        "\"tid\": 7, \"ts\": 40, \"dur\": 5, \"args\": {\"stream\": 7, \"device\": 0, "
        "\"External id\": 5, \"Process Group Name\": \"4\", \"Seq\": 2}},"
        "{\"ph\": \"X\", \"cat\": \"kernel\", \"name\": \"ncclKernel_AllReduce\", \"pid\": 0, "
        "\"tid\": 7, \"ts\": 50, \"dur\": 5, \"args\": {\"stream\": 7, \"device\": 0, "
        "\"External id\": 77}}]}";
    FILE *f = fmemopen((void *)doc, sizeof(doc) - 1, "r");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    rv_trace *t = NULL;
    rv_error err;
    rv_error_clear(&err);
    int rc = rv_kineto_read_stream(f, NULL, &t, &err);
    fclose(f);
    if (rc != 0)
        fprintf(stderr, "\n  %s\n", err.message);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    CU_ASSERT_EQUAL_FATAL(t->nevents, 6);
    const rv_event *e = t->events;
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, e[2].pg), "3");
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, e[2].pg_ranks), "[0, 1]");
    CU_ASSERT_EQUAL(e[2].seq, 9);
    CU_ASSERT_EQUAL(e[3].peer, 1);
    CU_ASSERT_STRING_EQUAL(rv_trace_str(t, e[4].pg), "4");
    CU_ASSERT_EQUAL(e[4].seq, 2);
    CU_ASSERT_EQUAL(e[5].pg, 0);
    CU_ASSERT_EQUAL(e[5].seq, RV_NONE);
    rv_trace_free(t);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return CU_get_error();
    CU_pSuite s = CU_add_suite("job_groups", NULL, NULL);
    if (!s ||
        !CU_add_test(s, "two ranks matched by process group and sequence number",
                     test_two_ranks_by_sequence) ||
        !CU_add_test(s, "sub-groups and send/recv pairs gang only their members",
                     test_subgroups_and_pairs) ||
        !CU_add_test(s, "one rank's kernels x1.5 make it the straggler; removing it undoes that",
                     test_kernel_straggler) ||
        !CU_add_test(s, "snapshots keep the process groups", test_snapshot_keeps_groups) ||
        !CU_add_test(s, "collective kernels take their group from their record_param_comms op",
                     test_reader_groups_from_ops) ||
        !CU_add_test(s, "the reader keeps groups, members, sequence numbers and peers",
                     test_reader_groups)) {
        CU_cleanup_registry();
        return CU_get_error();
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures();
    CU_cleanup_registry();
    return failed ? 1 : 0;
}
