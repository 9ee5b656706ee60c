/* Builds the kernel-level dependency graph from a parsed trace.
 *
 * CPU tasks are the runtime/driver API calls; everything else a CPU thread
 * does (framework ops, Python, data loading) is the gap after the call
 * before it. GPU tasks are kernels, copies and sets. See
 * docs/internals/graph.md for the rules and why each exists. The passes
 * that link syncs and waits are in rv_graph_sync.c, the container and
 * lookups in rv_graph_query.c. */
#include "cost/rv_flops.h"
#include "graph/rv_graph.h"
#include "graph/rv_graph_build.h"
#include "graph/rv_layers.h"
#include "util/rv_bg.h"
#include "util/rv_map.h"
#include "util/rv_mem.h"
#include "util/rv_sort.h"
#include "graph/rv_precision.h"
#include "trace/rv_kname.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A CPU thread that sits idle longer than this and resumes right after
 * another thread's task is taken to be waiting for that thread. */
#define HANDOFF_MIN_GAP_NS 20000
/* Defaults when a trace has no sample to measure them from. */
#define DEFAULT_LAUNCH_LAT_NS 5000
#define DEFAULT_GPU_GAP_NS    1000
/* Fewer idle-stream launches than this measure nothing: the default
 * launch latency is assumed (and the answer says so). */
#define MIN_LAUNCH_SAMPLES 5
/* No launch latency or idle gap between kernels lasts a second: a median
 * beyond it comes from a broken clock, and the thresholds built on these
 * constants (a few times each) must stay far from overflow. */
#define MAX_GPU_CONSTANT_NS 1000000000

/* ---- small helpers ------------------------------------------------------ */

static int starts_with(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ---- building ----------------------------------------------------------- */

typedef rv_graph__builder builder;

static int64_t cpu_key(uint32_t pid, uint32_t tid)
{
    return (int64_t)(((uint64_t)pid << 32) | tid) & INT64_MAX;
}

static int64_t gpu_key(int32_t device, int32_t stream)
{
    /* The top bit keeps GPU keys apart from CPU keys. */
    return (int64_t)(0x4000000000000000ULL | ((uint64_t)(uint32_t)device << 31) | (uint32_t)stream);
}

static int parse_int(const char *s, int32_t *out)
{
    char *end;
    while (*s && (*s < '0' || *s > '9') && *s != '-')
        s++; /* "stream 7" -> 7 */
    if (!*s)
        return -1;
    long v = strtol(s, &end, 10);
    if (end == s)
        return -1;
    *out = (int32_t)v;
    return 0;
}

/* The thread (CPU) or stream (GPU) an event runs on, as a map key; a GPU
 * event's device and stream into *dev and *stream. */
static int64_t event_thread_key(const rv_trace *tr, const rv_event *ev, int gpu, int32_t *dev,
                                int32_t *stream)
{
    if (!gpu)
        return cpu_key(ev->pid, ev->tid);
    *dev = ev->device;
    *stream = ev->stream;
    if (*dev < 0 && parse_int(rv_trace_str(tr, ev->pid), dev) != 0)
        *dev = 0;
    if (*stream < 0 && parse_int(rv_trace_str(tr, ev->tid), stream) != 0)
        *stream = 0;
    return gpu_key(*dev, *stream);
}

static int32_t thread_for(builder *b, const rv_event *ev, int gpu)
{
    rv_graph *g = b->g;
    rv_thread th;
    memset(&th, 0, sizeof(th));
    th.first = th.last = -1;
    th.device = th.stream = -1;
    int32_t dev = -1, stream = -1;
    int64_t key = event_thread_key(b->tr, ev, gpu, &dev, &stream);
    th.kind = gpu ? RV_THREAD_GPU : RV_THREAD_CPU;
    th.device = dev;
    th.stream = stream;
    int32_t idx = rv_graph__map_get(&b->thread_keys, key);
    if (idx >= 0)
        return idx;
    th.pid = ev->pid;
    th.tid = ev->tid;
    idx = rv_graph_add_thread(g, &th);
    if (idx >= 0) {
        int rc = rv_map_put(&b->thread_keys, (uint64_t)key, (uint32_t)idx);
        if (rc < 0)
            return rc;
    }
    return idx;
}

static int is_cpu_task_cat(int cat)
{
    return cat == RV_CAT_RUNTIME || cat == RV_CAT_DRIVER;
}

int rv_graph_check_trace(const rv_trace *tr, rv_error *err)
{
    size_t n = 0, ngpu = 0;
    int64_t origin = INT64_MAX, last_end = INT64_MIN;
    rv_map keys;
    int rc = 0;

    rv_map_init(&keys, (size_t)RV_GRAPH_MAX_THREADS + 1);
    for (size_t i = 0; i < tr->nevents && !rc; i++) {
        const rv_event *ev = &tr->events[i];
        int gpu = rv_cat_is_gpu_task(ev->cat);
        int64_t end;
        if (!(gpu || is_cpu_task_cat(ev->cat)) || ev->ts_ns <= 0)
            continue;
        n++;
        ngpu += gpu != 0;
        /* Times the simulator cannot hold: it keeps every time within
         * +-RV_SIM_MAX_NS of the trace's origin, and what-ifs add to them. */
        if (ev->dur_ns < 0 || __builtin_add_overflow(ev->ts_ns, ev->dur_ns, &end) ||
            end > RV_GRAPH_MAX_TIME_NS) {
            rc = rv_error_set(err, RV_ERR_UNSUPPORTED, -1, (int64_t)i,
                              "event %zu has ts %lld ns and dur %lld ns: the simulator takes "
                              "times up to %lld ns",
                              i, (long long)ev->ts_ns, (long long)ev->dur_ns,
                              (long long)RV_GRAPH_MAX_TIME_NS);
            break;
        }
        if (ev->ts_ns < origin)
            origin = ev->ts_ns;
        if (end > last_end)
            last_end = end;
        int32_t dev = -1, stream = -1;
        uint64_t key = (uint64_t)event_thread_key(tr, ev, gpu, &dev, &stream);
        uint32_t v;
        if (rv_map_get(&keys, key, &v))
            continue;
        if (keys.n >= RV_GRAPH_MAX_THREADS)
            rc = rv_error_set(err, RV_ERR_UNSUPPORTED, -1, (int64_t)i,
                              "the trace has more than %d threads and GPU streams, the graph's "
                              "limit",
                              RV_GRAPH_MAX_THREADS);
        else if (rv_map_put(&keys, key, 1) < 0)
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory checking the trace");
    }
    rv_map_free(&keys);
    if (rc)
        return rc;
    if (n > RV_GRAPH_MAX_TASKS)
        return rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1,
                            "the trace has %zu tasks, over the graph's limit of %zu", n,
                            RV_GRAPH_MAX_TASKS);
    if (ngpu > 0 && last_end - origin > RV_GRAPH_MAX_SPAN_NS)
        return rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1,
                            "the trace spans %lld ns (from %lld to %lld), over the %lld ns the "
                            "simulator takes",
                            (long long)(last_end - origin), (long long)origin, (long long)last_end,
                            (long long)RV_GRAPH_MAX_SPAN_NS);
    return 0;
}

