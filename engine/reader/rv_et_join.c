/* Joining an execution trace to the Kineto trace of the same run.
 *
 * Ops are matched first by id: an ET node's rf_id is the Kineto op's
 * "External id" in traces such as HTA's simple-add, and the match is kept
 * when the names agree. Older PyTorch numbered the two differently (the
 * PARAM DLRM traces: Kineto's ids run per thread), so when ids and names
 * disagree, each ET thread's ops (in rf_id order) are aligned with one
 * Kineto thread's ops (in start order) by name, skipping what only one side
 * has and starting over where the trace repeats the ET's iteration. GPU
 * tasks then follow correlation ids to their launching runtime call and
 * take the innermost joined op enclosing it. See docs/internals/et-reader.md. */
#include <stdlib.h>
#include <string.h>

#include "reader/rv_et.h"
#include "util/rv_map.h"
#include "cost/rv_memory.h"
#include "trace/rv_shapes.h"
#include "util/rv_sort.h"

#define LOOKAHEAD 16

typedef struct opref {
    int64_t k1, k2, k3; /* sort keys, most significant last */
    int32_t idx;        /* event or node index */
    uint32_t name;      /* trace string id of the name (UINT32_MAX: not in the trace) */
} opref;

static int is_op(const rv_event *e)
{
    return e->cat == RV_CAT_CPU_OP || e->cat == RV_CAT_USER_ANNOTATION;
}

/* The ET's bookkeeping nodes ("[pytorch|profiler|execution_trace|thread]")
 * have no Kineto counterpart. */
static int et_node_is_op(const rv_et *et, const rv_et_node *n)
{
    return strncmp(rv_et_str(et, n->name), "[pytorch|profiler|execution_", 28) != 0;
}

static void sort3(opref *v, size_t n)
{
    rv_sort_i64(v, n, sizeof(*v), offsetof(opref, k1));
    rv_sort_i64(v, n, sizeof(*v), offsetof(opref, k2));
    rv_sort_i64(v, n, sizeof(*v), offsetof(opref, k3));
}

/* Method 1: rf_id = External id with agreeing names. Returns matches. */
static size_t join_by_id(const rv_et *et, const rv_trace *t, const uint32_t *et_name, int32_t *map,
                         int dry, int *rc)
{
    rv_map ids;
    size_t agree = 0;
    rv_map_init(&ids, et->nnodes + 1);
    *rc = 0;
    for (size_t i = 0; i < et->nnodes; i++) {
        const rv_et_node *n = &et->nodes[i];
        if (n->rf_id == RV_NONE || !et_node_is_op(et, n))
            continue;
        int r = rv_map_put(&ids, (uint64_t)n->rf_id, (uint32_t)i);
        if (r < 0) {
            *rc = r;
            goto out;
        }
    }
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        uint32_t ni;
        if (!is_op(e) || e->external_id == RV_NONE ||
            !rv_map_get(&ids, (uint64_t)e->external_id, &ni))
            continue;
        if (et_name[ni] != e->name)
            continue;
        agree++;
        if (!dry)
            map[i] = (int32_t)ni;
    }
out:
    rv_map_free(&ids);
    return agree;
}

/* Greedy alignment of ET names a[] with trace names b[]; assigns
 * out[b index] = a index when out is set. Returns the matches. */
static size_t align(const opref *a, size_t na, const opref *b, size_t nb, int32_t *out)
{
    size_t i = 0, j = 0, m = 0;
    if (!na)
        return 0;
    while (j < nb) {
        if (i >= na)
            i = 0; /* the trace repeats the ET's iteration */
        if (a[i].name == b[j].name) {
            if (out)
                out[b[j].idx] = a[i].idx;
            m++;
            i++;
            j++;
            continue;
        }
        size_t d = 0, e = 0;
        for (size_t k = 1; k <= LOOKAHEAD && j + k < nb; k++)
            if (b[j + k].name == a[i].name &&
                (i + 1 >= na || j + k + 1 >= nb || b[j + k + 1].name == a[i + 1].name)) {
                d = k;
                break;
            }
        for (size_t k = 1; k <= LOOKAHEAD && i + k < na; k++)
            if (a[i + k].name == b[j].name &&
                (i + k + 1 >= na || j + 1 >= nb || a[i + k + 1].name == b[j + 1].name)) {
                e = k;
                break;
            }
        if (d && (!e || d <= e)) {
            j += d;
        } else if (e) {
            i += e;
        } else {
            /* Lost: find where in the ET the next three trace ops sit. */
            size_t p = na;
            if (j + 2 < nb)
                for (size_t k = 0; k + 2 < na; k++)
                    if (a[k].name == b[j].name && a[k + 1].name == b[j + 1].name &&
                        a[k + 2].name == b[j + 2].name) {
                        p = k;
                        break;
                    }
            if (p < na)
                i = p;
            else
                j++;
        }
    }
    return m;
}

