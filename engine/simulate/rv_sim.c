/* Daydream Algorithm 1 with a pluggable schedule. See rv_sim.h. */
#include "simulate/rv_sim.h"
#include "util/rv_mem.h"

#include <stdlib.h>
#include <string.h>

typedef struct heap_item {
    int64_t key1; /* priority (or 0) */
    int64_t key2; /* earliest possible start */
    int32_t task;
} heap_item;

typedef struct heap {
    heap_item *v;
    size_t n, cap;
} heap;

static int item_less(const heap_item *a, const heap_item *b)
{
    if (a->key1 != b->key1)
        return a->key1 < b->key1;
    if (a->key2 != b->key2)
        return a->key2 < b->key2;
    return a->task < b->task;
}

/* The item's fields as scalars: a 24-byte struct passed by value went
 * through the stack on every push, and its reload stalled the store. */
static int heap_push(heap *h, int64_t key1, int64_t key2, int32_t task)
{
    heap_item it = {key1, key2, task};
    if (h->n == h->cap) {
        if (h->cap >= RV_GRAPH_MAX_TASKS) /* one entry per ready task at most */
            return RV_ERR_LIMIT;
        size_t cap = h->cap ? h->cap * 2 : 1024;
        heap_item *v = realloc(h->v, cap * sizeof(*v));
        if (!v)
            return RV_ERR_NOMEM;
        h->v = v;
        h->cap = cap;
    }
    size_t i = h->n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!item_less(&it, &h->v[p]))
            break;
        h->v[i] = h->v[p];
        i = p;
    }
    h->v[i] = it;
    return 0;
}

static heap_item heap_pop(heap *h)
{
    heap_item top = h->v[0];
    heap_item last = h->v[--h->n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const heap_item *best = &last;
        if (l < h->n && item_less(&h->v[l], best)) {
            m = l;
            best = &h->v[l];
        }
        if (r < h->n && item_less(&h->v[r], best))
            m = r;
        if (m == i)
            break;
        h->v[i] = h->v[m];
        i = m;
    }
    if (h->n)
        h->v[i] = last;
    return top;
}

int rv_schedule_parse(const char *s)
{
    if (!s || strcmp(s, "earliest_start") == 0)
        return RV_SCHED_EARLIEST_START;
    if (strcmp(s, "fifo") == 0)
        return RV_SCHED_FIFO;
    if (strcmp(s, "priority") == 0)
        return RV_SCHED_PRIORITY;
    return -1;
}

const char *rv_schedule_name(int policy)
{
    switch (policy) {
    case RV_SCHED_FIFO: return "fifo";
    case RV_SCHED_PRIORITY: return "priority";
    default: return "earliest_start";
    }
}

void rv_sim_free(rv_sim *s)
{
    if (!s)
        return;
    free(s->start_ns);
    free(s->end_ns);
    free(s->binder);
    free(s->arrive_ns);
    free(s);
}

int rv_sim_run(const rv_graph *g, rv_schedule policy, rv_sim **out, rv_error *err)
{
    rv_sim_opts o = {.policy = policy};
    return rv_sim_run_opts(g, &o, out, err);
}

/* The state one simulation carries. */
typedef struct sim_ctx {
    const rv_graph *g;
    rv_sim *s;
    rv_schedule policy;
    const rv_sim_adj *adj;
    int32_t *indeg, *last_on, *fifo;
    int64_t *ready, *progress;
    heap h;
    size_t ftail, done;
    int64_t first, last;
    int over; /* a time passed RV_SIM_MAX_NS */
} sim_ctx;

/* a + b held within +-RV_SIM_MAX_NS; past it *over is set (the run is
 * refused: hostile times must not overflow the clock). */
static int64_t clock_add(int64_t a, int64_t b, int *over)
{
    int64_t r;
    if (__builtin_add_overflow(a, b, &r) || r > RV_SIM_MAX_NS || r < -RV_SIM_MAX_NS) {
        *over = 1;
        return (b > 0 || (b == 0 && a > 0)) ? RV_SIM_MAX_NS : -RV_SIM_MAX_NS;
    }
    return r;
}