/* Sort key for tasks: by thread, then measured start, then input order. */
typedef struct task_order {
    int32_t thread;
    int32_t event;
    int64_t ts;
} task_order;

static int cmp_task_order(const void *a, const void *b)
{
    const task_order *x = a, *y = b;
    if (x->thread != y->thread)
        return x->thread < y->thread ? -1 : 1;
    if (x->ts != y->ts)
        return x->ts < y->ts ? -1 : 1;
    return (x->event > y->event) - (x->event < y->event);
}

/* Sorts by (thread, start, event): a stable counting pass by thread, then
 * a check per thread, since traces list most of a thread's events in time
 * order; only out-of-order threads pay for a comparison sort. *ord may be
 * replaced. */
static int sort_task_order(task_order **ord, size_t n, size_t nthreads)
{
    size_t *start = calloc(nthreads + 1, sizeof(*start));
    /* Zeroed: every slot is written below, but the analyzer cannot tell. */
    task_order *out = calloc(n + 1, sizeof(*out));
    if (!start || !out) {
        free(start);
        free(out);
        return RV_ERR_NOMEM;
    }
    for (size_t i = 0; i < n; i++)
        start[(*ord)[i].thread + 1]++;
    for (size_t t = 1; t <= nthreads; t++)
        start[t] += start[t - 1];
    for (size_t i = 0; i < n; i++)
        out[start[(*ord)[i].thread]++] = (*ord)[i];
    /* start[t] is now the end of thread t's run. */
    size_t a = 0;
    for (size_t t = 0; t < nthreads; t++) {
        size_t b = start[t];
        for (size_t i = a + 1; i < b; i++)
            if (cmp_task_order(&out[i - 1], &out[i]) > 0) {
                qsort(out + a, b - a, sizeof(*out), cmp_task_order);
                break;
            }
        a = b;
    }
    free(start);
    free(*ord);
    *ord = out;
    return 0;
}

