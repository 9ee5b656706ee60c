#include "simulate/rv_pardims.h"

#include <ctype.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "graph/rv_layers.h"
#include "graph/rv_select.h"
#include "util/rv_sort.h"

/* Collective kinds (rv_pardims.h's RV_PDK_*). */
enum {
    K_UNKNOWN = -1,
    K_AR = RV_PDK_ALLREDUCE,
    K_RS = RV_PDK_REDUCE_SCATTER,
    K_AG = RV_PDK_ALLGATHER,
    K_BC = RV_PDK_BROADCAST,
    K_A2A = RV_PDK_ALLTOALL,
    K_P2P = RV_PDK_SENDRECV,
    K_OTHER = RV_PDK_OTHER,
    K_COUNT = RV_PDK_COUNT
};
static const char *const kind_names[K_COUNT] = {
    "all_reduce", "reduce_scatter", "all_gather", "broadcast", "all_to_all", "send_recv", "other"};

/* What the ops around a collective say (MODELS.md E1). */
enum { H_EMB = 1, H_EXP = 2, H_FSDP = 4, H_TP = 8, H_PP = 16, H_CP = 32 };

#define MAX_DEPTH 256
#define MAX_CALLS ((size_t)1 << 22)

static const char *const dim_names[RV_PD_COUNT] = {"data",   "fsdp",      "tensor",  "pipeline",
                                                   "expert", "embedding", "context", "unknown"};

const char *rv_pardim_name(int dim)
{
    return dim >= 0 && dim < RV_PD_COUNT ? dim_names[dim] : "unknown";
}

static void lower(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (; *s && n + 1 < cap; s++)
        out[n++] = (char)tolower((unsigned char)*s);
    out[n] = '\0';
}

static int any(const char *s, const char *const *keys)
{
    for (; *keys; keys++)
        if (strstr(s, *keys))
            return 1;
    return 0;
}

int rv_pardims_is_moe_kernel(const char *name)
{
    char s[256];
    lower(name, s, sizeof(s));
    return strstr(s, "deep_ep::") != NULL || strstr(s, "deepep") != NULL;
}

static unsigned hints_of(const char *name)
{
    static const char *const emb[] = {"all2all_pooled",     "all2all_seq",
                                      "all2all_data",       "sparse_data_dist",
                                      "sparse_arch",        "kjt",
                                      "reducescatterbase_", "reducescatter_req",
                                      "reducescatter_wait", "reducescatterv_",
                                      "allgatherbase_",     "embedding",
                                      "torchrec",           NULL};
    static const char *const exp[] = {"moe", "expert", "deep_ep", "deepep", "token_dispatch", NULL};
    static const char *const fsdp[] = {"fsdp",         "flat_param",    "flatparam",
                                       "unshard",      "reshard",       "pre_forward",
                                       "pre_backward", "post_backward", NULL};
    static const char *const tp[] = {"tensor_parallel",
                                     "tensor_model_parallel",
                                     "row_parallel",
                                     "column_parallel",
                                     "rowparallel",
                                     "columnparallel",
                                     NULL};
    static const char *const pp[] = {
        "pipeline", "send_forward", "recv_forward", "send_backward", "recv_backward", "p2p_comm",
        NULL};
    static const char *const cp[] = {"context_parallel", "ring_attn", "ring_attention", NULL};
    char s[256];
    unsigned h = 0;
    lower(name, s, sizeof(s));
    h |= any(s, emb) ? H_EMB : 0;
    h |= any(s, exp) ? H_EXP : 0;
    h |= any(s, fsdp) ? H_FSDP : 0;
    h |= any(s, tp) ? H_TP : 0;
    h |= any(s, pp) ? H_PP : 0;
    h |= any(s, cp) ? H_CP : 0;
    return h;
}

static int kind_of_text(const char *s)
{
    if (strstr(s, "all_to_all") || strstr(s, "alltoall") || strstr(s, "deep_ep"))
        return K_A2A;
    if (strstr(s, "reduce_scatter") || strstr(s, "reducescatter"))
        return K_RS;
    if (strstr(s, "all_gather") || strstr(s, "allgather"))
        return K_AG;
    if (strstr(s, "all_reduce") || strstr(s, "allreduce"))
        return K_AR;
    if (strstr(s, "broadcast"))
        return K_BC;
    if (strstr(s, "send") || strstr(s, "recv"))
        return K_P2P;
    return K_UNKNOWN;
}

