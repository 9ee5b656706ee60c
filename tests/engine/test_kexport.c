/* The predicted run exported in the Kineto dialect (engine/rv_kexport.h)
 * reads back through the project's own reader at the predicted steps, with
 * the op tree of the input (same ops, same nesting), a flow pair per
 * launched GPU task, no negative timestamp, the metadata carried over, one
 * annotation per applied model, and no new warning about its structure.
 * Public traces (one traced with modules); skips (77) without
 * RV_SHARED_TRACES. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "graph/rv_graph.h"
#include "export/rv_kexport.h"
#include "reader/rv_kineto.h"
#include "simulate/rv_report.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_trace.h"
#include "common/rv_test_util.h"

static const char *traces;

static const char *const TRACES[] = {
    "kineto/resnet50-v100-workers0.pt.trace.json.gz",
    "hta/v100-1rank-ns-resolution.json.gz",
    "hta/a100-rank0-of-16-five-streams.json.gz",
    /* with_modules: the reader keeps its "nn.Module: " python events, and
     * the export must count them to find each kept event again. */
    "tracelens/h100-bert-small-forward.json.gz",
};

static const char *const WHATIFS[] = {
    "{}",
    "{\"optimizations\":[{\"kind\":\"amp\"}]}",
    "{\"power_limit_frac\":0.6}",
    "{\"optimizations\":[{\"kind\":\"dataloader\",\"workers\":4}]}",
    "{\"optimizations\":[{\"kind\":\"cpu_speed\",\"factor\":2}]}",
};

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define RV_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define RV_SANITIZED 1
#endif
#endif
#ifndef RV_SANITIZED
#define RV_SANITIZED 0
#endif

/* Under sanitizers (unoptimized, several times slower) the code paths are
 * what matters: AMP (re-timed, inserted and launched tasks) on the second
 * trace; the round trip and the fuzz replay add the rest. */
static int sanitized_case(size_t t, size_t w)
{
    return t == 1 && w == 1;
}

static unsigned char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    unsigned char *p = NULL;
    long n;
    if (!f)
        return NULL;
    if (fseek(f, 0, SEEK_END) == 0 && (n = ftell(f)) > 0 && fseek(f, 0, SEEK_SET) == 0) {
        p = malloc((size_t)n);
        if (p && fread(p, 1, (size_t)n, f) != (size_t)n) {
            free(p);
            p = NULL;
        }
        *len = (size_t)n;
    }
    fclose(f);
    return p;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

/* The ac2g flow ids of one phase ("s" or "f") as the exporter writes them. */
static size_t flow_ids(const char *text, const char *ph, int64_t **out)
{
    char pat[32];
    size_t n = 0, cap = 1024;
    int64_t *ids = malloc(cap * sizeof(*ids));
    snprintf(pat, sizeof(pat), "{\"ph\":\"%s\",\"id\":", ph);
    for (const char *p = strstr(text, pat); p && ids; p = strstr(p + 1, pat)) {
        if (n == cap) {
            cap *= 2;
            int64_t *bigger = realloc(ids, cap * sizeof(*ids));
            if (!bigger)
                break;
            ids = bigger;
        }
        /* Only ac2g: the input's own flows (fwdbwd) are copied as they are. */
        const char *end = strchr(p, '}'), *cat = strstr(p, "\"cat\":\"ac2g\"");
        if (cat && end && cat < end)
            ids[n++] = strtoll(p + strlen(pat), NULL, 10);
    }
    qsort(ids, n, sizeof(*ids), cmp_i64);
    *out = ids;
    return n;
}

/* Innermost enclosing CPU op or annotation of each such event on its
 * thread (-1: none), by the usual start-ascending, longest-first sweep. */
typedef struct span {
    int64_t a, b;
    uint32_t pid, tid;
    int32_t idx;
} span;

static int cmp_span(const void *x, const void *y)
{
    const span *p = x, *q = y;
    if (p->pid != q->pid)
        return p->pid < q->pid ? -1 : 1;
    if (p->tid != q->tid)
        return p->tid < q->tid ? -1 : 1;
    if (p->a != q->a)
        return p->a < q->a ? -1 : 1;
    if (p->b != q->b)
        return p->b > q->b ? -1 : 1;
    return p->idx - q->idx;
}