/* Creates tasks and threads from the events, sorted by (thread, start). */
static int make_tasks(builder *b)
{
    const rv_trace *tr = b->tr;
    rv_graph *g = b->g;
    size_t n = 0;
    int64_t origin = INT64_MAX, last_end = INT64_MIN;
    for (size_t i = 0; i < tr->nevents; i++) {
        const rv_event *ev = &tr->events[i];
        if (is_cpu_task_cat(ev->cat) || rv_cat_is_gpu_task(ev->cat)) {
            if (ev->ts_ns <= 0)
                continue; /* bogus zero timestamps (kineto#109) */
            n++;
            if (ev->ts_ns < origin)
                origin = ev->ts_ns;
            if (ev->ts_ns + ev->dur_ns > last_end)
                last_end = ev->ts_ns + ev->dur_ns;
        }
    }
    size_t ngpu = 0;
    for (size_t i = 0; i < tr->nevents; i++)
        if (rv_cat_is_gpu_task(tr->events[i].cat) && tr->events[i].ts_ns > 0)
            ngpu++;
    if (ngpu == 0) {
        size_t ncpu = 0, nrt = 0;
        for (size_t i = 0; i < tr->nevents; i++) {
            if (tr->events[i].cat == RV_CAT_CPU_OP || is_cpu_task_cat(tr->events[i].cat))
                ncpu++;
            if (is_cpu_task_cat(tr->events[i].cat))
                nrt++;
        }
        return rv_error_set(b->err, RV_ERR_UNSUPPORTED, -1, -1,
                            "nothing to simulate: the trace has no GPU kernels, memcpy or memset "
                            "events (%zu events kept, %zu CPU ops and API calls): %s",
                            tr->nevents, ncpu,
                            nrt ? "CUDA API calls without GPU activity, as in a "
                                  "counters-only (CUPTI profiler) capture"
                                : (ncpu ? "a CPU-only trace" : "annotations only"));
    }
    if (n > RV_GRAPH_MAX_TASKS)
        return rv_error_set(b->err, RV_ERR_LIMIT, -1, -1, "too many tasks (%zu)", n);
    g->origin_ns = origin;
    g->span_ns = last_end - origin;

    int rc_sort;
    task_order *ord = malloc((n + 1) * sizeof(*ord));
    if (!ord)
        return RV_ERR_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < tr->nevents; i++) {
        const rv_event *ev = &tr->events[i];
        int gpu = rv_cat_is_gpu_task(ev->cat);
        if (!(gpu || is_cpu_task_cat(ev->cat)) || ev->ts_ns <= 0)
            continue;
        int32_t t = thread_for(b, ev, gpu);
        if (t < 0) {
            free(ord);
            return rv_error_set(b->err, t, -1, (int64_t)i, "too many threads/streams");
        }
        ord[k].thread = t;
        ord[k].event = (int32_t)i;
        ord[k].ts = ev->ts_ns;
        k++;
    }
    if ((rc_sort = sort_task_order(&ord, k, g->nthreads)) != 0) {
        free(ord);
        return rc_sort;
    }

    g->tasks = calloc(k ? k : 1, sizeof(rv_task));
    rv_mem_huge(g->tasks, k * sizeof(rv_task));
    if (!g->tasks) {
        free(ord);
        return RV_ERR_NOMEM;
    }
    g->cap_tasks = k ? k : 1;
    g->ntasks = k;
    /* Per distinct kernel name: 0 unknown, 1 collective, 2 not. */
    uint8_t *nccl = calloc(tr->strings.count + 1, 1);
    if (!nccl) {
        free(ord);
        return RV_ERR_NOMEM;
    }
    for (size_t i = 0; i < k; i++) {
        const rv_event *ev = &tr->events[ord[i].event];
        rv_task *t = &g->tasks[i];
        int gpu = rv_cat_is_gpu_task(ev->cat);
        t->kind = gpu ? RV_TASK_GPU : RV_TASK_CPU;
        t->cat = ev->cat;
        t->thread = ord[i].thread;
        t->event = ord[i].event;
        t->launch = -1;
        t->iteration = -1;
        t->name = ev->name;
        t->meas_start_ns = ev->ts_ns - origin;
        t->meas_dur_ns = ev->dur_ns;
        t->dur_ns = ev->dur_ns;
        t->bytes = ev->bytes;
        if (gpu && ev->cat == RV_CAT_KERNEL && ev->name < tr->strings.count && !nccl[ev->name])
            nccl[ev->name] = rv_kname_is_comm(rv_trace_str(tr, ev->name)) ? 1 : 2;
        if (gpu && ev->cat == RV_CAT_KERNEL && ev->name < tr->strings.count &&
            nccl[ev->name] == 1) {
            t->flags |= RV_TF_NCCL;
            t->kind = RV_TASK_COMM;
        }
        rv_thread *th = &g->threads[t->thread];
        if (th->first < 0)
            th->first = (int32_t)i;
        th->last = (int32_t)i;
        th->norig++;
    }
    free(nccl);
    free(ord);
    g->ngpu_tasks = ngpu;
    return 0;
}

static void label_threads(builder *b)
{
    rv_graph *g = b->g;
    /* Labels are interned once, into the trace: the only write a build
     * makes to it, done before the ops' costing starts reading it. */
    rv_strtab *st = (rv_strtab *)&b->tr->strings;
    char buf[160];
    for (size_t i = 0; i < g->nthreads; i++) {
        rv_thread *th = &g->threads[i];
        if (th->kind == RV_THREAD_GPU)
            snprintf(buf, sizeof(buf), "GPU %d stream %d", th->device, th->stream);
        else
            snprintf(buf, sizeof(buf), "CPU %s/%s", rv_strtab_get(st, th->pid),
                     rv_strtab_get(st, th->tid));
        uint32_t id = rv_strtab_intern(st, buf, strlen(buf));
        th->label = id == UINT32_MAX ? 0 : id;
    }
}

/* CPU ops and annotations of one thread, for nesting. */
typedef struct span {
    int64_t start, end;
    uint32_t name;
    uint8_t phase; /* phase this op implies, RV_PHASE_UNKNOWN if none */
    uint8_t is_step;
} span;

static int cmp_span(const void *a, const void *b)
{
    const span *x = a, *y = b;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    /* Longer first so that parents come before their children. */
    return (x->end < y->end) - (x->end > y->end);
}

static int parse_step(const char *name, int64_t *step)
{
    if (!starts_with(name, "ProfilerStep#"))
        return 0;
    *step = strtoll(name + 13, NULL, 10);
    return 1;
}

static uint8_t phase_of_op(const char *n)
{
    if (starts_with(n, "Optimizer.") || strstr(n, "optimizer.step") || strstr(n, "Optimizer#"))
        return RV_PHASE_OPTIMIZER;
    if (strstr(n, "enumerate(DataLoader)") || strstr(n, "DataLoader"))
        return RV_PHASE_DATALOADER;
    if (strstr(n, "Backward") || strstr(n, "backward") || starts_with(n, "autograd::engine"))
        return RV_PHASE_BACKWARD;
    return RV_PHASE_UNKNOWN;
}

static void iter_task_ranges(rv_graph *g)
{
    for (size_t i = 0; i < g->niters; i++) {
        rv_iter *it = &g->iters[i];
        const rv_thread *th = &g->threads[it->thread];
        it->first_task = it->last_task = -1;
        for (int32_t k = th->first; k < th->first + th->norig; k++) {
            int64_t s = g->tasks[k].meas_start_ns;
            if (s >= it->start_ns && s < it->end_ns) {
                if (it->first_task < 0)
                    it->first_task = k;
                it->last_task = k;
            }
        }
    }
}