/* The kind of a CPU op that makes a collective call; -2 when the op is no
 * collective (K_UNKNOWN: record_param_comms, whose kind its kernel says). */
static int kind_of_op(const char *name)
{
    char s[160];
    if (strcmp(name, "record_param_comms") == 0)
        return K_UNKNOWN;
    if (strncmp(name, "c10d::", 6) != 0 && strncmp(name, "nccl:", 5) != 0)
        return -2;
    lower(name, s, sizeof(s));
    int k = kind_of_text(s);
    return k == K_UNKNOWN ? K_OTHER : k;
}

static int kind_of_kernel(const char *name)
{
    char s[256];
    lower(name, s, sizeof(s));
    int k = kind_of_text(s);
    return k == K_UNKNOWN ? K_OTHER : k;
}

/* One collective call: a CPU-side collective op and the kernels it
 * launched, or a collective kernel on its own. */
typedef struct call {
    int64_t ts, end; /* measured, absolute */
    uint32_t pid, tid, pg, pg_ranks;
    int32_t layer;  /* layer instance it ran in, -1 none */
    int32_t thread; /* graph CPU thread, -1 unknown */
    int kind;
    unsigned hints;
    int nkernels;    /* in the window */
    int in_window;   /* a kernel ran in the window, or (none) the call did */
    int64_t comm_ns; /* its kernels' time in the window */
    int64_t exposed_ns;
} call;

typedef struct calls {
    call *v;
    size_t n, cap;
} calls;

static call *calls_add(calls *c)
{
    if (c->n == c->cap) {
        if (c->cap >= MAX_CALLS)
            return NULL;
        size_t nc = c->cap ? c->cap * 2 : 64;
        call *p = realloc(c->v, nc * sizeof(*p));
        if (!p)
            return NULL;
        c->v = p;
        c->cap = nc;
    }
    call *x = &c->v[c->n++];
    memset(x, 0, sizeof(*x));
    x->layer = -1;
    x->thread = -1;
    return x;
}

static int cmp_ops(const void *a, const void *b, void *ctx)
{
    const rv_trace *t = ctx;
    const rv_event *x = &t->events[*(const int32_t *)a], *y = &t->events[*(const int32_t *)b];
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->ts_ns != y->ts_ns)
        return x->ts_ns < y->ts_ns ? -1 : 1;
    return (x->dur_ns < y->dur_ns) - (x->dur_ns > y->dur_ns); /* outer first */
}

/* Per string id: hints + 1 and the op kind + 3, worked out once. */
typedef struct name_cache {
    uint8_t *hint, *kind;
    size_t n;
} name_cache;

static void name_info(const rv_trace *t, name_cache *nc, uint32_t id, unsigned *h, int *k)
{
    if (id < nc->n && nc->hint[id]) {
        *h = nc->hint[id] - 1u;
        *k = nc->kind[id] - 3;
        return;
    }
    const char *s = rv_trace_str(t, id);
    *h = hints_of(s);
    *k = kind_of_op(s);
    if (id < nc->n) {
        nc->hint[id] = (uint8_t)(*h + 1);
        nc->kind[id] = (uint8_t)(*k + 3);
    }
}

/* Walks each CPU thread's ops with a stack: the outermost collective op
 * is a call, with the hints of everything around and inside it. */