/* Method 2: per-thread order. */
static int join_by_order(const rv_et *et, const rv_trace *t, const uint32_t *et_name, int32_t *map)
{
    size_t na = 0, nb = 0, nta = 0, ntb = 0;
    opref *a = malloc((et->nnodes + 1) * sizeof(*a));
    opref *b = malloc((t->nevents + 1) * sizeof(*b));
    size_t *sa = NULL, *sb = NULL; /* thread run starts, plus the end */
    size_t *score = NULL;
    int rc = RV_ERR_NOMEM;
    if (!a || !b)
        goto out;
    for (size_t i = 0; i < et->nnodes; i++) {
        const rv_et_node *n = &et->nodes[i];
        if (!et_node_is_op(et, n))
            continue;
        a[na++] =
            (opref){n->rf_id != RV_NONE ? n->rf_id : n->id, 0, n->tid, (int32_t)i, et_name[i]};
    }
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if (!is_op(e))
            continue;
        b[nb++] = (opref){-e->dur_ns, e->ts_ns, (int64_t)(((uint64_t)e->pid << 32) | e->tid),
                          (int32_t)i, e->name};
    }
    sort3(a, na);
    sort3(b, nb);
    sa = malloc((na + 2) * sizeof(*sa));
    sb = malloc((nb + 2) * sizeof(*sb));
    if (!sa || !sb)
        goto out;
    for (size_t i = 0; i < na; i++)
        if (i == 0 || a[i].k3 != a[i - 1].k3)
            sa[nta++] = i;
    sa[nta] = na;
    for (size_t i = 0; i < nb; i++)
        if (i == 0 || b[i].k3 != b[i - 1].k3)
            sb[ntb++] = i;
    sb[ntb] = nb;
    score = calloc(nta * ntb + 1, sizeof(*score));
    if (!score)
        goto out;
    for (size_t x = 0; x < nta; x++)
        for (size_t y = 0; y < ntb; y++)
            score[x * ntb + y] =
                align(a + sa[x], sa[x + 1] - sa[x], b + sb[y], sb[y + 1] - sb[y], NULL);
    /* Pair threads best score first, each thread once. */
    for (;;) {
        size_t bx = 0, by = 0, best = 0;
        for (size_t x = 0; x < nta; x++)
            for (size_t y = 0; y < ntb; y++)
                if (score[x * ntb + y] > best) {
                    best = score[x * ntb + y];
                    bx = x;
                    by = y;
                }
        if (!best)
            break;
        align(a + sa[bx], sa[bx + 1] - sa[bx], b + sb[by], sb[by + 1] - sb[by], map);
        for (size_t y = 0; y < ntb; y++)
            score[bx * ntb + y] = 0;
        for (size_t x = 0; x < nta; x++)
            score[x * ntb + by] = 0;
    }
    rc = 0;
out:
    free(a);
    free(b);
    free(sa);
    free(sb);
    free(score);
    return rc;
}

/* Attributes GPU tasks to the innermost joined op enclosing their launch. */
static int attribute_kernels(const rv_trace *t, rv_et_join *j)
{
    int32_t *parent = malloc((t->nevents + 1) * sizeof(*parent));
    if (!parent || rv_shapes_op_tree(t, parent) < 0) {
        free(parent);
        return RV_ERR_NOMEM;
    }
    for (size_t i = 0; i < t->nevents; i++) {
        if (!rv_cat_is_gpu_task(t->events[i].cat))
            continue;
        j->kernels++;
        int32_t p = parent[i];
        if (p < 0)
            continue;
        j->kernels_launched++;
        while (p >= 0 && j->node_of_event[p] < 0)
            p = parent[p];
        if (p >= 0) {
            j->kernels_joined++;
            j->node_of_event[i] = j->node_of_event[p];
        }
    }
    free(parent);
    return 0;
}