/* Without ProfilerStep annotations, a step runs from one optimizer
 * annotation to the next of the same name (zero_grad preferred: it opens
 * a step). The last one has no end and is not a step. */
static int find_marker_iterations(builder *b)
{
    static const char *const prefixes[] = {"Optimizer.zero_grad#", "Optimizer.step#"};
    const rv_trace *tr = b->tr;
    rv_graph *g = b->g;
    for (size_t p = 0; p < sizeof(prefixes) / sizeof(prefixes[0]); p++) {
        size_t n = 0;
        for (size_t i = 0; i < tr->nevents; i++) {
            const rv_event *ev = &tr->events[i];
            if ((ev->cat == RV_CAT_CPU_OP || ev->cat == RV_CAT_USER_ANNOTATION) &&
                starts_with(rv_trace_str(tr, ev->name), prefixes[p]) &&
                rv_graph__map_get(&b->thread_keys, cpu_key(ev->pid, ev->tid)) >= 0)
                n++;
        }
        if (n < 3)
            continue;
        int64_t *starts = malloc(n * sizeof(int64_t));
        int32_t *threads = malloc(n * sizeof(int32_t));
        g->iters = calloc(n, sizeof(rv_iter));
        if (!starts || !threads || !g->iters) {
            free(starts);
            free(threads);
            return RV_ERR_NOMEM;
        }
        size_t k = 0;
        for (size_t i = 0; i < tr->nevents; i++) {
            const rv_event *ev = &tr->events[i];
            if (!((ev->cat == RV_CAT_CPU_OP || ev->cat == RV_CAT_USER_ANNOTATION) &&
                  starts_with(rv_trace_str(tr, ev->name), prefixes[p])))
                continue;
            int32_t t = rv_graph__map_get(&b->thread_keys, cpu_key(ev->pid, ev->tid));
            if (t < 0)
                continue;
            starts[k] = ev->ts_ns - g->origin_ns;
            threads[k] = t;
            k++;
        }
        /* Annotations arrive in time order per thread; sort to be sure. */
        for (size_t i = 1; i < k; i++) {
            int64_t x = starts[i];
            int32_t y = threads[i];
            size_t j = i;
            while (j > 0 && starts[j - 1] > x) {
                starts[j] = starts[j - 1];
                threads[j] = threads[j - 1];
                j--;
            }
            starts[j] = x;
            threads[j] = y;
        }
        for (size_t i = 0; i + 1 < k; i++) {
            rv_iter *it = &g->iters[g->niters];
            it->step = (int64_t)g->niters;
            it->start_ns = starts[i];
            it->end_ns = starts[i + 1];
            it->thread = threads[i];
            g->niters++;
        }
        free(starts);
        free(threads);
        iter_task_ranges(g);
        return 0;
    }
    return 0;
}

/* Collects steps from the ProfilerStep annotations. */
static int find_iterations(builder *b)
{
    const rv_trace *tr = b->tr;
    rv_graph *g = b->g;
    size_t n = 0;
    int64_t step;
    for (size_t i = 0; i < tr->nevents; i++) {
        const rv_event *ev = &tr->events[i];
        if ((ev->cat == RV_CAT_CPU_OP || ev->cat == RV_CAT_USER_ANNOTATION) &&
            parse_step(rv_trace_str(tr, ev->name), &step))
            n++;
    }
    if (n == 0)
        return find_marker_iterations(b);
    g->iters = calloc(n, sizeof(rv_iter));
    if (!g->iters)
        return RV_ERR_NOMEM;
    for (size_t i = 0; i < tr->nevents; i++) {
        const rv_event *ev = &tr->events[i];
        if (!((ev->cat == RV_CAT_CPU_OP || ev->cat == RV_CAT_USER_ANNOTATION) &&
              parse_step(rv_trace_str(tr, ev->name), &step)))
            continue;
        int32_t t = rv_graph__map_get(&b->thread_keys, cpu_key(ev->pid, ev->tid));
        if (t < 0)
            continue; /* an annotation on a thread that launched nothing */
        rv_iter *it = &g->iters[g->niters++];
        it->step = step;
        it->start_ns = ev->ts_ns - g->origin_ns;
        it->end_ns = it->start_ns + ev->dur_ns;
        it->thread = t;
        it->first_task = it->last_task = -1;
    }
    /* Sort by start; duplicates of one step number (nested or repeated
     * annotations) keep the first. */
    for (size_t i = 1; i < g->niters; i++) {
        rv_iter x = g->iters[i];
        size_t j = i;
        while (j > 0 && g->iters[j - 1].start_ns > x.start_ns) {
            g->iters[j] = g->iters[j - 1];
            j--;
        }
        g->iters[j] = x;
    }
    size_t w = 0;
    for (size_t i = 0; i < g->niters; i++) {
        if (w > 0 && g->iters[i].start_ns < g->iters[w - 1].end_ns)
            continue;
        g->iters[w++] = g->iters[i];
    }
    g->niters = w;
    iter_task_ranges(g);
    return 0;
}

static int32_t iteration_at(const rv_graph *g, int64_t t)
{
    /* Steps are few; binary search anyway. */
    size_t lo = 0, hi = g->niters;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (g->iters[mid].start_ns <= t)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    const rv_iter *it = &g->iters[lo - 1];
    return t < it->end_ns ? (int32_t)(lo - 1) : -1;
}