/* Starts u at start: its end, its thread's progress, its children. */
static int finish(sim_ctx *c, int32_t u, int64_t start)
{
    const rv_graph *g = c->g;
    rv_sim *s = c->s;
    const rv_task *t = &g->tasks[u];
    int32_t th = t->thread;
    s->start_ns[u] = start;
    s->end_ns[u] = clock_add(start, t->dur_ns, &c->over);
    c->progress[th] = clock_add(s->end_ns[u], t->gap_ns, &c->over);
    c->last_on[th] = u;
    if (start < c->first)
        c->first = start;
    if (s->end_ns[u] > c->last)
        c->last = s->end_ns[u];
    c->done++;
    const rv_sim_out *ed = c->adj->out + c->adj->off[u], *end = c->adj->out + c->adj->off[u + 1];
    for (; ed < end; ed++) {
        int64_t v_at = clock_add(ed->from_start ? start : s->end_ns[u], ed->delay_ns, &c->over);
        if (ed->kind == RV_EDGE_THREAD)
            v_at = clock_add(v_at, t->gap_ns, &c->over);
        int32_t v = ed->dst;
        if (v_at > c->ready[v]) {
            c->ready[v] = v_at;
            s->binder[v] = u;
        }
        if (--c->indeg[v] == 0) {
            if (c->fifo) {
                c->fifo[c->ftail++] = v;
            } else {
                int rc = heap_push(&c->h, c->policy == RV_SCHED_PRIORITY ? g->tasks[v].priority : 0,
                                   c->ready[v], v);
                if (rc != 0)
                    return rc;
            }
        }
    }
    return 0;
}

void rv_sim_adj_free(rv_sim_adj *a)
{
    if (!a)
        return;
    free(a->off);
    free(a->out);
    free(a->indeg);
    free(a);
}

int rv_sim_adj_new(const rv_graph *g, rv_sim_adj **out, rv_error *err)
{
    size_t n = g->ntasks, m = g->nedges;
    rv_sim_adj *a = calloc(1, sizeof(*a));
    int32_t *at = NULL;
    int rc = 0;
    *out = NULL;
    if (!a) {
        rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        return RV_ERR_NOMEM;
    }
    a->edges = g->edges;
    a->nedges = m;
    a->ntasks = n;
    a->off = calloc(n + 2, sizeof(int32_t));
    a->out = malloc((m + 1) * sizeof(rv_sim_out));
    a->indeg = calloc(n + 1, sizeof(int32_t));
    at = malloc((n + 1) * sizeof(int32_t));
    if (!a->off || !a->out || !a->indeg || !at) {
        rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory simulating %zu tasks", n);
        rc = RV_ERR_NOMEM;
        goto out;
    }
    for (size_t e = 0; e < m; e++) {
        const rv_edge *ed = &g->edges[e];
        if (ed->src < 0 || (size_t)ed->src >= n || ed->dst < 0 || (size_t)ed->dst >= n) {
            rv_error_set(err, RV_ERR_INVALID, -1, -1, "edge %zu points outside the graph", e);
            rc = RV_ERR_INVALID;
            goto out;
        }
        a->off[ed->src + 1]++;
        a->indeg[ed->dst]++;
    }
    for (size_t i = 0; i < n; i++) {
        a->off[i + 1] += a->off[i];
        at[i] = a->off[i];
    }
    /* Each task's edges in edge order: the order the simulator always
     * walked them in (a tie in a child's ready time keeps the first). */
    for (size_t e = 0; e < m; e++) {
        const rv_edge *ed = &g->edges[e];
        a->out[at[ed->src]++] = (rv_sim_out){ed->delay_ns, ed->dst, ed->kind, ed->from_start};
    }
    *out = a;
    a = NULL;
out:
    free(at);
    rv_sim_adj_free(a);
    return rc;
}

/* Whether a was built from g's edges as they are. */
static int adj_fits(const rv_sim_adj *a, const rv_graph *g)
{
    return a && a->edges == g->edges && a->nedges == g->nedges && a->ntasks == g->ntasks;
}

/* In-degrees, the roots' ready times and the gangs checked. 0 or
 * RV_ERR_INVALID. */
