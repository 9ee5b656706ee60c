/* An execution trace alone as a trace the pipeline reads.
 *
 * With no Kineto trace of the run, nothing was measured: the ET gives the
 * ops, their threads, nesting and shapes, and everything timed comes from
 * stated defaults and the kernel models. CPU ops take a fixed time each
 * (the shared ETs record no durations), in ET order (node ids are given as
 * ops start); the innermost op touching a GPU tensor launches one kernel
 * whose time is the roofline of its FLOPs and bytes (rv_flops) on the
 * chosen GPU at a default efficiency; nccl ops go to a comm stream; copies
 * between host and device become memcpys (a copy to the host waits for
 * it). The result carries source_format "et", which rv_run answers with
 * the warning et_only_modelled. See docs/models/et.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "reader/rv_et.h"
#include "cost/rv_flops.h"
#include "hw/rv_hw.h"
#include "cost/rv_kmodel.h"
#include "util/rv_map.h"
#include "util/rv_sort.h"

#define STREAM_COMPUTE 7
#define STREAM_COMM    20
#define MS             1000 /* ns per us */

enum { K_NONE = 0, K_KERNEL, K_COMM, K_H2D, K_D2H };

typedef struct ctx {
    const rv_et *et;
    const rv_hw *hw;
    rv_trace *t;
    int32_t *first, *next; /* children lists, in id order */
    int32_t *event;        /* node -> op event; -1 not placed */
    int32_t *cur;          /* DFS: the next child to visit */
    int32_t *stack;
    int32_t *roots;
    size_t nroots;
    uint8_t *kind, *sub; /* K_* of the node; a descendant launches */
    int any_device;      /* some tensor names its device */
    uint32_t pid, s_launch, s_memcpy_async, s_memcpy, s_stream, s_comm_stream, s_gpu_pid;
    int64_t cursor, free_compute, free_comm;
    int64_t corr;
    rv_et_alone *info;
    const rv_kmodel *eff; /* fitted efficiencies; NULL: RV_ET_EFFICIENCY */
} ctx;