static int find_calls(const rv_graph *g, calls *out)
{
    const rv_trace *t = g->trace;
    int32_t *ops = NULL;
    size_t nops = 0;
    name_cache nc = {0};
    int rc = 0;
    struct {
        int64_t end;
        unsigned hints;
        int32_t call;
    } st[MAX_DEPTH];
    int depth = 0;

    ops = malloc((t->nevents ? t->nevents : 1) * sizeof(*ops));
    nc.n = t->strings.count;
    nc.hint = calloc(nc.n ? nc.n : 1, 1);
    nc.kind = calloc(nc.n ? nc.n : 1, 1);
    if (!ops || !nc.hint || !nc.kind) {
        rc = RV_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < t->nevents; i++)
        if ((t->events[i].cat == RV_CAT_CPU_OP || t->events[i].cat == RV_CAT_USER_ANNOTATION) &&
            t->events[i].ts_ns > 0)
            ops[nops++] = (int32_t)i;
    qsort_r(ops, nops, sizeof(*ops), cmp_ops, (void *)t);
    for (size_t i = 0; i < nops; i++) {
        const rv_event *e = &t->events[ops[i]];
        if (i > 0 && (e->pid != t->events[ops[i - 1]].pid || e->tid != t->events[ops[i - 1]].tid))
            depth = 0;
        while (depth > 0 && st[depth - 1].end <= e->ts_ns)
            depth--;
        unsigned h;
        int k;
        name_info(t, &nc, e->name, &h, &k);
        h |= depth ? st[depth - 1].hints : 0;
        int32_t in = depth ? st[depth - 1].call : -1;
        if (k != -2 && in < 0) {
            call *c = calls_add(out);
            if (!c) {
                rc = RV_ERR_NOMEM;
                goto out;
            }
            c->ts = e->ts_ns;
            c->end = e->ts_ns + e->dur_ns;
            c->pid = e->pid;
            c->tid = e->tid;
            c->kind = k;
            c->hints = h;
            c->layer = rv_layers_at(g->layers, e->pid, e->tid, e->ts_ns);
            in = (int32_t)(out->n - 1);
        } else if (in >= 0) {
            call *c = &out->v[in];
            c->hints |= h;
            if (c->kind == K_UNKNOWN && k >= 0)
                c->kind = k;
        }
        if (in >= 0 && e->pg && !out->v[in].pg) {
            out->v[in].pg = e->pg;
            out->v[in].pg_ranks = e->pg_ranks;
        }
        if (depth < MAX_DEPTH) {
            st[depth].end = e->ts_ns + e->dur_ns;
            st[depth].hints = h;
            st[depth].call = in;
            depth++;
        }
    }
out:
    free(ops);
    free(nc.hint);
    free(nc.kind);
    return rc;
}

/* The call (of the first n, sorted by thread and start) running at ts on
 * (pid, tid); -1 none. */
static int32_t call_at(const calls *c, size_t n, uint32_t pid, uint32_t tid, int64_t ts)
{
    size_t lo = 0, hi = n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const call *x = &c->v[mid];
        int before = x->pid != pid ? x->pid < pid : x->tid != tid ? x->tid < tid : x->ts <= ts;
        if (before)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0)
        return -1;
    const call *x = &c->v[lo - 1];
    return x->pid == pid && x->tid == tid && ts <= x->end ? (int32_t)(lo - 1) : -1;
}

typedef struct ival {
    int64_t a, b;
} ival;

/* Per string id: 0 not asked yet, 1 no MoE kernel, 2 one; n ids. Task
 * names repeat, so each is lowered and searched once per answer. */
typedef struct moe_memo {
    uint8_t *v;
    size_t n;
} moe_memo;

static int task_is_moe(const rv_graph *g, moe_memo *m, size_t i)
{
    uint32_t id = g->tasks[i].name;
    if (id < m->n && m->v[id])
        return m->v[id] - 1;
    int yes = rv_pardims_is_moe_kernel(rv_task_name(g, i));
    if (id < m->n)
        m->v[id] = (uint8_t)(yes + 1);
    return yes;
}

static int is_comm_task(const rv_graph *g, moe_memo *m, size_t i)
{
    const rv_task *t = &g->tasks[i];
    if (t->kind == RV_TASK_COMM || (t->flags & RV_TF_NCCL))
        return 1;
    return t->kind == RV_TASK_GPU && t->cat == RV_CAT_KERNEL && g->trace && task_is_moe(g, m, i);
}

/* The union of compute (GPU tasks that are no collective) in the window. */
static int compute_union(const rv_graph *g, const rv_sim *s, const rv_window *w,
                         const uint8_t *comm, ival **out, size_t *nout)
{
    size_t n = 0;
    ival *v = malloc((g->ntasks ? g->ntasks : 1) * sizeof(*v));
    if (!v)
        return RV_ERR_NOMEM;
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind != RV_TASK_GPU || comm[i] || s->end_ns[i] <= s->start_ns[i] ||
            s->end_ns[i] <= w->t0_ns || s->start_ns[i] >= w->t1_ns)
            continue;
        v[n++] = (ival){s->start_ns[i], s->end_ns[i]};
    }
    /* Linear (rv_sort); the union does not depend on how ties are ordered. */
    rv_sort_i64(v, n, sizeof(*v), offsetof(ival, a));
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (m && v[i].a <= v[m - 1].b) {
            if (v[i].b > v[m - 1].b)
                v[m - 1].b = v[i].b;
        } else {
            v[m++] = v[i];
        }
    }
    *out = v;
    *nout = m;
    return 0;
}