static int prepare(sim_ctx *c, const int32_t *gang, size_t ngangs, rv_error *err)
{
    const rv_graph *g = c->g;
    size_t n = g->ntasks;
    memcpy(c->indeg, c->adj->indeg, n * sizeof(int32_t));
    for (size_t i = 0; i < n; i++) {
        c->s->binder[i] = -1;
        /* Roots start no earlier than they did: whatever held them back
         * (process start, the profiler's window) is outside the graph.
         * Other tasks are set by their parents. */
        int64_t meas = g->tasks[i].meas_start_ns;
        c->ready[i] = c->indeg[i] ? INT64_MIN : meas > 0 ? meas : 0;
        if (gang && gang[i] >= 0 && (size_t)gang[i] >= ngangs) {
            return rv_error_set(err, RV_ERR_INVALID, -1, -1, "task %zu names gang %d of %zu", i,
                                gang[i], ngangs);
        }
    }
    for (size_t t = 0; t < g->nthreads; t++)
        c->last_on[t] = -1;
    return 0;
}

int rv_sim_run_opts(const rv_graph *g, const rv_sim_opts *o, rv_sim **out, rv_error *err)
{
    rv_schedule policy = o ? (rv_schedule)o->policy : RV_SCHED_EARLIEST_START;
    const rv_stop *stop = o ? o->stop : NULL;
    const int32_t *gang = o && o->gang && o->gang_size ? o->gang : NULL;
    size_t ngangs = gang ? o->ngangs : 0;
    size_t n = g->ntasks, steps = 0;
    int rc = 0;
    rv_sim *s = calloc(1, sizeof(*s));
    sim_ctx c = {.g = g, .s = s, .policy = policy, .first = INT64_MAX, .last = INT64_MIN};
    int32_t *gnext = NULL, *ghead = NULL, *gcount = NULL, *glast = NULL;
    int64_t *gmax = NULL;
    rv_sim_adj *own_adj = NULL;
    *out = NULL;
    if (!s)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    c.adj = o ? o->adj : NULL;
    if (!adj_fits(c.adj, g)) {
        if ((rc = rv_sim_adj_new(g, &own_adj, err)) != 0)
            goto out;
        c.adj = own_adj;
    }
    s->ntasks = n;
    s->start_ns = malloc((n + 1) * sizeof(int64_t));
    s->end_ns = malloc((n + 1) * sizeof(int64_t));
    rv_mem_huge(s->start_ns, (n + 1) * sizeof(int64_t));
    rv_mem_huge(s->end_ns, (n + 1) * sizeof(int64_t));
    s->binder = malloc((n + 1) * sizeof(int32_t));
    c.indeg = malloc((n + 1) * sizeof(int32_t));
    c.ready = malloc((n + 1) * sizeof(int64_t));
    c.progress = calloc(g->nthreads + 1, sizeof(int64_t));
    c.last_on = malloc((g->nthreads + 1) * sizeof(int32_t));
    if (policy == RV_SCHED_FIFO)
        c.fifo = malloc((n + 1) * sizeof(int32_t));
    int gang_nomem = 0;
    if (gang) {
        s->arrive_ns = malloc((n + 1) * sizeof(int64_t));
        gnext = malloc((n + 1) * sizeof(int32_t));
        ghead = malloc((ngangs + 1) * sizeof(int32_t));
        gcount = calloc(ngangs + 1, sizeof(int32_t));
        glast = malloc((ngangs + 1) * sizeof(int32_t));
        gmax = malloc((ngangs + 1) * sizeof(int64_t));
        gang_nomem = !s->arrive_ns || !gnext || !ghead || !gcount || !glast || !gmax;
    }
    if (!s->start_ns || !s->end_ns || !s->binder || !c.indeg || !c.ready || !c.progress ||
        !c.last_on || (policy == RV_SCHED_FIFO && !c.fifo) || gang_nomem) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory simulating %zu tasks", n);
        goto out;
    }
    for (size_t k = 0; k < ngangs; k++)
        ghead[k] = -1;
    if ((rc = prepare(&c, gang, ngangs, err)) != 0)
        goto out;

    size_t fhead = 0;
    for (size_t i = 0; i < n; i++) {
        if (c.indeg[i] != 0)
            continue;
        if (c.fifo) {
            c.fifo[c.ftail++] = (int32_t)i;
        } else {
            if ((rc = heap_push(&c.h, policy == RV_SCHED_PRIORITY ? g->tasks[i].priority : 0,
                                c.ready[i], (int32_t)i)) != 0)
                goto out;
        }
    }
    while (c.fifo ? fhead < c.ftail : c.h.n > 0) {
        int32_t u;
        if (stop && ++steps % RV_STOP_EVERY == 0 && (rc = rv_stop_check(stop, err)) != 0)
            goto out;
        if (c.fifo) {
            u = c.fifo[fhead++];
        } else {
            heap_item it = heap_pop(&c.h);
            u = it.task;
            /* Thread progress may have moved since the item was queued; a
             * stale key goes back with its real start (keys only grow). */
            int32_t th = g->tasks[u].thread;
            int64_t real = c.ready[u] > c.progress[th] ? c.ready[u] : c.progress[th];
            if (policy == RV_SCHED_EARLIEST_START && real > it.key2 && c.last_on[th] >= 0) {
                if ((rc = heap_push(&c.h, it.key1, real, it.task)) != 0)
                    goto out;
                continue;
            }
        }
        int32_t th = g->tasks[u].thread;
        int64_t start = c.ready[u];
        if (c.last_on[th] >= 0 && c.progress[th] > start) {
            start = c.progress[th];
            s->binder[u] = c.last_on[th];
        }
        if (s->arrive_ns)
            s->arrive_ns[u] = start;
        if (gang && gang[u] >= 0) {
            /* A gang member waits for the last one; then all start. */
            int32_t k = gang[u];
            gnext[u] = ghead[k];
            ghead[k] = u;
            if (gcount[k] == 0 || start > gmax[k]) {
                gmax[k] = start;
                glast[k] = u;
            }
            if (++gcount[k] < o->gang_size[k])
                continue;
            for (int32_t m = ghead[k]; m >= 0; m = gnext[m]) {
                if (m != glast[k])
                    s->binder[m] = glast[k];
                if ((rc = finish(&c, m, gmax[k])) != 0)
                    goto out;
            }
            continue;
        }
        if ((rc = finish(&c, u, start)) != 0)
            goto out;
    }
    if (c.done != n) {
        rc = rv_error_set(err, RV_ERR_INVALID, -1, -1,
                          "the dependency graph has a cycle: %zu of %zu tasks never became ready",
                          n - c.done, n);
        goto out;
    }
    if (c.over) {
        rc = rv_error_set(err, RV_ERR_INVALID, -1, -1,
                          "the simulated run passes %.0f years: the trace's times or durations "
                          "(or a what-if's) are out of range",
                          (double)RV_SIM_MAX_NS / 1e9 / 86400 / 365.25);
        goto out;
    }
    s->first_start_ns = n ? c.first : 0;
    s->last_end_ns = n ? c.last : 0;
    s->makespan_ns = n ? c.last - c.first : 0;
    *out = s;
    s = NULL;