static int32_t *parents(const rv_trace *t, size_t n)
{
    span *s = malloc((n ? n : 1) * sizeof(*s));
    int32_t *par = malloc((n ? n : 1) * sizeof(*par)), *stack = malloc((n + 1) * sizeof(*stack));
    size_t m = 0;
    for (size_t i = 0; s && par && i < n; i++) {
        const rv_event *e = &t->events[i];
        par[i] = -2; /* not an op */
        if (e->cat != RV_CAT_CPU_OP && e->cat != RV_CAT_USER_ANNOTATION)
            continue;
        s[m++] = (span){e->ts_ns, e->ts_ns + e->dur_ns, e->pid, e->tid, (int32_t)i};
    }
    if (!s || !par || !stack) {
        free(s);
        free(stack);
        return par;
    }
    qsort(s, m, sizeof(*s), cmp_span);
    size_t top = 0;
    for (size_t k = 0; k < m; k++) {
        if (k && (s[k].pid != s[k - 1].pid || s[k].tid != s[k - 1].tid))
            top = 0;
        while (top && s[stack[top - 1]].b < s[k].b)
            top--;
        par[s[k].idx] = top ? s[stack[top - 1]].idx : -1;
        stack[top++] = (int32_t)k;
    }
    free(s);
    free(stack);
    return par;
}

static int has_code(const rv_run_result *r, const char *code)
{
    for (size_t i = 0; i < r->nwarnings; i++)
        if (strcmp(r->warnings[i].code, code) == 0)
            return 1;
    return 0;
}

/* Where the headline parts from the steps (see check_case). */
static int headline_exempt(const char *trace, const char *doc)
{
    /* Step 8 of the prediction is 8% longer than the others: median 116.1
     * ms, steady mean 118.7 ms. */
    if (strstr(trace, "resnet50") && strstr(doc, "dataloader"))
        return 1;
    /* The same with the CPU twice as fast: the export's median of the five
     * steady steps is 2.5% below the steady mean the answer scales by. */
    if (strstr(trace, "resnet50") && strstr(doc, "cpu_speed"))
        return 1;
    /* With AMP the CPU runs ahead of the GPU: the markers close at 33.8 ms
     * a step, the GPU completes a step every 43.0 ms. */
    if (strstr(trace, "ns-resolution") && strstr(doc, "amp"))
        return 1;
    return 0;
}

/* Worst step error and headline error over every case, printed at the end. */
static double worst_step, worst_headline;