static int64_t overlap(const ival *u, size_t n, int64_t a, int64_t b)
{
    size_t lo = 0, hi = n;
    int64_t sum = 0;
    while (lo < hi) { /* first interval ending after a */
        size_t mid = lo + (hi - lo) / 2;
        if (u[mid].b <= a)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (size_t i = lo; i < n && u[i].a < b; i++) {
        int64_t x = u[i].a > a ? u[i].a : a, y = u[i].b < b ? u[i].b : b;
        if (y > x)
            sum += y - x;
    }
    return sum;
}

/* Members of "[0, 1, 2]" (the text a group's ranks are kept as). */
static int32_t ranks_in(const char *s)
{
    int32_t n = 0;
    int digit = 0;
    for (; s && *s; s++) {
        int d = *s >= '0' && *s <= '9';
        n += d && !digit;
        digit = d;
    }
    return n;
}

static int dim_of(const call *c, int world)
{
    (void)world;
    unsigned h = c->hints;
    if (h & H_EXP)
        return RV_PD_EXPERT;
    if (h & H_CP)
        return RV_PD_CONTEXT;
    switch (c->kind) {
    case K_A2A: return h & H_EMB ? RV_PD_EMBEDDING : RV_PD_UNKNOWN;
    case K_P2P: return RV_PD_PIPELINE;
    case K_AR:
        if ((h & H_TP) || c->layer >= 0)
            return RV_PD_TENSOR;
        return h & H_EMB ? RV_PD_EMBEDDING : RV_PD_DATA;
    case K_RS:
    case K_AG:
        if (h & H_EMB)
            return RV_PD_EMBEDDING;
        if (h & H_TP)
            return RV_PD_TENSOR;
        return RV_PD_FSDP;
    case K_BC: return RV_PD_DATA;
    default: return RV_PD_UNKNOWN;
    }
}

/* The graph CPU thread of (pid, tid); -1 none. */
static int32_t thread_of(const rv_graph *g, uint32_t pid, uint32_t tid)
{
    for (size_t k = 0; k < g->nthreads; k++)
        if (g->threads[k].kind == RV_THREAD_CPU && g->threads[k].pid == pid &&
            g->threads[k].tid == tid)
            return (int32_t)k;
    return -1;
}

/* One row of the answer: a dimension over one process group. */
typedef struct row {
    int dim;
    uint32_t pg, pg_ranks;
    int inserted;
    double calls, comm_ns, exposed_ns;
    double ops[K_COUNT];
} row;

#define MAX_ROWS 64

static row *row_of(row *rows, size_t *n, int dim, uint32_t pg, int inserted)
{
    for (size_t i = 0; i < *n; i++)
        if (rows[i].dim == dim && rows[i].pg == pg && rows[i].inserted == inserted)
            return &rows[i];
    if (*n >= MAX_ROWS)
        return NULL;
    row *r = &rows[(*n)++];
    memset(r, 0, sizeof(*r));
    r->dim = dim;
    r->pg = pg;
    r->inserted = inserted;
    return r;
}

static int attach_kernels(const rv_graph *g, const rv_sim *s, const rv_window *w,
                          const uint8_t *comm, const ival *u, size_t nu, moe_memo *moe, calls *c)
{
    size_t nsorted = c->n;
    for (size_t i = 0; i < g->ntasks && i < s->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (!comm[i] || t->event < 0 || (t->flags & RV_TF_INSERTED))
            continue;
        int32_t k = -1, a = t->launch;
        if (a >= 0 && g->tasks[a].meas_start_ns >= 0) {
            const rv_thread *th = &g->threads[g->tasks[a].thread];
            k = call_at(c, nsorted, th->pid, th->tid, g->origin_ns + g->tasks[a].meas_start_ns);
        }
        if (k < 0) { /* a collective kernel on its own */
            const rv_event *e = &g->trace->events[t->event];
            call *x = calls_add(c);
            if (!x)
                return RV_ERR_NOMEM;
            const char *name = rv_task_name(g, i);
            x->kind = kind_of_kernel(name);
            x->hints = hints_of(name);
            x->layer = rv_layers_of_task(g->layers, i);
            x->pg = e->pg;
            x->pg_ranks = e->pg_ranks;
            x->ts = x->end = -1;
            k = (int32_t)(c->n - 1);
        }
        call *x = &c->v[k];
        const rv_event *e = &g->trace->events[t->event];
        if (x->kind == K_UNKNOWN || x->kind == K_OTHER)
            x->kind = kind_of_kernel(rv_task_name(g, i));
        if (task_is_moe(g, moe, i))
            x->hints |= H_EXP;
        if (!x->pg && e->pg) {
            x->pg = e->pg;
            x->pg_ranks = e->pg_ranks;
        }
        if (s->start_ns[i] < w->t0_ns || s->start_ns[i] >= w->t1_ns)
            continue;
        int64_t d = s->end_ns[i] - s->start_ns[i];
        x->nkernels++;
        x->in_window = 1;
        x->comm_ns += d;
        x->exposed_ns += d - overlap(u, nu, s->start_ns[i], s->end_ns[i]);
    }
    return 0;
}

static json_t *rows_json(const rv_graph *g, const row *rows, size_t n, double per,
                         const int32_t *degree)
{
    const rv_trace *t = g->trace;
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        const row *r = &rows[i];
        json_t *ops = json_object();
        for (int k = 0; ops && k < K_COUNT; k++)
            if (r->ops[k] > 0)
                json_object_set_new(ops, kind_names[k], json_real(r->ops[k] / per));
        int32_t deg = degree && degree[r->dim] > 0 ? degree[r->dim] : 0;
        if (!deg && r->pg_ranks)
            deg = ranks_in(rv_trace_str(t, r->pg_ranks));
        if (!deg && r->dim != RV_PD_TENSOR && r->dim != RV_PD_PIPELINE && t->world_size > 0)
            deg = t->world_size;
        json_t *o =
            json_pack("{s:s,s:o,s:o,s:f,s:f,s:f,s:o,s:s}", "dim", rv_pardim_name(r->dim), "degree",
                      deg > 0 ? json_integer(deg) : json_null(), "process_group",
                      r->pg ? json_string(rv_trace_str(t, r->pg)) : json_null(), "collectives",
                      r->calls / per, "comm_us", r->comm_ns / per / 1e3, "exposed_comm_us",
                      r->exposed_ns / per / 1e3, "ops", ops ? ops : json_object(), "source",
                      r->inserted ? "what-if"
                      : r->pg     ? "process_group"
                                  : "pattern");
        if (!o || json_array_append_new(a, o) != 0) {
            json_decref(a);
            return NULL;
        }
    }
    return a;
}