out:
    rv_sim_free(s);
    rv_sim_adj_free(own_adj);
    free(c.indeg);
    free(c.ready);
    free(c.progress);
    free(c.last_on);
    free(c.fifo);
    free(c.h.v);
    free(gnext);
    free(ghead);
    free(gcount);
    free(glast);
    free(gmax);
    /* heap_push and finish return bare codes. */
    return rv_error_ensure(err, rc, "simulating the graph");
}

int64_t rv_sim_lerp(int64_t m, int64_t m0, int64_t m1, int64_t a, int64_t b)
{
    if (m1 <= m0)
        return a;
    __int128 d = (__int128)(m - m0) * (b - a) / (m1 - m0);
    return a + (int64_t)d;
}

/* Where original task i's interval starts under map m. */
static int64_t start_of(const rv_sim_map *m, int32_t i)
{
    return m->starts ? m->starts[i] : m->s->start_ns[i];
}

int64_t rv_sim_map_at(const rv_sim_map *m, int32_t thread, int64_t meas)
{
    const rv_graph *g = m->g;
    const rv_sim *s = m->s;
    const rv_thread *th = &g->threads[thread];
    if (th->norig == 0)
        return meas;
    int32_t lo = th->first, hi = th->first + th->norig;
    while (lo < hi) {
        int32_t mid = lo + (hi - lo) / 2;
        if (g->tasks[mid].meas_start_ns <= meas)
            lo = mid + 1;
        else
            hi = mid;
    }
    int32_t p = lo - 1;
    if (p < th->first) {
        const rv_task *f = &g->tasks[th->first];
        int64_t anchor = start_of(m, th->first);
        /* A first call that waits (a sync on work queued before the
         * window) entered its wait at its measured start, not at its
         * simulated start after the wait: nothing earlier on its thread
         * could have moved it. Given starts already say so. */
        if (!m->starts && (f->flags & RV_TF_SYNC) && f->meas_start_ns >= 0 &&
            f->meas_start_ns < anchor)
            anchor = f->meas_start_ns;
        return anchor - (f->meas_start_ns - meas);
    }
    const rv_task *t = &g->tasks[p];
    int64_t meas_end = t->meas_start_ns + t->meas_dur_ns;
    if (meas < meas_end) {
        if (m->stretch)
            return rv_sim_lerp(meas, t->meas_start_ns, meas_end, start_of(m, p), s->end_ns[p]);
        /* Inside the call: a sync call's wait is before its simulated start. */
        int64_t into = meas - t->meas_start_ns - (t->meas_dur_ns - t->dur_ns);
        if (into < 0)
            into = 0;
        return s->start_ns[p] + into;
    }
    int64_t d = meas - meas_end;
    if (m->base) {
        int64_t g0 = m->base->tasks[p].gap_ns, g1 = t->gap_ns;
        if (g0 > 0 && g1 != g0)
            d = (int64_t)((__int128)d * g1 / g0);
    }
    int64_t v = s->end_ns[p] + d;
    if (p + 1 < th->first + th->norig && v > start_of(m, p + 1))
        v = start_of(m, p + 1);
    return v;
}