static void check_case(const rv_test_loaded *l, const unsigned char *orig, size_t len,
                       const char *name, const char *doc)
{
    rv_error err;
    rv_whatif *w = NULL;
    rv_run_result *r = NULL, *rr = NULL;
    rv_test_loaded back = {0};
    rv_buf out = RV_BUF_INIT(RV_KEXPORT_MAX_OUTPUT);
    rv_kexport_stats st;
    int64_t *sid = NULL, *fid = NULL;
    int32_t *p0 = NULL;
    rv_run_opts o = {.iteration = RV_ITER_MEDIAN, .keep_predicted = 1};

    CU_ASSERT_EQUAL_FATAL(rv_whatif_parse_text(doc, &w, &err), 0);
    if (rv_run(l->g, l->s, w, &o, &r, &err) != 0) {
        printf("  %s %s: refused (%s)\n", name, doc, err.message);
        goto out;
    }
    int rc = rv_kexport_run(orig, len, r, 0, NULL, &out, &st, &err);
    if (rc != 0)
        printf("export failed: %s\n", err.message);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    rc = rv_kineto_read_buffer(out.p, out.len, NULL, &back.tr, &err);
    if (rc == 0)
        rc = rv_graph_build(back.tr, NULL, &back.g, &err);
    if (rc == 0)
        rc = rv_sim_run(back.g, RV_SCHED_EARLIEST_START, &back.s, &err);
    if (rc != 0)
        printf("read back failed: %s\n", err.message);
    CU_ASSERT_EQUAL_FATAL(rc, 0);

    /* Every step reads back at its predicted duration. */
    const rv_graph *pg = rv_run_pred_graph(r);
    const rv_sim *ps = rv_run_pred_sim(r);
    CU_ASSERT_EQUAL_FATAL(back.g->niters, pg->niters);
    double step_err = 0;
    for (size_t i = 0; i < pg->niters; i++) {
        double pred = (double)rv_sim_iter_ns(pg, ps, i);
        double got = (double)(back.g->iters[i].end_ns - back.g->iters[i].start_ns);
        CU_ASSERT_EQUAL(back.g->iters[i].step, pg->iters[i].step);
        double e = pred > 0 ? fabs(got - pred) / pred : 0;
        if (e > step_err)
            step_err = e;
    }
    CU_ASSERT(step_err <= 0.02);
    /* The headline: the export's measured step against the prediction. */
    CU_ASSERT_EQUAL_FATAL(rv_run(back.g, back.s, NULL, NULL, &rr, &err), 0);
    double head = fabs(rr->sum.measured_us - r->sum.predicted_us) / r->sum.predicted_us;
    printf("  %-42s %-58s predicted %9.1f us, export measures %9.1f us (%+.2f%%), worst step "
           "%.2f%%, replays %.2f%% off, %zu flows, %zu inserted (%zu launched)\n",
           name, doc, r->sum.predicted_us, rr->sum.measured_us,
           100 * (rr->sum.measured_us / r->sum.predicted_us - 1), 100 * step_err,
           100 * rr->sum.replay_error, st.flows, st.inserted, st.launched);
    /* The export's figure is the median of its steps' CPU markers; the
     * answer scales the baseline by the steady-state span up to the GPU's
     * completion. They part where the predicted steps vary or the CPU runs
     * ahead of the GPU (docs/internals/kexport.md): those cases are named
     * here and checked step by step only. */
    if (!headline_exempt(name, doc))
        CU_ASSERT(head <= 0.02);
    if (step_err > worst_step)
        worst_step = step_err;
    if (head > worst_headline && !headline_exempt(name, doc))
        worst_headline = head;

    /* GPU work sits where the simulation put it, to the nanosecond. */
    size_t gpu = 0, off = 0;
    for (size_t i = 0; i < l->g->ntasks && st.removed == 0; i++) {
        const rv_task *t = &pg->tasks[i];
        if (t->kind == RV_TASK_CPU || t->event < 0)
            continue;
        const rv_event *e = &back.tr->events[t->event];
        gpu++;
        off += e->ts_ns != pg->origin_ns + ps->start_ns[i] + st.shift_ns ||
               e->dur_ns != ps->end_ns[i] - ps->start_ns[i];
    }
    CU_ASSERT_EQUAL(off, 0);
    if (off)
        printf("    %zu of %zu GPU tasks away from their simulated times\n", off, gpu);

    /* No negative time anywhere in the file. */
    CU_ASSERT_PTR_NULL(strstr(out.p, "\"ts\":-"));
    for (size_t i = 0; i < back.tr->nevents; i++)
        if (back.tr->events[i].ts_ns < 0) {
            CU_FAIL("negative ts");
            break;
        }

    /* The input's events, in order, with the same op tree. */
    const rv_trace *t0 = l->tr, *t1 = back.tr;
    CU_ASSERT_FATAL(t1->nevents >= t0->nevents - st.removed);
    if (st.removed == 0) {
        size_t same = 0;
        for (size_t i = 0; i < t0->nevents; i++)
            same += t0->events[i].cat == t1->events[i].cat &&
                    strcmp(rv_trace_str(t0, t0->events[i].name),
                           rv_trace_str(t1, t1->events[i].name)) == 0;
        CU_ASSERT_EQUAL(same, t0->nevents);
        /* Each op's parent in the input still holds it in the export (the
         * map is monotone; zero-length ops may touch their neighbours). */
        p0 = parents(t0, t0->nevents);
        size_t ops = 0, outside = 0;
        for (size_t i = 0; p0 && i < t0->nevents; i++) {
            if (p0[i] == -2)
                continue;
            ops++;
            if (p0[i] < 0)
                continue;
            const rv_event *c = &t1->events[i], *p = &t1->events[p0[i]];
            outside += c->ts_ns < p->ts_ns || c->ts_ns + c->dur_ns > p->ts_ns + p->dur_ns;
        }
        CU_ASSERT(ops > 0);
        CU_ASSERT_EQUAL(outside, 0);
        if (outside)
            printf("    %zu of %zu ops left their parent\n", outside, ops);
    }

    /* One ac2g pair per launched GPU task: s and f ids match one to one. */
    size_t ns = flow_ids(out.p, "s", &sid), nf = flow_ids(out.p, "f", &fid);
    if (ns != st.flows || nf != st.flows)
        printf("    flows: %zu s, %zu f, %zu written\n", ns, nf, st.flows);
    CU_ASSERT_EQUAL(ns, st.flows);
    CU_ASSERT_EQUAL(nf, st.flows);
    int paired = ns == nf && sid && fid;
    for (size_t i = 0; paired && i < ns; i++)
        paired = sid[i] == fid[i] && (i == 0 || sid[i] != sid[i - 1]);
    CU_ASSERT(paired);
    size_t launched = 0;
    for (size_t i = 0; i < pg->ntasks && i < l->g->ntasks; i++)
        launched += pg->tasks[i].kind != RV_TASK_CPU && pg->tasks[i].launch >= 0 &&
                    !(pg->tasks[i].flags & RV_TF_REMOVED);
    CU_ASSERT_EQUAL(st.flows, launched + st.launched);

    /* Metadata carried over, and the model named. */
    CU_ASSERT_EQUAL(t1->ndevices, t0->ndevices);
    CU_ASSERT_EQUAL(t1->rank, t0->rank);
    CU_ASSERT_EQUAL(t1->world_size, t0->world_size);
    CU_ASSERT_PTR_NOT_NULL(strstr(out.p, "\"reverieExport\":{\"source\":\"predicted\""));
    for (size_t i = 0; i < json_array_size(r->applied); i++) {
        char want[160];
        const char *m = json_string_value(json_object_get(json_array_get(r->applied, i), "model"));
        snprintf(want, sizeof(want), "\"name\":\"reverie what-if: %s\"", m ? m : "?");
        CU_ASSERT_PTR_NOT_NULL(strstr(out.p, want));
    }

    /* No new warning about the structure; an inserted task without an
     * anchor's launch to follow has no launching call, and the reader says
     * so, counting exactly those. */
    for (size_t i = 0; i < rr->nwarnings; i++) {
        const char *c = rr->warnings[i].code;
        if (has_code(r, c) || strcmp(c, "replay_error") == 0)
            continue;
        if (strcmp(c, "graph_inferred") == 0 && st.inserted > st.launched)
            continue;
        printf("    new warning %s: %s\n", c, rr->warnings[i].message);
        CU_FAIL("the export reads back with a new warning");
    }
    CU_ASSERT_EQUAL(back.g->uncorrelated_gpu, l->g->uncorrelated_gpu + st.inserted - st.launched);
out:
    free(sid);
    free(fid);
    free(p0);
    rv_run_result_free(r);
    rv_run_result_free(rr);
    rv_whatif_free(w);
    rv_test_unload(&back);
    rv_buf_free(&out);
}