/* Walks each CPU thread's ops alongside its tasks: innermost op, layer,
 * phase, and the data-loading share of each gap. */
static int annotate_cpu_threads(builder *b)
{
    const rv_trace *tr = b->tr;
    rv_graph *g = b->g;
    int rc = 0;
    span *spans = NULL;
    size_t nspans = 0, cap = 0;
    span **stack = NULL;
    /* Phase and step tests per distinct name, not per op: names repeat. */
    uint8_t *phase_cache = malloc(tr->strings.count + 1);
    if (!phase_cache)
        return RV_ERR_NOMEM;
    memset(phase_cache, 0xff, tr->strings.count + 1);

    for (size_t ti = 0; ti < g->nthreads; ti++) {
        rv_thread *th = &g->threads[ti];
        if (th->kind != RV_THREAD_CPU || th->norig == 0)
            continue;
        nspans = 0;
        for (size_t i = 0; i < tr->nevents; i++) {
            const rv_event *ev = &tr->events[i];
            if (ev->cat != RV_CAT_CPU_OP && ev->cat != RV_CAT_USER_ANNOTATION)
                continue;
            if (ev->pid != th->pid || ev->tid != th->tid)
                continue;
            if (nspans == cap) {
                if (cap >= RV_TRACE_MAX_EVENTS) { /* one span per event at most */
                    rc = RV_ERR_LIMIT;
                    goto out;
                }
                size_t ncap = cap ? cap * 2 : 1024;
                span *s = realloc(spans, ncap * sizeof(*s));
                if (!s) {
                    rc = RV_ERR_NOMEM;
                    goto out;
                }
                spans = s;
                cap = ncap;
            }
            span *s = &spans[nspans++];
            s->start = ev->ts_ns - g->origin_ns;
            s->end = s->start + ev->dur_ns;
            s->name = ev->name;
            uint8_t c = ev->name < tr->strings.count ? phase_cache[ev->name] : 0xff;
            if (c == 0xff) {
                const char *nm = rv_trace_str(tr, ev->name);
                int64_t step;
                c = (uint8_t)(phase_of_op(nm) | (parse_step(nm, &step) ? 0x80 : 0));
                if (ev->name < tr->strings.count)
                    phase_cache[ev->name] = c;
            }
            s->is_step = (uint8_t)((c & 0x80) != 0);
            s->phase = c & 0x7f;
        }
        /* Ops usually arrive sorted; check before paying for a sort. */
        for (size_t i = 1; i < nspans; i++)
            if (cmp_span(&spans[i - 1], &spans[i]) > 0) {
                qsort(spans, nspans, sizeof(*spans), cmp_span);
                break;
            }
        free(stack);
        stack = malloc((nspans + 1) * sizeof(span *));
        if (!stack) {
            rc = RV_ERR_NOMEM;
            goto out;
        }
        size_t depth = 0, si = 0;
        /* Data-loading intervals (outermost only) for the gap split. */
        size_t dl = 0;
        for (int32_t k = th->first; k < th->first + th->norig; k++) {
            rv_task *t = &g->tasks[k];
            int64_t ts = t->meas_start_ns;
            while (si < nspans && spans[si].start <= ts) {
                while (depth > 0 && stack[depth - 1]->end <= spans[si].start)
                    depth--;
                stack[depth++] = &spans[si++];
            }
            while (depth > 0 && stack[depth - 1]->end <= ts)
                depth--;
            uint8_t phase = RV_PHASE_UNKNOWN;
            int in_step = 0;
            t->op = 0;
            t->layer = 0;
            for (size_t d = 0; d < depth; d++) {
                const span *s = stack[d];
                if (s->end < ts)
                    continue;
                if (s->is_step) {
                    in_step = 1;
                    continue;
                }
                if (!t->layer)
                    t->layer = s->name;
                t->op = s->name;
                if (s->phase != RV_PHASE_UNKNOWN && phase == RV_PHASE_UNKNOWN)
                    phase = s->phase;
            }
            if (phase == RV_PHASE_UNKNOWN && in_step)
                phase = RV_PHASE_FORWARD;
            t->phase = phase;
            t->iteration = iteration_at(g, ts);

            /* Gap: to the next task on this thread. */
            if (k + 1 < th->first + th->norig) {
                const rv_task *nx = &g->tasks[k + 1];
                int64_t gs = ts + t->meas_dur_ns, ge = nx->meas_start_ns;
                t->gap_ns = ge > gs ? ge - gs : 0;
                t->gap_dl_ns = 0;
                if (t->gap_ns > 0) {
                    while (dl < nspans &&
                           (spans[dl].phase != RV_PHASE_DATALOADER || spans[dl].end <= gs))
                        dl++;
                    for (size_t d = dl; d < nspans && spans[d].start < ge; d++) {
                        if (spans[d].phase != RV_PHASE_DATALOADER)
                            continue;
                        int64_t a = spans[d].start > gs ? spans[d].start : gs;
                        int64_t e = spans[d].end < ge ? spans[d].end : ge;
                        if (e > a)
                            t->gap_dl_ns += e - a;
                    }
                    if (t->gap_dl_ns > t->gap_ns)
                        t->gap_dl_ns = t->gap_ns;
                }
            }
        }
        /* A thread whose ops are mostly backward ops is the autograd thread:
         * its unlabeled calls are backward too. */
        size_t nb = 0, nl = 0;
        for (int32_t k = th->first; k < th->first + th->norig; k++) {
            if (g->tasks[k].phase != RV_PHASE_UNKNOWN)
                nl++;
            if (g->tasks[k].phase == RV_PHASE_BACKWARD)
                nb++;
        }
        if (nl > 0 && nb * 2 > nl)
            for (int32_t k = th->first; k < th->first + th->norig; k++)
                if (g->tasks[k].phase == RV_PHASE_UNKNOWN || g->tasks[k].phase == RV_PHASE_FORWARD)
                    g->tasks[k].phase = RV_PHASE_BACKWARD;
    }
out:
    free(spans);
    free(stack);
    free(phase_cache);
    return rc;
}