int rv_et_join_trace(const rv_et *et, const rv_trace *t, rv_et_join *j, rv_error *err)
{
    uint32_t *et_name = NULL;
    int rc = 0;
    rv_error_clear(err);
    memset(j, 0, sizeof(*j));
    j->node_of_event = malloc((t->nevents + 1) * sizeof(*j->node_of_event));
    et_name = malloc((et->nnodes + 1) * sizeof(*et_name));
    if (!j->node_of_event || !et_name) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory joining the ET");
        goto out;
    }
    j->nevents = t->nevents;
    for (size_t i = 0; i < t->nevents; i++) {
        j->node_of_event[i] = -1;
        j->ops += is_op(&t->events[i]);
    }
    /* ET names in the trace's string ids: then names compare as ids. */
    for (size_t i = 0; i < et->nnodes; i++) {
        const char *s = rv_et_str(et, et->nodes[i].name);
        et_name[i] = rv_strtab_find(&t->strings, s, strlen(s));
    }
    size_t ops_et = 0;
    for (size_t i = 0; i < et->nnodes; i++)
        ops_et += et_node_is_op(et, &et->nodes[i]);
    size_t by_id = join_by_id(et, t, et_name, j->node_of_event, 1, &rc);
    if (rc < 0) {
        rc = rv_error_set(err, rc, -1, -1, "out of memory joining the ET");
        goto out;
    }
    /* Ids are trusted when nearly every ET op found its namesake. */
    if (by_id > 0 && by_id * 100 >= ops_et * 95) {
        j->method = RV_ET_JOIN_ID;
        join_by_id(et, t, et_name, j->node_of_event, 0, &rc);
    } else {
        j->method = RV_ET_JOIN_ORDER;
        rc = join_by_order(et, t, et_name, j->node_of_event);
    }
    if (rc < 0) {
        rc = rv_error_set(err, rc, -1, -1, "out of memory joining the ET");
        goto out;
    }
    for (size_t i = 0; i < t->nevents; i++)
        j->ops_joined += j->node_of_event[i] >= 0;
    if (j->ops_joined == 0) {
        rc = rv_error_set(err, RV_ERR_NOTFOUND, -1, -1,
                          "no op of the execution trace matches an op of the Kineto trace (by "
                          "record-function id or by name and order): are they from the same run?");
        goto out;
    }
    if ((rc = attribute_kernels(t, j)) < 0)
        rc = rv_error_set(err, rc, -1, -1, "out of memory joining the ET");
out:
    free(et_name);
    if (rc < 0)
        rv_et_join_free(j);
    return rc;
}

void rv_et_join_free(rv_et_join *j)
{
    if (!j)
        return;
    free(j->node_of_event);
    j->node_of_event = NULL;
}

/* Bytes of the distinct tensors in the parameter positions of the ops that
 * own parameters (weight and bias of linear, conv, norms; embedding tables). */
static int64_t param_bytes(const rv_et *et)
{
    static const struct {
        const char *name;
        int pos[4];
    } tab[] = {
        {"aten::linear", {1, 2, -1, -1}},         {"aten::conv1d", {1, 2, -1, -1}},
        {"aten::conv2d", {1, 2, -1, -1}},         {"aten::conv3d", {1, 2, -1, -1}},
        {"aten::convolution", {1, 2, -1, -1}},    {"aten::embedding", {0, -1, -1, -1}},
        {"aten::embedding_bag", {0, -1, -1, -1}}, {"aten::layer_norm", {2, 3, -1, -1}},
        {"aten::batch_norm", {1, 2, 3, 4}},       {"aten::group_norm", {2, 3, -1, -1}},
    };
    rv_map seen;
    int64_t total = 0;
    rv_map_init(&seen, et->nargs + 1);
    for (size_t i = 0; i < et->nnodes; i++) {
        const rv_et_node *n = &et->nodes[i];
        const char *name = rv_et_str(et, n->name);
        for (size_t k = 0; k < sizeof(tab) / sizeof(tab[0]); k++) {
            if (strcmp(name, tab[k].name) != 0)
                continue;
            for (int p = 0; p < 4; p++) {
                int pos = tab[k].pos[p];
                if (pos < 0 || (uint32_t)pos >= n->n_in)
                    continue;
                const rv_et_arg *a = &et->args[n->args_off + (uint32_t)pos];
                if (a->tensor_id == RV_NONE || a->numel <= 0 || a->itemsize <= 0 ||
                    rv_map_put(&seen, (uint64_t)a->tensor_id, 0) != 1)
                    continue;
                total += a->numel * a->itemsize;
            }
        }
    }
    rv_map_free(&seen);
    return total;
}