static void test_exports(void)
{
    for (size_t t = 0; t < sizeof(TRACES) / sizeof(TRACES[0]); t++) {
        if ((RV_SANITIZED && t != 1) || !rv_test_have_trace(traces, TRACES[t]))
            continue;
        char path[1024];
        size_t len = 0;
        rv_test_loaded l;
        snprintf(path, sizeof(path), "%s/%s", traces, TRACES[t]);
        unsigned char *orig = read_file(path, &len);
        CU_ASSERT_PTR_NOT_NULL_FATAL(orig);
        CU_ASSERT_EQUAL_FATAL(rv_test_load(NULL, path, &l), 0);
        for (size_t w = 0; w < sizeof(WHATIFS) / sizeof(WHATIFS[0]); w++)
            if (!RV_SANITIZED || sanitized_case(t, w))
                check_case(&l, orig, len, TRACES[t], WHATIFS[w]);
        rv_test_unload(&l);
        free(orig);
    }
    printf("  worst step error %.2f%%, worst headline error %.2f%%\n", 100 * worst_step,
           100 * worst_headline);
}

/* The baseline exported, then exported again from the export: the second
 * reads back at the first's steps (the output round-trips). */
static void test_round_trip(void)
{
    char path[1024];
    size_t len = 0;
    rv_test_loaded a = {0}, b = {0};
    rv_buf x1 = RV_BUF_INIT(RV_KEXPORT_MAX_OUTPUT), x2 = RV_BUF_INIT(RV_KEXPORT_MAX_OUTPUT);
    rv_error err;
    snprintf(path, sizeof(path), "%s/%s", traces, TRACES[1]);
    unsigned char *orig = read_file(path, &len);
    CU_ASSERT_PTR_NOT_NULL_FATAL(orig);
    CU_ASSERT_EQUAL_FATAL(rv_test_load(NULL, path, &a), 0);
    CU_ASSERT_EQUAL_FATAL(rv_kexport_write(orig, len, a.g, a.g, a.s, NULL, NULL, &x1, NULL, &err),
                          0);
    CU_ASSERT_EQUAL_FATAL(rv_kineto_read_buffer(x1.p, x1.len, NULL, &b.tr, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_graph_build(b.tr, NULL, &b.g, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_sim_run(b.g, RV_SCHED_EARLIEST_START, &b.s, &err), 0);
    CU_ASSERT_EQUAL_FATAL(
        rv_kexport_write(x1.p, x1.len, b.g, b.g, b.s, NULL, NULL, &x2, NULL, &err), 0);
    rv_trace *c = NULL;
    rv_graph *cg = NULL;
    CU_ASSERT_EQUAL_FATAL(rv_kineto_read_buffer(x2.p, x2.len, NULL, &c, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_graph_build(c, NULL, &cg, &err), 0);
    CU_ASSERT_EQUAL_FATAL(cg->niters, b.g->niters);
    for (size_t i = 0; i < cg->niters; i++) {
        double s1 = (double)(b.g->iters[i].end_ns - b.g->iters[i].start_ns);
        double s2 = (double)(cg->iters[i].end_ns - cg->iters[i].start_ns);
        CU_ASSERT(fabs(s2 - s1) <= 0.01 * s1);
    }
    /* The export of an export keeps one set of flows and one metadata key. */
    CU_ASSERT_PTR_NOT_NULL(strstr(x2.p, "\"reverieExport\""));
    CU_ASSERT_PTR_NULL(strstr(strstr(x2.p, "\"reverieExport\"") + 1, "\"reverieExport\""));
    /* A file that is not this trace's original is refused. */
    rv_buf x3 = RV_BUF_INIT(RV_KEXPORT_MAX_OUTPUT);
    CU_ASSERT_EQUAL(
        rv_kexport_write("{\"traceEvents\":[]}", 18, a.g, a.g, a.s, NULL, NULL, &x3, NULL, &err),
        RV_ERR_INVALID);
    /* The output cap holds. */
    rv_kexport_opts small = {.max_output = 4096};
    CU_ASSERT_EQUAL(rv_kexport_write(orig, len, a.g, a.g, a.s, NULL, &small, &x3, NULL, &err),
                    RV_ERR_LIMIT);
    rv_buf_free(&x3);
    rv_graph_free(cg);
    rv_trace_free(c);
    rv_buf_free(&x1);
    rv_buf_free(&x2);
    rv_test_unload(&a);
    rv_test_unload(&b);
    free(orig);
}

int main(void)
{
    traces = rv_test_shared_traces("kineto/resnet50-v100-workers0.pt.trace.json.gz");
    if (!traces) {
        printf("skipped: RV_SHARED_TRACES not set or without the public traces\n");
        return 77;
    }
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("kexport", NULL, NULL);
    CU_add_test(s, "exports", test_exports);
    CU_add_test(s, "round_trip", test_round_trip);
    unsigned fails = rv_test_run();
    return fails ? 1 : 0;
}