static int link_launches(builder *b)
{
    rv_graph *g = b->g;
    const rv_trace *tr = b->tr;
    int rc = rv_map_reserve(&b->corr, g->ntasks);
    for (size_t i = 0; i < g->ntasks && rc >= 0; i++) {
        const rv_task *t = &g->tasks[i];
        const rv_event *ev = &tr->events[t->event];
        if (t->kind == RV_TASK_CPU && ev->correlation != RV_NONE)
            rc = rv_map_put(&b->corr, (uint64_t)ev->correlation, (uint32_t)i);
    }
    if (rc < 0)
        return rc;
    b->launch_ts = malloc((g->ntasks + 1) * sizeof(int64_t));
    if (!b->launch_ts)
        return RV_ERR_NOMEM;
    for (size_t i = 0; i < g->ntasks; i++) {
        rv_task *t = &g->tasks[i];
        b->launch_ts[i] = t->meas_start_ns;
        if (t->kind == RV_TASK_CPU)
            continue;
        const rv_event *ev = &tr->events[t->event];
        int32_t l = ev->correlation != RV_NONE ? rv_graph__map_get(&b->corr, ev->correlation) : -1;
        if (l < 0) {
            g->uncorrelated_gpu++;
            t->iteration = iteration_at(g, t->meas_start_ns);
            continue;
        }
        t->launch = l;
        rv_task *lt = &g->tasks[l];
        lt->flags |= RV_TF_LAUNCH;
        t->op = lt->op;
        t->layer = lt->layer;
        t->phase = lt->phase;
        t->iteration = lt->iteration >= 0 ? lt->iteration : iteration_at(g, t->meas_start_ns);
        b->launch_ts[i] = lt->meas_start_ns;
    }
    /* GPU work at the start of a stream with no launch record was queued
     * before profiling began: it counts as launched before every call, so
     * a sync that waited for it is linked to it (GPU-bound time, not CPU
     * work). */
    for (size_t ti = 0; ti < g->nthreads; ti++) {
        const rv_thread *th = &g->threads[ti];
        if (th->kind != RV_THREAD_GPU)
            continue;
        for (int32_t k = th->first; k < th->first + th->norig && g->tasks[k].launch < 0; k++) {
            b->launch_ts[k] = INT64_MIN;
            g->prewindow_gpu++;
            g->prewindow_gpu_ns += g->tasks[k].meas_dur_ns;
        }
    }
    /* Several CPU threads may feed one stream and their calls overlap, so
     * launch times along a stream need not be sorted. A running maximum
     * makes "launched before t" a prefix and never admits a task launched
     * after t, which keeps sync edges pointing forward in time (no cycles). */
    for (size_t ti = 0; ti < g->nthreads; ti++) {
        const rv_thread *th = &g->threads[ti];
        if (th->kind != RV_THREAD_GPU)
            continue;
        for (int32_t k = th->first + 1; k < th->first + th->norig; k++)
            if (b->launch_ts[k] < b->launch_ts[k - 1])
                b->launch_ts[k] = b->launch_ts[k - 1];
    }
    return 0;
}

/* Typical launch latency (kernel start after the call's start, stream idle)
 * and queued gap (between back-to-back tasks on a stream). */
/* The median of v after Tukey's fences (1.5 IQR) drop the outliers.
 * Sorts v. */
static int64_t robust_median(int64_t *v, size_t n, int64_t dflt)
{
    if (n == 0)
        return dflt;
    rv_sort_i64s(v, n);
    int64_t q1 = v[n / 4], q3 = v[(3 * n) / 4], iqr = q3 - q1;
    int64_t lo = q1 - iqr * 3 / 2, hi = q3 + iqr * 3 / 2;
    size_t a = 0, b = n;
    while (a < n && v[a] < lo)
        a++;
    while (b > a && v[b - 1] > hi)
        b--;
    return b > a ? v[a + (b - a) / 2] : v[n / 2];
}

