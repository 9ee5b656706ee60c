/* Tests for engine/rv_overhead.c: T1..T5 extraction and IQR statistics.
 *
 * The expected figures for hta/critical-path-simple-add.json.gz (HTA test
 * data, MIT; see the shared traces README) were computed independently of
 * the C code, from the raw JSON, by this python3 script (same definitions:
 * ProfilerStep is not an op, a T1 gap while another thread of the process
 * starts ops is no sample, calls that wait for the GPU are taken out) (run as
 * `python3 expected.py $RV_SHARED_TRACES/hta/critical-path-simple-add.json.gz`),
 * whose output is pasted into `expected` below:
 *
 * import json, gzip, math, sys
 * import decimal
 * ev = [e for e in json.load(gzip.open(sys.argv[1]), parse_float=decimal.Decimal)['traceEvents'] if
 * e.get('ph') == 'X'] OPS = {'cpu_op', 'Operator'}; RT = {'cuda_runtime', 'Runtime', 'cuda_driver'}
 * GPU = {'kernel', 'Kernel', 'gpu_memcpy', 'Memcpy', 'gpu_memset', 'Memset'}
 * SYNC = {'cudaDeviceSynchronize', 'cudaStreamSynchronize', 'cudaEventSynchronize', 'cudaMemcpy',
 *         'cudaMemcpy2D', 'cudaMemcpyToSymbol', 'cudaMemcpyFromSymbol', 'cudaFree', 'cudaFreeHost',
 *         'cuCtxSynchronize', 'cuStreamSynchronize', 'cuEventSynchronize', 'hipDeviceSynchronize',
 *         'hipStreamSynchronize', 'hipEventSynchronize', 'hipMemcpy', 'hipFree'}
 * ns = lambda x: int((decimal.Decimal(x) *
 * 1000).to_integral_value(rounding=decimal.ROUND_HALF_EVEN)) corr = {e['args']['correlation'] for e
 * in ev if e.get('cat') in GPU and 'correlation' in e.get('args', {})} ops = [e for e in ev if
 * e.get('cat') in OPS and not e['name'].startswith('ProfilerStep#')] ln = [e for e in ev if
 * e.get('cat') in RT and e.get('args', {}).get('correlation') in corr] thr = lambda e:
 * (str(e['pid']), str(e['tid'])) # Calls that wait for the GPU: syncs and other non-launch calls >=
 * 50 us. waits = [e for e in ev if e.get('cat') in RT and e.get('args', {}).get('correlation') not
 * in corr and (ns(e['dur']) >= 50000 or e['name'] in SYNC)] def wait(th, a, b): t = 0 for w in
 * waits: s = ns(w['ts']) if thr(w) == th and a <= s < b: t += min(s + ns(w['dur']), b) - s return t
 * net = lambda v, w: max(0, v - w)
 * def other_busy(th, a, b):
 *     return any(str(e['pid']) == th[0] and str(e['tid']) != th[1] and a < ns(e['ts']) < b for e in
 * ops) S = []  # (type, name, value_ns) for l in ln: S.append((4, l['name'], ns(l['dur']))) for th
 * in sorted({thr(e) for e in ops}): o = sorted([e for e in ops if thr(e) == th], key=lambda e:
 * (ns(e['ts']), -ns(e['dur']))) L = sorted([e for e in ln if thr(e) == th], key=lambda e:
 * (ns(e['ts']), -ns(e['dur']))) top_end = None for e in o: s, end = ns(e['ts']), ns(e['ts']) +
 * ns(e['dur']) if top_end is not None and s < top_end: continue if top_end is not None and not
 * other_busy(th, top_end, s): S.append((1, e['name'], net(s - top_end, wait(th, top_end, s))))
 *         top_end = end
 *         mine = [l for l in L if s <= ns(l['ts']) <= end]
 *         for a, b in zip(mine, mine[1:]):
 *             f = ns(a['ts']) + ns(a['dur'])
 *             S.append((5, e['name'], net(ns(b['ts']) - f, wait(th, f, ns(b['ts'])))))
 *         if mine:
 *             S.append((2, e['name'], net(ns(mine[0]['ts']) - s, wait(th, s, ns(mine[0]['ts'])))))
 *             f = ns(mine[-1]['ts']) + ns(mine[-1]['dur'])
 *             S.append((3, e['name'], net(end - f, wait(th, f, end))))
 * def q(v, p):
 *     pos = p * (len(v) - 1); lo = math.floor(pos); hi = math.ceil(pos)
 *     return v[lo] + (v[hi] - v[lo]) * (pos - lo)
 * def stats(vals):
 *     v = sorted(x / 1000.0 for x in vals); q1, q3 = q(v, .25), q(v, .75)
 *     k = [x for x in v if q1 - 1.5 * (q3 - q1) <= x <= q3 + 1.5 * (q3 - q1)]
 *     m = sum(k) / len(k)
 *     return len(v), len(k), m, math.sqrt(sum((x - m) ** 2 for x in k) / len(k)), q(k, .5), q(k,
 * .9) print("total samples", len(S)) for t in range(1, 6): vals = [x for (ty, n, x) in S if ty ==
 * t] if not vals: continue print('{%d, NULL, %d, %d, %.9g, %.9g, %.9g, %.9g},' % ((t,) +
 * stats(vals))) names = {} for (ty, n, x) in S: names.setdefault((ty, n), []).append(x) for (ty, n)
 * in sorted(names, key=lambda k: (k[0], -len(names[k]), k[1]))[:]: if len(names[(ty, n)]) >= 5:
 *         print('{%d, "%s", %d, %d, %.9g, %.9g, %.9g, %.9g},' % ((ty, n) + stats(names[(ty, n)])))
 */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader/rv_kineto.h"