/* The optimizer a node names and the state it keeps per parameter
 * element (rv_memory_optimizer_named); the name's length in *len. */
static const char *optimizer_of(const rv_et *et, int *len, double *per_param)
{
    for (size_t i = 0; i < et->nnodes; i++) {
        const char *name = rv_et_str(et, et->nodes[i].name);
        if (strncmp(name, "Optimizer.step#", 15) != 0)
            continue;
        const char *n = rv_memory_optimizer_named(name, len, per_param);
        if (n)
            return n;
    }
    return NULL;
}

static void memory_model(const rv_et *et, rv_trace *t)
{
    int backward = 0;
    for (size_t i = 0; i < et->nnodes && !backward; i++)
        backward = strstr(rv_et_str(et, et->nodes[i].name), "Backward") != NULL;
    double per = 0;
    int olen = 0;
    const char *opt = optimizer_of(et, &olen, &per);
    t->mem_model = 1;
    t->mem_weights = param_bytes(et);
    t->mem_gradients = backward ? t->mem_weights : 0;
    t->mem_optimizer_state = opt ? (int64_t)(per * (double)t->mem_weights) : RV_NONE;
    t->mem_optimizer = 0;
    if (opt) {
        uint32_t id = rv_strtab_intern(&t->strings, opt, (size_t)olen);
        t->mem_optimizer = id == UINT32_MAX ? 0 : id;
    }
}

int rv_et_shapes_to_trace(const rv_et *et, const rv_et_join *j, rv_trace *t)
{
    rv_shape_arg *args = malloc(RV_SHAPES_MAX_ARGS * sizeof(*args));
    size_t cap = 256;
    int64_t *ints = malloc(cap * sizeof(*ints));
    int rc = 0;
    if (!args || !ints) {
        free(args);
        free(ints);
        return RV_ERR_NOMEM;
    }
    rv_shapes_clear(t);
    t->shapes_source = RV_SHAPES_ET;
    memory_model(et, t);
    for (size_t i = 0; i < t->nevents && i < j->nevents && rc == 0; i++) {
        int32_t ni = j->node_of_event[i];
        if (ni < 0 || !is_op(&t->events[i]))
            continue;
        const rv_et_node *n = &et->nodes[ni];
        size_t na = n->n_in + n->n_out, nints = 0;
        if (na > RV_SHAPES_MAX_ARGS)
            na = RV_SHAPES_MAX_ARGS;
        for (size_t a = 0; a < na; a++) {
            const rv_et_arg *g = &et->args[n->args_off + a];
            nints += (size_t)(g->ndims > 0 ? g->ndims : 0) + (size_t)(g->nvals > 0 ? g->nvals : 0);
        }
        if (nints > cap) {
            size_t nc = nints * 2;
            int64_t *p = realloc(ints, nc * sizeof(*p));
            if (!p) {
                rc = RV_ERR_NOMEM;
                break;
            }
            ints = p;
            cap = nc;
        }
        size_t k = 0;
        for (size_t a = 0; a < na; a++) {
            const rv_et_arg *g = &et->args[n->args_off + a];
            const char *ty = rv_et_str(et, g->type);
            rv_shape_arg *o = &args[a];
            memset(o, 0, sizeof(*o));
            o->is_out = a >= n->n_in;
            o->ndims = g->ndims;
            o->nvals = g->nvals;
            if (g->ndims > 0) {
                o->dims = (uint32_t)k;
                memcpy(ints + k, rv_et_dims(et, g), (size_t)g->ndims * sizeof(*ints));
                k += (size_t)g->ndims;
            }
            if (g->nvals > 0) {
                o->vals = (uint32_t)k;
                memcpy(ints + k, rv_et_vals(et, g), (size_t)g->nvals * sizeof(*ints));
                k += (size_t)g->nvals;
            }
            if (rv_et_arg_is_tensor(et, g)) {
                o->ptype = (uint8_t)rv_shapes_ptype(ty, strlen(ty));
                int isz = g->itemsize > 0 ? g->itemsize : rv_shapes_itemsize(ty, strlen(ty));
                o->itemsize = (uint8_t)(isz > 0 && isz < 256 ? isz : 0);
            } else {
                o->ndims = -1; /* a list argument's "shape" is not a tensor's */
            }
        }
        rc = rv_shapes_add(t, (int32_t)i, args, na, ints, k);
        if (rc > 0)
            rc = 0; /* the caps: later ops go without */
    }
    free(args);
    free(ints);
    return rc;
}