int64_t rv_sim_map_time(const rv_graph *g, const rv_sim *s, int32_t thread, int64_t meas)
{
    rv_sim_map m = {.g = g, .s = s};
    return rv_sim_map_at(&m, thread, meas);
}

void rv_sim_call_starts(const rv_graph *g, const rv_sim *s, size_t n, int64_t *xs)
{
    const int64_t *st = s->start_ns, *en = s->end_ns;
    for (size_t i = 0; i < n; i++) {
        const rv_task *t = &g->tasks[i];
        xs[i] = st[i];
        if (t->kind != RV_TASK_CPU || !(t->flags & RV_TF_SYNC))
            continue;
        const rv_thread *th = &g->threads[t->thread];
        int32_t k = (int32_t)i;
        xs[i] = k > th->first && k < th->first + th->norig ? en[k - 1] + g->tasks[k - 1].gap_ns
                                                           : INT64_MIN;
    }
    for (size_t e = 0; e < g->nedges; e++) {
        const rv_edge *ed = &g->edges[e];
        if (ed->dst < 0 || (size_t)ed->dst >= n || ed->kind == RV_EDGE_SYNC)
            continue;
        const rv_task *t = &g->tasks[ed->dst];
        if (t->kind != RV_TASK_CPU || !(t->flags & RV_TF_SYNC))
            continue;
        int64_t at = (ed->from_start ? st[ed->src] : en[ed->src]) + ed->delay_ns;
        if (at > xs[ed->dst])
            xs[ed->dst] = at;
    }
    for (size_t i = 0; i < n; i++)
        if (xs[i] > st[i] || xs[i] == INT64_MIN)
            xs[i] = st[i];
}

int64_t rv_sim_iter_ns(const rv_graph *g, const rv_sim *s, size_t i)
{
    const rv_iter *it = &g->iters[i];
    int64_t a = rv_sim_map_time(g, s, it->thread, it->start_ns);
    int64_t b = rv_sim_map_time(g, s, it->thread, it->end_ns);
    return b - a;
}