#include "graph/rv_overhead.h"
#include "common/rv_test_util.h"

typedef struct expect {
    int type;
    const char *name; /* NULL = the type's overall group */
    size_t samples, count;
    double mean, std, median, p90;
} expect;

/* Output of the script above ({type, name, samples, kept, mean, std,
 * median, p90}, microseconds, 9 significant digits); names with >= 5
 * samples. */
static const expect expected[] = {
    {1, NULL, 146, 128, 32.46875, 24.0941958, 28.5, 64.2},
    {2, NULL, 59, 50, 83.96, 73.6290595, 58, 185.9},
    {3, NULL, 59, 47, 48.5319149, 19.3664011, 41, 74.4},
    {4, NULL, 98, 85, 15.8, 5.84465568, 15, 25.6},
    {5, NULL, 39, 33, 42.3333333, 73.4874414, 11, 136.4},
    {1, "aten::_has_compatible_shallow_copy_type", 32, 29, 10.6551724, 6.42342621, 8, 20},
    {1, "aten::to", 18, 16, 35.75, 12.25, 34, 52.5},
    {1, "aten::detach", 16, 13, 7.53846154, 2.061194, 7, 10},
    {1, "aten::uniform_", 16, 13, 50.3076923, 10.1631659, 46, 62},
    {1, "aten::empty", 15, 14, 74.6428571, 49.6122208, 55.5, 140.9},
    {1, "aten::relu_", 14, 13, 29.3846154, 8.12913527, 29, 38.4},
    {1, "aten::conv2d", 10, 8, 54.625, 21.1479166, 44.5, 86.2},
    {1, "aten::linear", 6, 5, 30.2, 5.97996656, 29, 37.4},
    {1, "aten::max_pool2d", 6, 5, 36.2, 9.13016977, 36, 46.8},
    {2, "aten::to", 16, 13, 57.3076923, 14.567533, 57, 75},
    {2, "aten::relu_", 14, 13, 21.8461538, 5.50309219, 20, 28.8},
    {2, "aten::conv2d", 10, 9, 706.444444, 683.882237, 226, 1517.8},
    {2, "aten::linear", 6, 5, 146.2, 30.9218369, 139, 180.2},
    {2, "aten::max_pool2d", 6, 5, 37.8, 14.2042247, 32, 52.8},
    {3, "aten::to", 16, 13, 51.6153846, 16.2174572, 49, 72.4},
    {3, "aten::relu_", 14, 12, 38.5833333, 5.90844499, 36, 46.7},
    {3, "aten::conv2d", 10, 9, 148.333333, 102.848324, 76, 288.6},
    {3, "aten::linear", 6, 5, 46.8, 13.7898513, 44, 63.4},
    {3, "aten::max_pool2d", 6, 5, 52.4, 21.0009524, 38, 78.8},
    {4, "cudaLaunchKernel", 79, 75, 15.6, 5.95091029, 15, 25.6},
    {4, "cudaMemcpyAsync", 16, 13, 139.307692, 193.495531, 21, 428.6},
    {5, "aten::conv2d", 31, 27, 83.8888889, 128.395031, 13, 283.8},
    {5, "aten::linear", 8, 8, 3, 0.707106781, 3, 4},
};
#define EXPECTED_TOTAL 401