struct rv_pardims_calls {
    const rv_trace *trace;
    const void *layers;
    int rc; /* find_calls' */
    calls c;
};

rv_pardims_calls *rv_pardims_calls_new(const rv_graph *g)
{
    rv_pardims_calls *p = calloc(1, sizeof(*p));
    if (!p)
        return NULL;
    p->trace = g->trace;
    p->layers = g->layers;
    p->rc = g->trace ? find_calls(g, &p->c) : RV_ERR_INVALID;
    return p;
}

void rv_pardims_calls_free(rv_pardims_calls *p)
{
    if (!p)
        return;
    free(p->c.v);
    free(p);
}

/* g's calls into *c: a copy of pre's when they are of g's trace and
 * layers (with the capacity find_calls left, so that calls_add grows and
 * stops as it would have), else found now. */
static int calls_of(const rv_graph *g, const rv_pardims_calls *pre, calls *c)
{
    if (!pre || pre->trace != g->trace || pre->layers != g->layers)
        return find_calls(g, c);
    if (pre->rc != 0)
        return pre->rc;
    if (pre->c.cap > 0) {
        if ((c->v = malloc(pre->c.cap * sizeof(*c->v))) == NULL)
            return RV_ERR_NOMEM;
        memcpy(c->v, pre->c.v, pre->c.n * sizeof(*c->v));
    }
    c->n = pre->c.n;
    c->cap = pre->c.cap;
    return 0;
}

