/* The graph as a container: adding threads, tasks and edges, copying,
 * freeing, and the lookups on names and kinds that readers of a built
 * graph use. The build passes are in rv_graph.c. See
 * docs/internals/graph.md. */
#include "cost/rv_flops.h"
#include "graph/rv_layers.h"
#include "graph/rv_graph.h"
#include "util/rv_mem.h"

#include <stdlib.h>
#include <string.h>

const char *rv_phase_name(int phase)
{
    static const char *const names[RV_PHASE_COUNT] = {"unknown", "forward", "backward", "optimizer",
                                                      "dataloader"};
    return (phase >= 0 && phase < RV_PHASE_COUNT) ? names[phase] : "unknown";
}

const char *rv_task_kind_name(int kind)
{
    switch (kind) {
    case RV_TASK_CPU: return "cpu";
    case RV_TASK_GPU: return "gpu";
    case RV_TASK_COMM: return "comm";
    case RV_TASK_DATA: return "data";
    default: return "unknown";
    }
}

/* Makes room for need elements; past max RV_ERR_LIMIT even when the
 * room is there (a what-if's limit is on the count). */
static int grow(void **p, size_t *cap, size_t need, size_t elem, size_t max)
{
    if (need > max)
        return RV_ERR_LIMIT;
    if (need <= *cap)
        return 0;
    size_t n = *cap ? *cap : 256;
    while (n < need)
        n *= 2;
    if (n > max)
        n = max;
    void *q = realloc(*p, n * elem);
    if (!q)
        return RV_ERR_NOMEM;
    *p = q;
    rv_mem_huge(q, n * elem);
    *cap = n;
    return 0;
}

/* The caps on g's arrays: the graph's own, or a what-if's lower ones. */
static size_t tasks_cap(const rv_graph *g)
{
    return g->max_tasks && g->max_tasks < RV_GRAPH_MAX_TASKS ? g->max_tasks : RV_GRAPH_MAX_TASKS;
}

static size_t edges_cap(const rv_graph *g)
{
    return g->max_edges && g->max_edges < RV_GRAPH_MAX_EDGES ? g->max_edges : RV_GRAPH_MAX_EDGES;
}

/* A graph whose edges are borrowed (rv_graph_clone_cow) takes its own copy
 * before it changes them. 0 or RV_ERR_NOMEM. */
static int own_edges(rv_graph *g)
{
    if (!g->edges_borrowed)
        return 0;
    size_t cap = g->cap_edges > g->nedges ? g->cap_edges : g->nedges + 1;
    rv_edge *e = malloc(cap * sizeof(rv_edge));
    if (!e)
        return RV_ERR_NOMEM;
    rv_mem_huge(e, cap * sizeof(rv_edge));
    if (g->nedges)
        memcpy(e, g->edges, g->nedges * sizeof(rv_edge));
    g->edges = e;
    g->cap_edges = cap;
    g->edges_borrowed = 0;
    return 0;
}

int rv_graph_add_edge(rv_graph *g, int32_t src, int32_t dst, int64_t delay_ns, int kind,
                      int from_start)
{
    int rc = own_edges(g);
    if (rc)
        return rc;
    rc = grow((void **)&g->edges, &g->cap_edges, g->nedges + 1, sizeof(rv_edge), edges_cap(g));
    if (rc)
        return rc;
    rv_edge *e = &g->edges[g->nedges++];
    memset(e, 0, sizeof(*e));
    e->src = src;
    e->dst = dst;
    e->delay_ns = delay_ns;
    e->kind = (uint8_t)kind;
    e->from_start = (uint8_t)(from_start != 0);
    return 0;
}

int32_t rv_graph_add_thread(rv_graph *g, const rv_thread *th)
{
    int rc = grow((void **)&g->threads, &g->cap_threads, g->nthreads + 1, sizeof(rv_thread),
                  RV_GRAPH_MAX_THREADS);
    if (rc)
        return rc;
    g->threads[g->nthreads] = *th;
    return (int32_t)g->nthreads++;
}

int64_t rv_graph_append_task(rv_graph *g, int32_t t, const rv_task *task)
{
    if (t < 0 || (size_t)t >= g->nthreads)
        return RV_ERR_INVALID;
    int rc = grow((void **)&g->tasks, &g->cap_tasks, g->ntasks + 1, sizeof(rv_task), tasks_cap(g));
    if (rc)
        return rc;
    int32_t idx = (int32_t)g->ntasks++;
    g->tasks[idx] = *task;
    g->tasks[idx].thread = t;
    rv_thread *th = &g->threads[t];
    if (th->last >= 0) {
        rc = rv_graph_add_edge(g, th->last, idx, 0, RV_EDGE_THREAD, 0);
        if (rc) {
            g->ntasks--;
            return rc;
        }
    } else {
        th->first = idx;
    }
    th->last = idx;
    return idx;
}