static int starts(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static int is_bookkeeping(const char *n)
{
    return starts(n, "[pytorch|profiler|execution_");
}

static int is_annotation(const char *n)
{
    return starts(n, "##") || starts(n, "[") || starts(n, "ProfilerStep#") ||
           starts(n, "Optimizer.");
}

/* Ops that allocate, view or ask about tensors: no kernel of their own. */
static int launches_nothing(const char *n)
{
    static const char *const names[] = {
        "empty",
        "empty_strided",
        "empty_like",
        "new_empty",
        "new_empty_strided",
        "view",
        "_unsafe_view",
        "view_as",
        "as_strided",
        "slice",
        "narrow",
        "select",
        "t",
        "transpose",
        "permute",
        "reshape",
        "_reshape_alias",
        "expand",
        "expand_as",
        "squeeze",
        "unsqueeze",
        "flatten",
        "unflatten",
        "split",
        "split_with_sizes",
        "chunk",
        "unbind",
        "detach",
        "detach_",
        "alias",
        "lift",
        "lift_fresh",
        "result_type",
        "is_same_size",
        "size",
        "stride",
        "numel",
        "dim",
        "contiguous",
        "to",
        "_to_copy",
        "resize_",
        "set_",
        "record_stream",
        "item",
        "is_nonzero",
        "diagonal",
        "broadcast_tensors",
        "_has_compatible_shallow_copy_type",
        "clone",
        "type_as",
        "zeros_like",
        "ones_like",
        "unfold",
        "movedim",
        "swapaxes",
        "real",
        "values",
        "indices",
        "_values",
        "_indices",
        "_nested_tensor_from_mask_left_aligned",
    };
    if (starts(n, "aten::"))
        n += 6;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
        if (strcmp(n, names[i]) == 0)
            return 1;
    return 0;
}

static int arg_dev(const rv_et *et, const rv_et_node *n, uint32_t a)
{
    return a < n->n_in + n->n_out ? et->args[n->args_off + a].device : RV_ET_DEV_UNKNOWN;
}

/* What node i launches by itself (its children aside). */
static int own_kind(const ctx *c, size_t i)
{
    const rv_et *et = c->et;
    const rv_et_node *n = &et->nodes[i];
    const char *name = rv_et_str(et, n->name);
    if (is_bookkeeping(name) || is_annotation(name))
        return K_NONE;
    if (starts(name, "nccl:"))
        return K_COMM;
    if (launches_nothing(name))
        return K_NONE;
    if (!c->any_device) /* no device in the ET: by name only */
        return strstr(name, "cuda") || strstr(name, "cudnn") ? K_KERNEL : K_NONE;
    const char *op = starts(name, "aten::") ? name + 6 : name;
    if (strcmp(op, "copy_") == 0 && n->n_in >= 2) {
        int dst = arg_dev(et, n, 0), src = arg_dev(et, n, 1);
        if (dst == RV_ET_DEV_GPU && src == RV_ET_DEV_CPU)
            return K_H2D;
        if (dst == RV_ET_DEV_CPU && src == RV_ET_DEV_GPU)
            return K_D2H;
    }
    if (strcmp(op, "_local_scalar_dense") == 0)
        return arg_dev(et, n, 0) == RV_ET_DEV_GPU ? K_D2H : K_NONE;
    for (uint32_t a = 0; a < n->n_in + n->n_out; a++)
        if (arg_dev(et, n, a) == RV_ET_DEV_GPU)
            return K_KERNEL;
    return K_NONE;
}

/* Bytes of the node's tensors on the GPU (a copy: all its tensors). An
 * embedding lookup reads only the rows it gathers, which the ET does not
 * give: a table (an input over RV_ET_TABLE_RATIO times the outputs) counts
 * RV_ET_LOOKUP_ROWS times the output bytes. */
static double tensor_bytes(const rv_et *et, const rv_et_node *n, int any_dev)
{
    double b = 0, out = 0;
    int embed = strstr(rv_et_str(et, n->name), "embedding") != NULL;
    for (uint32_t a = n->n_in; a < n->n_in + n->n_out; a++) {
        const rv_et_arg *g = &et->args[n->args_off + a];
        if (g->numel > 0 && g->itemsize > 0)
            out += (double)g->numel * g->itemsize;
    }
    for (uint32_t a = 0; a < n->n_in + n->n_out; a++) {
        const rv_et_arg *g = &et->args[n->args_off + a];
        if (g->numel <= 0 || g->itemsize <= 0 || (!any_dev && g->device != RV_ET_DEV_GPU))
            continue;
        double x = (double)g->numel * g->itemsize;
        if (embed && a < n->n_in && out > 0 && x > RV_ET_TABLE_RATIO * out)
            x = RV_ET_LOOKUP_ROWS * out;
        b += x;
    }
    return b;
}

static int intern(rv_trace *t, const char *s, uint32_t *id)
{
    *id = rv_strtab_intern(&t->strings, s, strlen(s));
    return *id == UINT32_MAX ? RV_ERR_NOMEM : 0;
}

static int push(ctx *c, uint8_t cat, uint32_t name, uint32_t pid, uint32_t tid, int64_t ts,
                int64_t dur, int64_t *idx)
{
    rv_event e;
    rv_event_init(&e);
    e.cat = cat;
    e.name = name;
    e.pid = pid;
    e.tid = tid;
    e.ts_ns = ts;
    e.dur_ns = dur;
    int64_t r = rv_trace_push(c->t, &e);
    if (r < 0)
        return (int)r;
    if (idx)
        *idx = r;
    return 0;
}

static uint32_t tid_of(ctx *c, const rv_et_node *n)
{
    char b[32];
    snprintf(b, sizeof(b), "%lld", (long long)(n->tid == RV_NONE ? 0 : n->tid));
    return rv_strtab_intern(&c->t->strings, b, strlen(b));
}

/* Pass 1, entering node i: its op event. */
static int place_op(ctx *c, int32_t i)
{
    const rv_et_node *n = &c->et->nodes[i];
    const char *name = rv_et_str(c->et, n->name);
    uint32_t nid, tid = tid_of(c, n);
    int64_t idx = 0;
    int rc;
    if (tid == UINT32_MAX || intern(c->t, name, &nid) < 0)
        return RV_ERR_NOMEM;
    if ((rc = push(c, is_annotation(name) ? RV_CAT_USER_ANNOTATION : RV_CAT_CPU_OP, nid, c->pid,
                   tid, 0, 0, &idx)) < 0)
        return rc;
    c->event[i] = (int32_t)idx;
    c->info->ops++;
    return 0;
}

/* Pass 1, leaving node i: only the innermost op touching the GPU launches. */
static void classify(ctx *c, int32_t i)
{
    int sub = 0;
    for (int32_t ch = c->first[i]; ch >= 0; ch = c->next[ch])
        sub |= c->kind[ch] != K_NONE || c->sub[ch];
    int k = own_kind(c, (size_t)i);
    c->sub[i] = (uint8_t)sub;
    /* A collective launches before the copies under it unpack its result. */
    c->kind[i] = (uint8_t)(k == K_COMM || !sub ? k : K_NONE);
}

/* Seconds of node i's GPU work of kind k on the GPU. */
static double gpu_seconds(ctx *c, int32_t i, int k)
{
    const rv_et_node *n = &c->et->nodes[i];
    const rv_hw *hw = c->hw;
    double bytes = tensor_bytes(c->et, n, k != K_KERNEL && k != K_COMM), s;
    if (k == K_H2D || k == K_D2H) {
        double bw = (hw->pcie_gbps > 0 ? hw->pcie_gbps : 12) * 1e9;
        s = bytes / bw;
        return s > RV_ET_MIN_KERNEL_US * 1e-6 ? s : RV_ET_MIN_KERNEL_US * 1e-6;
    }
    if (k == K_COMM) {
        double bw = (hw->nvlink_gbps > 0 ? hw->nvlink_gbps / 2 : hw->pcie_gbps) * 1e9;
        return RV_ET_COMM_LATENCY_US * 1e-6 + (bw > 0 ? bytes / bw : 0);
    }
    rv_op_cost oc = {0};
    double flops = 0;
    int cls = RV_FC_ELEMWISE, ptype = 0;
    if (rv_flops_op(c->t, c->event[i], &oc)) {
        flops = oc.flops;
        if (oc.bytes > 0)
            bytes = oc.bytes;
        cls = oc.cls;
        ptype = oc.ptype;
        c->info->costed++;
    }
    /* A fitted efficiency is against the roofline the fit used (fp32
     * GEMMs as TF32 where the GPU has it): it says which one ran. */
    double e = 0;
    if (c->eff && flops + bytes > 0 && cls > RV_FC_NONE && cls < RV_FC_COUNT)
        e = rv_kmodel_near_eff(c->eff, cls, flops, bytes, RV_ET_FIT_REACH);
    if (e > 0) {
        s = rv_kmodel_roofline_s(hw, rv_kmodel_dtype(hw, ptype, cls, 1), flops, bytes) / e;
        c->info->fitted++;
    } else {
        /* fp32 convolutions as TF32 where the GPU has it (cuDNN's default),
         * as the `gpu` what-if assumes; fp32 matmuls stay fp32. */
        int tf32 = rv_kmodel_tf32_default(cls, 0);
        s = rv_kmodel_roofline_s(hw, rv_kmodel_dtype(hw, ptype, cls, tf32), flops, bytes) /
            RV_ET_EFFICIENCY;
    }
    return s > RV_ET_MIN_KERNEL_US * 1e-6 ? s : RV_ET_MIN_KERNEL_US * 1e-6;
}

/* Pass 2: node i's launch and GPU task at the cursor. */
static int place_gpu(ctx *c, int32_t i)
{
    const rv_et_node *n = &c->et->nodes[i];
    int k = c->kind[i], rc;
    int64_t launch = (int64_t)((c->hw->launch_us > 0 ? c->hw->launch_us : 5) * MS);
    uint32_t tid = c->t->events[c->event[i]].tid, gname;
    /* Capped at 1000 s so that hostile sizes cannot overflow the clock. */
    double sec = gpu_seconds(c, i, k);
    int64_t d = (int64_t)((sec < 1000 ? sec : 1000) * 1e9), rt_idx = 0, g_idx = 0;
    int64_t *free_at = k == K_COMM ? &c->free_comm : &c->free_compute;
    int64_t rt_end = c->cursor + launch;
    int64_t start = rt_end > *free_at ? rt_end : *free_at;
    char nb[256];
    if (k == K_COMM)
        snprintf(nb, sizeof(nb), "ncclDevKernel_%s", rv_et_str(c->et, n->name) + 5);
    else if (k == K_H2D)
        snprintf(nb, sizeof(nb), "Memcpy HtoD (Pageable -> Device)");
    else if (k == K_D2H)
        snprintf(nb, sizeof(nb), "Memcpy DtoH (Device -> Pageable)");
    else
        snprintf(nb, sizeof(nb), "%s", rv_et_str(c->et, n->name));
    if ((rc = intern(c->t, nb, &gname)) < 0)
        return rc;
    /* A copy to the host blocks its thread until the copy is done. */
    if (k == K_D2H)
        rt_end = start + d;
    uint32_t rt = k == K_H2D ? c->s_memcpy_async : k == K_D2H ? c->s_memcpy : c->s_launch;
    if ((rc = push(c, RV_CAT_RUNTIME, rt, c->pid, tid, c->cursor, rt_end - c->cursor, &rt_idx)) <
            0 ||
        (rc = push(c, k == K_H2D || k == K_D2H ? RV_CAT_MEMCPY : RV_CAT_KERNEL, gname, c->s_gpu_pid,
                   k == K_COMM ? c->s_comm_stream : c->s_stream, start, d, &g_idx)) < 0)
        return rc;
    rv_event *r = &c->t->events[rt_idx], *g = &c->t->events[g_idx];
    r->correlation = g->correlation = ++c->corr;
    g->device = 0;
    g->stream = k == K_COMM ? STREAM_COMM : STREAM_COMPUTE;
    if (k == K_H2D || k == K_D2H) {
        double b = tensor_bytes(c->et, n, 1);
        g->bytes = b < 9e18 ? (int64_t)b : INT64_MAX;
    }
    *free_at = start + d;
    c->cursor = rt_end;
    c->info->kernels += k == K_KERNEL;
    c->info->collectives += k == K_COMM;
    c->info->copies += k == K_H2D || k == K_D2H;
    return 0;
}

/* Walks the op forest depth first, children in id order; pass 1 places
 * the ops and classifies them, pass 2 times them. */
static int walk(ctx *c, int pass)
{
    int rc = 0;
    for (size_t r = 0; r < c->nroots && rc == 0; r++) {
        size_t sp = 0;
        c->stack[sp++] = c->roots[r];
        c->cur[c->roots[r]] = c->first[c->roots[r]];
        int entering = 1;
        while (sp > 0 && rc == 0) {
            int32_t i = c->stack[sp - 1];
            if (entering) {
                if (pass == 1) {
                    rc = place_op(c, i);
                } else {
                    rv_event *e = &c->t->events[c->event[i]];
                    e->ts_ns = c->cursor;
                    if (e->cat == RV_CAT_CPU_OP)
                        c->cursor += (int64_t)(RV_ET_OP_US * MS);
                    if (c->kind[i] == K_COMM)
                        rc = place_gpu(c, i);
                }
                entering = 0;
                continue;
            }
            int32_t ch = c->cur[i];
            if (ch >= 0) {
                c->cur[i] = c->next[ch];
                c->cur[ch] = c->first[ch];
                c->stack[sp++] = ch;
                entering = 1;
                continue;
            }
            if (pass == 1) {
                classify(c, i);
            } else {
                if (c->kind[i] != K_NONE && c->kind[i] != K_COMM)
                    rc = place_gpu(c, i);
                rv_event *e = &c->t->events[c->event[i]];
                e->dur_ns = c->cursor - e->ts_ns;
            }
            sp--;
        }
    }
    return rc;
}

typedef struct byid {
    int64_t id;
    int32_t idx;
} byid;

/* Children lists and roots; a node whose parent is missing, itself or ET
 * bookkeeping is a root. Nodes on a parent cycle are never reached. */
static int build_forest(ctx *c)
{
    const rv_et *et = c->et;
    size_t n = et->nnodes;
    rv_map ids;
    byid *order = malloc((n + 1) * sizeof(*order));
    int32_t *last = malloc((n + 1) * sizeof(*last));
    int rc = 0;
    rv_map_init(&ids, n + 1);
    if (!order || !last) {
        rc = RV_ERR_NOMEM;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        order[i] = (byid){et->nodes[i].id, (int32_t)i};
        c->first[i] = c->next[i] = last[i] = -1;
        c->event[i] = -1;
        if (rv_map_put(&ids, (uint64_t)et->nodes[i].id, (uint32_t)i) < 0) {
            rc = RV_ERR_NOMEM;
            goto out;
        }
    }
    rv_sort_i64(order, n, sizeof(*order), offsetof(byid, id));
    for (size_t k = 0; k < n; k++) {
        int32_t i = order[k].idx;
        const rv_et_node *nd = &et->nodes[i];
        if (is_bookkeeping(rv_et_str(et, nd->name)))
            continue;
        uint32_t p;
        if (nd->parent == RV_NONE || nd->parent == nd->id ||
            !rv_map_get(&ids, (uint64_t)nd->parent, &p) ||
            is_bookkeeping(rv_et_str(et, et->nodes[p].name))) {
            c->roots[c->nroots++] = i;
            continue;
        }
        if (last[p] < 0)
            c->first[p] = i;
        else
            c->next[last[p]] = i;
        last[p] = i;
    }
out:
    rv_map_free(&ids);
    free(order);
    free(last);
    return rc;
}

static int any_device(const rv_et *et)
{
    for (size_t i = 0; i < et->nargs; i++)
        if (et->args[i].device != RV_ET_DEV_UNKNOWN)
            return 1;
    return 0;
}

/* The step: a ProfilerStep annotation over everything, on the first
 * launching thread, and a closing device sync, unless the ET has steps. */
static int close_step(ctx *c, uint32_t step_tid)
{
    int64_t end = c->cursor, idx = 0;
    int rc, has_step = 0;
    for (size_t i = 0; i < c->t->nevents; i++)
        has_step |= starts(rv_trace_str(c->t, c->t->events[i].name), "ProfilerStep#");
    if (end < c->free_compute)
        end = c->free_compute;
    if (end < c->free_comm)
        end = c->free_comm;
    uint32_t sync, step;
    if ((rc = intern(c->t, "cudaDeviceSynchronize", &sync)) < 0 ||
        (rc = intern(c->t, "ProfilerStep#0", &step)) < 0)
        return rc;
    if ((rc = push(c, RV_CAT_RUNTIME, sync, c->pid, step_tid, c->cursor, end - c->cursor, &idx)) <
        0)
        return rc;
    if (!has_step)
        rc = push(c, RV_CAT_USER_ANNOTATION, step, c->pid, step_tid, 0, end, NULL);
    return rc;
}

int rv_et_to_trace(const rv_et *et, const char *gpu, rv_trace **out, rv_et_alone *info,
                   rv_error *err)
{
    return rv_et_to_trace_fitted(et, gpu, NULL, out, info, err);
}

int rv_et_to_trace_fitted(const rv_et *et, const char *gpu, const rv_kmodel *eff, rv_trace **out,
                          rv_et_alone *info, rv_error *err)
{
    ctx c = {.et = et, .eff = eff};
    rv_et_alone dummy;
    size_t n = et->nnodes;
    int rc = 0;
    rv_error_clear(err);
    *out = NULL;
    c.info = info ? info : &dummy;
    memset(c.info, 0, sizeof(*c.info));
    if (!gpu || !*gpu)
        return rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1,
                            "an execution trace alone needs a GPU to model its kernels on: give "
                            "\"gpu\" in the what-if (--gpu on the CLI)");
    c.hw = rv_hw_lookup(gpu);
    if (!c.hw)
        return rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1,
                            "gpu '%.64s' is not in the hardware table: the kernels of an "
                            "execution trace alone cannot be modelled on it",
                            gpu);
    c.t = rv_trace_new();
    c.first = malloc((n + 1) * sizeof(int32_t));
    c.next = malloc((n + 1) * sizeof(int32_t));
    c.event = malloc((n + 1) * sizeof(int32_t));
    c.cur = malloc((n + 1) * sizeof(int32_t));
    c.stack = malloc((n + 1) * sizeof(int32_t));
    c.roots = malloc((n + 1) * sizeof(int32_t));
    c.kind = calloc(n + 1, 1);
    c.sub = calloc(n + 1, 1);
    int32_t *node_of = NULL;
    if (!c.t || !c.first || !c.next || !c.event || !c.cur || !c.stack || !c.roots || !c.kind ||
        !c.sub)
        goto nomem;
    c.any_device = any_device(et);
    rv_trace *t = c.t;
    t->rank = t->world_size = RV_NONE;
    if (intern(t, rv_trace_source_name(RV_SOURCE_ET), &t->source_format) < 0 ||
        intern(t, c.hw->name, &t->platform_gpu) < 0 || intern(t, "1", &c.pid) < 0 ||
        intern(t, "0", &c.s_gpu_pid) < 0 || intern(t, "stream 7", &c.s_stream) < 0 ||
        intern(t, "stream 20", &c.s_comm_stream) < 0 ||
        intern(t, "cudaLaunchKernel", &c.s_launch) < 0 ||
        intern(t, "cudaMemcpyAsync", &c.s_memcpy_async) < 0 ||
        intern(t, "cudaMemcpy", &c.s_memcpy) < 0)
        goto nomem;
    rv_device dev = {.id = 0, .name = t->platform_gpu, .num_sms = c.hw->sms};
    if ((rc = rv_trace_add_device(t, &dev)) < 0 || (rc = build_forest(&c)) < 0 ||
        (rc = walk(&c, 1)) < 0)
        goto fail;
    /* Shapes and the memory model, as a join would give them. */
    node_of = malloc((t->nevents + 1) * sizeof(*node_of));
    if (!node_of)
        goto nomem;
    for (size_t i = 0; i < t->nevents; i++)
        node_of[i] = -1;
    for (size_t i = 0; i < n; i++)
        if (c.event[i] >= 0)
            node_of[c.event[i]] = (int32_t)i;
    rv_et_join j = {.node_of_event = node_of, .nevents = t->nevents};
    if ((rc = rv_et_shapes_to_trace(et, &j, t)) < 0)
        goto fail;
    /* The step's thread: the one of the first launch in time. */
    int32_t first_launch = -1;
    for (size_t k = 0; k < n; k++)
        if (c.kind[k] != K_NONE && c.event[k] >= 0 &&
            (first_launch < 0 || c.event[k] < c.event[first_launch]))
            first_launch = (int32_t)k;
    if (first_launch < 0) {
        rc = rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1,
                          "no op of the execution trace works on a GPU tensor: there is no GPU "
                          "work to model");
        goto out;
    }
    if ((rc = walk(&c, 2)) < 0 || (rc = close_step(&c, t->events[c.event[first_launch]].tid)) < 0)
        goto fail;
    t->et_kernels_fitted = c.info->fitted;
    *out = t;
    c.t = NULL;
    goto out;
nomem:
    rc = RV_ERR_NOMEM;
fail:
    rc = rv_error_set(err, rc, -1, -1,
                      rc == RV_ERR_NOMEM ? "out of memory building the graph of the execution trace"
                                         : "the execution trace is too large to model");
out:
    rv_trace_free(c.t);
    free(node_of);
    free(c.first);
    free(c.next);
    free(c.event);
    free(c.cur);
    free(c.stack);
    free(c.roots);
    free(c.kind);
    free(c.sub);
    return rc;
}