/* Whether the report can have a row: a collective call of the trace, a
 * collective kernel (attach_kernels makes a call of one on its own), or
 * a collective a what-if inserted. A single-GPU trace has none. */
/* Whether any row can come out: a collective call, an inserted collective
 * with its dimension, or a traced communication kernel. Asked before the
 * per-task flags are made, which a single-GPU trace never needs. */
static int has_rows(const rv_graph *g, const rv_sim *s, moe_memo *moe, const calls *c)
{
    if (c->n > 0)
        return 1;
    for (size_t i = 0; i < g->ntasks && i < s->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (RV_PARDIM_DIM(t->pardim) ||
            (t->event >= 0 && !(t->flags & RV_TF_INSERTED) && is_comm_task(g, moe, i)))
            return 1;
    }
    return 0;
}

json_t *rv_pardims_json(const rv_graph *g, const rv_sim *s, const rv_window *w,
                        const int32_t *degree)
{
    return rv_pardims_json_pre(g, s, w, degree, NULL);
}

json_t *rv_pardims_json_pre(const rv_graph *g, const rv_sim *s, const rv_window *w,
                            const int32_t *degree, const rv_pardims_calls *pre)
{
    calls c = {0};
    ival *u = NULL;
    size_t nu = 0, nrows = 0;
    uint8_t *comm = calloc(g->ntasks ? g->ntasks : 1, 1);
    moe_memo moe = {NULL, g->trace ? g->trace->strings.count : 0};
    row rows[MAX_ROWS];
    json_t *out = NULL;
    double per = w->per > 0 ? w->per : 1;

    moe.v = calloc(moe.n ? moe.n : 1, 1);
    if (!comm || !moe.v || !g->trace)
        goto done;
    if (calls_of(g, pre, &c) != 0 || !has_rows(g, s, &moe, &c))
        goto done; /* no row: the empty list, without the union of compute */
    for (size_t i = 0; i < g->ntasks; i++)
        comm[i] = (uint8_t)is_comm_task(g, &moe, i);
    if (compute_union(g, s, w, comm, &u, &nu) != 0 ||
        attach_kernels(g, s, w, comm, u, nu, &moe, &c) != 0)
        goto done;
    for (size_t i = 0; i < c.n; i++) {
        call *x = &c.v[i];
        if (!x->nkernels && x->ts >= 0) { /* a call without kernels: by its own time */
            x->thread = thread_of(g, x->pid, x->tid);
            int64_t st =
                x->thread >= 0 ? rv_sim_map_time(g, s, x->thread, x->ts - g->origin_ns) : -1;
            x->in_window = st >= w->t0_ns && st < w->t1_ns;
        }
        /* Barriers and calls whose kind nothing names move no model state. */
        if (!x->in_window || x->kind == K_OTHER || x->kind == K_UNKNOWN)
            continue;
        row *r = row_of(rows, &nrows, dim_of(x, g->trace->world_size), x->pg, 0);
        if (!r)
            continue;
        r->pg_ranks = x->pg_ranks;
        r->calls += 1;
        r->ops[x->kind >= 0 ? x->kind : K_OTHER] += 1;
        r->comm_ns += (double)x->comm_ns;
        r->exposed_ns += (double)x->exposed_ns;
    }
    /* What a what-if inserted, each task one collective. */
    for (size_t i = 0; i < g->ntasks && i < s->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (!RV_PARDIM_DIM(t->pardim) || s->start_ns[i] < w->t0_ns || s->start_ns[i] >= w->t1_ns)
            continue;
        row *r = row_of(rows, &nrows, RV_PARDIM_DIM(t->pardim) - 1, 0, 1);
        if (!r)
            continue;
        int64_t d = s->end_ns[i] - s->start_ns[i];
        r->calls += 1;
        r->ops[RV_PARDIM_KIND(t->pardim)] += 1;
        r->comm_ns += (double)d;
        r->exposed_ns += (double)(d - overlap(u, nu, s->start_ns[i], s->end_ns[i]));
    }
    out = rows_json(g, rows, nrows, per, degree);
done:
    free(comm);
    free(moe.v);
    free(u);
    free(c.v);
    return out ? out : json_array();
}