static int measure_gpu_constants(builder *b)
{
    rv_graph *g = b->g;
    int64_t *lat = malloc((g->ntasks + 1) * sizeof(int64_t));
    int64_t *gap = malloc((g->ntasks + 1) * sizeof(int64_t));
    size_t nl = 0, ng = 0;
    if (!lat || !gap) {
        free(lat);
        free(gap);
        return RV_ERR_NOMEM;
    }
    for (size_t ti = 0; ti < g->nthreads; ti++) {
        const rv_thread *th = &g->threads[ti];
        if (th->kind != RV_THREAD_GPU)
            continue;
        for (int32_t k = th->first; k < th->first + th->norig; k++) {
            const rv_task *t = &g->tasks[k];
            int64_t prev_end = k > th->first
                                   ? g->tasks[k - 1].meas_start_ns + g->tasks[k - 1].meas_dur_ns
                                   : INT64_MIN;
            if (t->launch < 0)
                continue;
            int64_t ls = g->tasks[t->launch].meas_start_ns;
            if (prev_end <= ls) {
                if (t->meas_start_ns >= ls)
                    lat[nl++] = t->meas_start_ns - ls;
            } else if (t->meas_start_ns >= prev_end) {
                gap[ng++] = t->meas_start_ns - prev_end;
            }
        }
    }
    /* A handful of idle-stream samples (a CUDA graph replay, a trace cut
     * mid-run) is no measurement: one 7.8 ms sample once became every
     * launch's latency. With too few, the latency is the documented
     * default, or what the samples say when that is less (a stray sample
     * can only make launches look slow); enough samples lose their
     * outliers first. */
    g->launch_lat_samples = nl;
    g->launch_lat_assumed = nl < MIN_LAUNCH_SAMPLES;
    g->launch_lat_ns = robust_median(lat, nl, DEFAULT_LAUNCH_LAT_NS);
    if (g->launch_lat_assumed && g->launch_lat_ns > DEFAULT_LAUNCH_LAT_NS)
        g->launch_lat_ns = DEFAULT_LAUNCH_LAT_NS;
    g->gpu_gap_ns = rv_sort_median_i64(gap, ng, DEFAULT_GPU_GAP_NS);
    /* Above a second is a broken clock, not a launch: capped, and said. */
    g->gpu_constant_capped =
        g->launch_lat_ns > MAX_GPU_CONSTANT_NS || g->gpu_gap_ns > MAX_GPU_CONSTANT_NS;
    if (g->launch_lat_ns > MAX_GPU_CONSTANT_NS)
        g->launch_lat_ns = MAX_GPU_CONSTANT_NS;
    if (g->gpu_gap_ns > MAX_GPU_CONSTANT_NS)
        g->gpu_gap_ns = MAX_GPU_CONSTANT_NS;
    free(lat);
    free(gap);
    return 0;
}

static int add_structural_edges(builder *b)
{
    rv_graph *g = b->g;
    int rc = 0;
    for (size_t ti = 0; ti < g->nthreads && rc == 0; ti++) {
        const rv_thread *th = &g->threads[ti];
        for (int32_t k = th->first + 1; k < th->first + th->norig && rc == 0; k++)
            rc = rv_graph_add_edge(g, k - 1, k, 0, RV_EDGE_THREAD, 0);
        if (th->kind == RV_THREAD_GPU)
            for (int32_t k = th->first; k < th->first + th->norig; k++)
                g->tasks[k].gap_ns = g->gpu_gap_ns;
    }
    /* A call that launched several GPU tasks (a CUDA/HIP graph) keeps the
     * lag the trace shows between the call and its first task: a graph's
     * launch (upload, instantiation, a busy device) takes far longer than
     * one kernel's, and nothing in the graph explains it. */
    int32_t *count = calloc(g->ntasks + 1, sizeof(*count));
    int64_t *first = malloc((g->ntasks + 1) * sizeof(*first));
    if (!count || !first) {
        free(count);
        free(first);
        return RV_ERR_NOMEM;
    }
    for (size_t i = 0; i < g->ntasks; i++)
        first[i] = INT64_MAX;
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->launch < 0)
            continue;
        count[t->launch]++;
        if (t->meas_start_ns >= 0 && t->meas_start_ns < first[t->launch])
            first[t->launch] = t->meas_start_ns;
    }
    for (size_t i = 0; i < g->ntasks && rc == 0; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->launch < 0)
            continue;
        int64_t delay = g->launch_lat_ns;
        const rv_task *l = &g->tasks[t->launch];
        if (count[t->launch] > 1 && first[t->launch] != INT64_MAX && l->meas_start_ns >= 0 &&
            first[t->launch] - l->meas_start_ns > delay)
            delay = first[t->launch] - l->meas_start_ns;
        rc = rv_graph_add_edge(g, t->launch, (int32_t)i, delay, RV_EDGE_LAUNCH, 1);
    }
    free(count);
    free(first);
    return rc;
}

typedef struct cpu_end {
    int64_t end;
    int32_t task;
    int32_t thread;
} cpu_end;

static int cmp_cpu_end(const void *a, const void *b)
{
    const cpu_end *x = a, *y = b;
    if (x->end != y->end)
        return x->end < y->end ? -1 : 1;
    return (x->task > y->task) - (x->task < y->task);
}

/* The ops' FLOPs and bytes, when the trace has shapes. They depend on the
 * trace alone, so they are made on a second thread while the passes build
 * the graph (a fifth of `reverie simulate` on the A100 trace): cost_begin
 * starts it, cost_end joins it and hands the result to the graph. A trace
 * whose ops cannot be costed keeps flops NULL (the metrics say why). */
typedef struct cost_job {
    const rv_trace *trace;
    rv_flops_trace *flops; /* NULL when not costed */
    rv_bg bg;
} cost_job;

static void *cost_run(void *arg)
{
    cost_job *j = arg;
    if (rv_flops_of_trace(j->trace, j->flops) != 0) {
        free(j->flops); /* rv_flops_of_trace freed its arrays */
        j->flops = NULL;
    }
    return NULL;
}

static int cost_begin(cost_job *j, const rv_trace *trace)
{
    memset(j, 0, sizeof(*j));
    if (!trace || trace->nop_shapes == 0)
        return 0;
    j->trace = trace;
    if (!(j->flops = calloc(1, sizeof(*j->flops))))
        return RV_ERR_NOMEM;
    rv_bg_start(&j->bg, cost_run, j);
    return 0;
}

/* Joins the job; with g, g takes its FLOPs, without (a failed build) they
 * are freed. */