void rv_graph_remove_task(rv_graph *g, int32_t task)
{
    if (task < 0 || (size_t)task >= g->ntasks)
        return;
    rv_task *t = &g->tasks[task];
    t->flags |= RV_TF_REMOVED;
    t->dur_ns = 0;
    t->gap_ns = 0;
    t->gap_dl_ns = 0;
}

void rv_graph_free(rv_graph *g)
{
    if (!g)
        return;
    free(g->tasks);
    if (!g->edges_borrowed)
        free(g->edges);
    free(g->threads);
    free(g->iters);
    free(g->extra_names);
    if (g->owns_name_info)
        free(g->name_info);
    if (g->owns_flops) {
        rv_flops_trace_free(g->flops);
        free(g->flops);
    }
    if (g->owns_layers)
        rv_layers_free(g->layers);
    free(g);
}

/* The copy of g (borrowed) rv_graph_clone and rv_graph_clone_cow make;
 * with borrow, g's edges are not copied. */
static rv_graph *clone(const rv_graph *g, int borrow)
{
    rv_graph *c = calloc(1, sizeof(*c));
    if (!c)
        return NULL;
    *c = *g;
    c->tasks = NULL;
    c->edges = NULL;
    c->edges_borrowed = 0;
    c->threads = NULL;
    c->iters = NULL;
    c->extra_names = NULL;
    c->owns_name_info = 0; /* shared with g */
    c->owns_flops = 0;
    c->owns_layers = 0;
    c->max_tasks = c->max_edges = 0;
    c->stop = NULL;
    c->tasks = malloc((g->cap_tasks ? g->cap_tasks : 1) * sizeof(rv_task));
    rv_mem_huge(c->tasks, g->cap_tasks * sizeof(rv_task));
    if (borrow) {
        c->edges = g->edges;
        c->edges_borrowed = 1;
    } else {
        c->edges = malloc((g->cap_edges ? g->cap_edges : 1) * sizeof(rv_edge));
        rv_mem_huge(c->edges, g->cap_edges * sizeof(rv_edge));
    }
    c->threads = malloc((g->cap_threads ? g->cap_threads : 1) * sizeof(rv_thread));
    c->iters = malloc((g->niters ? g->niters : 1) * sizeof(rv_iter));
    if (!c->tasks || (!c->edges && !borrow) || !c->threads || !c->iters) {
        rv_graph_free(c);
        return NULL;
    }
    /* memcpy from NULL is undefined even for zero bytes. */
    if (g->ntasks)
        memcpy(c->tasks, g->tasks, g->ntasks * sizeof(rv_task));
    if (g->nedges && !borrow)
        memcpy(c->edges, g->edges, g->nedges * sizeof(rv_edge));
    if (g->nthreads)
        memcpy(c->threads, g->threads, g->nthreads * sizeof(rv_thread));
    if (g->niters)
        memcpy(c->iters, g->iters, g->niters * sizeof(rv_iter));
    return c;
}

rv_graph *rv_graph_clone(const rv_graph *g)
{
    return clone(g, 0);
}

rv_graph *rv_graph_clone_cow(const rv_graph *g)
{
    return clone(g, 1);
}

int rv_graph_reserve_edges(rv_graph *g, size_t n)
{
    int rc = own_edges(g);
    if (rc)
        return rc;
    return grow((void **)&g->edges, &g->cap_edges, n, sizeof(rv_edge), edges_cap(g));
}

int rv_graph_is_sync_call(const char *n)
{
    static const char *const names[] = {
        "cudaDeviceSynchronize",
        "cudaStreamSynchronize",
        "cudaEventSynchronize",
        "cudaMemcpy",
        "cudaMemcpy2D",
        "cudaMemcpyToSymbol",
        "cudaMemcpyFromSymbol",
        "cudaFree",
        "cudaFreeHost",
        "cuCtxSynchronize",
        "cuStreamSynchronize",
        "cuEventSynchronize",
        "hipDeviceSynchronize",
        "hipStreamSynchronize",
        "hipEventSynchronize",
        "hipMemcpy",
        "hipFree",
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(n, names[i]) == 0)
            return 1;
    return strncmp(n, "cuMemcpyDtoH", 12) == 0 && !strstr(n, "Async");
}