static const char *g_shared;

static int close9(double a, double b)
{
    return fabs(a - b) <= 1e-8 * fmax(1.0, fabs(b));
}

static void test_simple_add(void)
{
    char p[4096];
    rv_trace *t = NULL;
    rv_error e;
    snprintf(p, sizeof(p), "%s/hta/critical-path-simple-add.json.gz", g_shared);
    CU_ASSERT_EQUAL_FATAL(rv_kineto_read_file(p, NULL, &t, &e), 0);
    rv_overhead_samples s;
    CU_ASSERT_EQUAL_FATAL(rv_overhead_extract(t, &s, &e), 0);
    CU_ASSERT_EQUAL(s.n, EXPECTED_TOTAL);
    rv_overhead_group *g = NULL;
    size_t ng = 0;
    CU_ASSERT_EQUAL_FATAL(rv_overhead_summarize(&s, &g, &ng, &e), 0);
    for (size_t i = 0; i < sizeof(expected) / sizeof(expected[0]); i++) {
        const expect *x = &expected[i];
        const rv_overhead_group *f = NULL;
        for (size_t k = 0; k < ng && !f; k++) {
            if (g[k].type != x->type)
                continue;
            if (x->name
                    ? g[k].name != RV_OH_OVERALL && strcmp(rv_trace_str(t, g[k].name), x->name) == 0
                    : g[k].name == RV_OH_OVERALL)
                f = &g[k];
        }
        if (!f) {
            fprintf(stderr, "missing group T%d %s\n", x->type, x->name ? x->name : "*");
            CU_FAIL("group missing");
            continue;
        }
        int ok = f->stat.samples == x->samples && f->stat.count == x->count &&
                 close9(f->stat.mean, x->mean) && close9(f->stat.std, x->std) &&
                 close9(f->stat.median, x->median) && close9(f->stat.p90, x->p90);
        if (!ok)
            fprintf(stderr,
                    "T%d %s: got %zu/%zu mean %.9g std %.9g median %.9g p90 %.9g, want "
                    "%zu/%zu %.9g %.9g %.9g %.9g\n",
                    x->type, x->name ? x->name : "*", f->stat.samples, f->stat.count, f->stat.mean,
                    f->stat.std, f->stat.median, f->stat.p90, x->samples, x->count, x->mean, x->std,
                    x->median, x->p90);
        CU_ASSERT(ok);
    }
    free(g);
    rv_overhead_samples_free(&s);
    rv_trace_free(t);
}