static void cost_end(cost_job *j, rv_graph *g)
{
    rv_bg_join(&j->bg);
    if (g && j->flops) {
        g->flops = j->flops;
        g->owns_flops = 1;
    } else if (j->flops) {
        rv_flops_trace_free(j->flops);
        free(j->flops);
    }
    j->flops = NULL;
}
/* A CPU thread idle for a while that resumes right after another thread's
 * call ended is taken to wait for it (the autograd thread handing back to
 * the main thread, and the main thread starting backward). */
static int add_handoff_edges(builder *b)
{
    rv_graph *g = b->g;
    size_t ncpu_threads = 0, n = 0;
    for (size_t ti = 0; ti < g->nthreads; ti++)
        if (g->threads[ti].kind == RV_THREAD_CPU && g->threads[ti].norig > 0)
            ncpu_threads++;
    if (ncpu_threads < 2)
        return 0;
    for (size_t i = 0; i < g->ntasks; i++)
        if (g->tasks[i].kind == RV_TASK_CPU)
            n++;
    cpu_end *ends = malloc((n + 1) * sizeof(*ends));
    if (!ends)
        return RV_ERR_NOMEM;
    size_t k = 0;
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind != RV_TASK_CPU)
            continue;
        ends[k].end = t->meas_start_ns + t->meas_dur_ns;
        ends[k].task = (int32_t)i;
        ends[k].thread = t->thread;
        k++;
    }
    qsort(ends, n, sizeof(*ends), cmp_cpu_end);
    int rc = 0;
    for (size_t ti = 0; ti < g->nthreads && rc == 0; ti++) {
        const rv_thread *th = &g->threads[ti];
        if (th->kind != RV_THREAD_CPU)
            continue;
        for (int32_t x = th->first + 1; x < th->first + th->norig && rc == 0; x++) {
            rv_task *p = &g->tasks[x - 1];
            const rv_task *xt = &g->tasks[x];
            int64_t pend = p->meas_start_ns + p->meas_dur_ns;
            if (xt->meas_start_ns - pend < HANDOFF_MIN_GAP_NS)
                continue;
            /* Latest call on another thread that ended inside the gap. */
            size_t lo = 0, hi = n;
            while (lo < hi) {
                size_t mid = (lo + hi) / 2;
                if (ends[mid].end <= xt->meas_start_ns)
                    lo = mid + 1;
                else
                    hi = mid;
            }
            int32_t y = -1;
            for (size_t j = lo, steps = 0; j > 0 && steps < 256; j--, steps++) {
                const cpu_end *c = &ends[j - 1];
                if (c->end < pend)
                    break;
                if (c->thread != (int32_t)ti) {
                    y = c->task;
                    break;
                }
            }
            if (y < 0)
                continue;
            const rv_task *yt = &g->tasks[y];
            int64_t d = xt->meas_start_ns - (yt->meas_start_ns + yt->meas_dur_ns);
            rc = rv_graph_add_edge(g, y, x, d, RV_EDGE_HANDOFF, 0);
            /* The wait is no longer this thread's own work. */
            if (p->gap_ns > d) {
                int64_t cut = p->gap_ns - d;
                p->gap_dl_ns = p->gap_dl_ns > cut ? p->gap_dl_ns - cut : 0;
                p->gap_ns = d;
            }
        }
    }
    free(ends);
    return rc;
}

int rv_graph_build(const rv_trace *trace, const rv_graph_opts *opts, rv_graph **out, rv_error *err)
{
    (void)opts;
    builder b;
    cost_job cost = {0};
    memset(&b, 0, sizeof(b));
    *out = NULL;
    int rc;
    rv_graph *g = calloc(1, sizeof(*g));
    if (!g)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    g->trace = trace;
    b.tr = trace;
    b.g = g;
    b.err = err;
    rv_map_init(&b.thread_keys, RV_GRAPH_MAX_THREADS);
    rv_map_init(&b.corr, RV_GRAPH_MAX_TASKS);
    if ((rc = make_tasks(&b)) != 0)
        goto out;
    label_threads(&b);
    /* After the labels: they are the build's only writes to the trace (its
     * string table), which the costing reads. */
    if ((rc = cost_begin(&cost, trace)) != 0)
        goto out;
    /* Every task has a thread edge and most GPU tasks a launch edge: reserve
     * once instead of doubling through the build. */
    if ((rc = rv_graph_reserve_edges(g, g->ntasks * 2 + 16)) != 0)
        goto out;
    /* The passes, in order: each needs what the ones before it found. */
    static int (*const passes[])(builder *) = {
        find_iterations,
        annotate_cpu_threads,
        link_launches,
        measure_gpu_constants,
        add_structural_edges,
        rv_graph__link_syncs,
        rv_graph__infer_stream_waits,
        rv_graph__link_blocking_copies,
        rv_graph__link_blocking_calls,
        add_handoff_edges,
    };
    for (size_t i = 0; i < sizeof(passes) / sizeof(passes[0]); i++)
        if ((rc = passes[i](&b)) != 0)
            goto out;
    /* Kernel names are classified, and the ops costed, once here, not on
     * every what-if. */
    if ((rc = rv_graph_classify(g)) != 0)
        goto out;
    cost_end(&cost, g);
    if ((rc = rv_layers_find(g, &g->layers, err)) != 0)
        goto out;
    g->owns_layers = 1;
    *out = g;
    g = NULL;
out:
    cost_end(&cost, NULL); /* joined already unless a pass failed */
    /* make_tasks and the passes may return a bare code. */
    rv_error_ensure(err, rc, "building the dependency graph");
    rv_map_free(&b.thread_keys);
    rv_map_free(&b.corr);
    free(b.launch_ts);
    rv_graph_free(g);
    return rc;
}