/* Statistics on hand-made values: the IQR fence and the interpolation. */
static void test_stats_small(void)
{
    /* Q1 = 2, Q3 = 4 (positions 1 and 3 of 0..4 over n = 5... here n = 6):
     * v = 1 2 3 4 5 100: Q1 at 1.25 -> 2.25, Q3 at 3.75 -> 4.75, IQR 2.5,
     * fence [-1.5, 8.5]: 100 is dropped; kept 1..5: mean 3, pop. std
     * sqrt(2), median 3, p90 at 3.6 -> 4.6. */
    double v[] = {100, 3, 1, 5, 2, 4};
    rv_overhead_stat st;
    rv_overhead_stats(v, 6, &st);
    CU_ASSERT_EQUAL(st.samples, 6);
    CU_ASSERT_EQUAL(st.count, 5);
    CU_ASSERT_DOUBLE_EQUAL(st.mean, 3.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(st.std, sqrt(2.0), 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(st.median, 3.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(st.p90, 4.6, 1e-12);
    double one[] = {7};
    rv_overhead_stats(one, 1, &st);
    CU_ASSERT_EQUAL(st.count, 1);
    CU_ASSERT_DOUBLE_EQUAL(st.p90, 7.0, 0);
    rv_overhead_stats(NULL, 0, &st);
    CU_ASSERT_EQUAL(st.count, 0);
}

/* A hand-built thread: op A [0,100] with launches at 10 (dur 5) and 30
 * (dur 5) and a nested op; op B [150,200] with no launch; GPU kernels
 * carry the launches' correlations. Expect T1 = 50 (before B), T2 = 10,
 * T3 = 100 - 35 = 65, T4 = 5, 5, T5 = 30 - 15 = 15. */
static void test_hand_built(void)
{
    rv_trace *t = rv_trace_new();
    uint32_t A = rv_strtab_intern(&t->strings, "A", 1), B = rv_strtab_intern(&t->strings, "B", 1);
    uint32_t child = rv_strtab_intern(&t->strings, "child", 5);
    uint32_t L = rv_strtab_intern(&t->strings, "cudaLaunchKernel", 16);
    uint32_t th = rv_strtab_intern(&t->strings, "1", 1);
    struct {
        int cat;
        uint32_t name;
        int64_t ts, dur, corr;
    } evs[] = {
        {RV_CAT_CPU_OP, B, 150000, 50000, RV_NONE},
        {RV_CAT_CPU_OP, A, 0, 100000, RV_NONE},
        {RV_CAT_CPU_OP, child, 5000, 40000, RV_NONE},
        {RV_CAT_RUNTIME, L, 10000, 5000, 1},
        {RV_CAT_RUNTIME, L, 30000, 5000, 2},
        {RV_CAT_RUNTIME, L, 160000, 5000, 99}, /* no kernel: not a launch */
        {RV_CAT_KERNEL, L, 40000, 1000, 1},
        {RV_CAT_KERNEL, L, 50000, 1000, 2},
    };
    for (size_t i = 0; i < sizeof(evs) / sizeof(evs[0]); i++) {
        rv_event ev;
        rv_event_init(&ev);
        ev.cat = (uint8_t)evs[i].cat;
        ev.name = evs[i].name;
        ev.ts_ns = evs[i].ts;
        ev.dur_ns = evs[i].dur;
        ev.correlation = evs[i].corr;
        ev.pid = ev.tid = rv_cat_is_gpu_task(ev.cat) ? 0 : th;
        rv_trace_push(t, &ev);
    }
    rv_overhead_samples s;
    rv_error e;
    CU_ASSERT_EQUAL_FATAL(rv_overhead_extract(t, &s, &e), 0);
    int64_t want[6] = {0, 50000, 10000, 65000, 5000, 15000};
    size_t per[6] = {0};
    for (size_t i = 0; i < s.n; i++) {
        per[s.v[i].type]++;
        CU_ASSERT_EQUAL(s.v[i].value_ns, want[s.v[i].type]);
        if (s.v[i].type == RV_OH_T4)
            CU_ASSERT_EQUAL(s.v[i].name, L);
        if (s.v[i].type == RV_OH_T1)
            CU_ASSERT_EQUAL(s.v[i].name, B);
        if (s.v[i].type == RV_OH_T2 || s.v[i].type == RV_OH_T3 || s.v[i].type == RV_OH_T5)
            CU_ASSERT_EQUAL(s.v[i].name, A);
    }
    CU_ASSERT_EQUAL(per[1], 1);
    CU_ASSERT_EQUAL(per[2], 1);
    CU_ASSERT_EQUAL(per[3], 1);
    CU_ASSERT_EQUAL(per[4], 2);
    CU_ASSERT_EQUAL(per[5], 1);
    rv_overhead_samples_free(&s);
    rv_trace_free(t);
}

int main(void)
{
    g_shared = rv_test_shared_traces("hta/critical-path-simple-add.json.gz");
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("overhead", NULL, NULL);
    CU_add_test(s, "stats on small sets", test_stats_small);
    CU_add_test(s, "hand-built thread", test_hand_built);
    if (g_shared)
        CU_add_test(s, "simple-add vs python", test_simple_add);
    unsigned fails = rv_test_run();
    if (!fails && !g_shared) {
        printf("skipped: simple-add trace not found under RV_SHARED_TRACES; local checks "
               "passed\n");
        return 77;
    }
    return fails ? 1 : 0;
}
