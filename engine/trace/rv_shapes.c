/* Op shapes on a trace and the op tree; see rv_shapes.h. */
#include "trace/rv_shapes.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "util/rv_map.h"
#include "trace/rv_kname.h"
#include "util/rv_sort.h"
#include "util/rv_names.h"

#define MAX_OPS  ((size_t)16 << 20)
#define MAX_ARGS ((size_t)64 << 20)

static int grow(void **p, size_t *cap, size_t need, size_t size, size_t first)
{
    if (need <= *cap)
        return 0;
    size_t nc = *cap ? *cap : first;
    while (nc < need)
        nc *= 2;
    void *q = realloc(*p, nc * size);
    if (!q)
        return RV_ERR_NOMEM;
    *p = q;
    *cap = nc;
    return 0;
}

int rv_shapes_add(rv_trace *t, int32_t event, const rv_shape_arg *args, size_t nargs,
                  const int64_t *ints, size_t nints)
{
    if (event < 0 || (size_t)event >= t->nevents || nargs > RV_SHAPES_MAX_ARGS ||
        (t->nop_shapes && t->op_shapes[t->nop_shapes - 1].event >= event))
        return RV_ERR_INVALID;
    for (size_t i = 0; i < nargs; i++) {
        const rv_shape_arg *a = &args[i];
        if ((a->ndims >= 0 && (size_t)a->dims + (size_t)a->ndims > nints) ||
            (a->nvals >= 0 && (size_t)a->vals + (size_t)a->nvals > nints))
            return RV_ERR_INVALID;
    }
    if (t->nop_shapes >= MAX_OPS || t->nshape_args + nargs > MAX_ARGS ||
        t->nshape_ints + nints > RV_SHAPES_MAX_INTS) {
        t->shapes_truncated = 1;
        return 1;
    }
    if (grow((void **)&t->op_shapes, &t->cap_op_shapes, t->nop_shapes + 1, sizeof(rv_op_shape),
             256) ||
        grow((void **)&t->shape_args, &t->cap_shape_args, t->nshape_args + nargs + 1,
             sizeof(rv_shape_arg), 1024) ||
        grow((void **)&t->shape_ints, &t->cap_shape_ints, t->nshape_ints + nints + 1,
             sizeof(int64_t), 4096))
        return RV_ERR_NOMEM;
    uint32_t base = (uint32_t)t->nshape_ints;
    if (nints)
        memcpy(t->shape_ints + base, ints, nints * sizeof(*ints));
    t->nshape_ints += nints;
    rv_op_shape *o = &t->op_shapes[t->nop_shapes++];
    o->event = event;
    o->first = (uint32_t)t->nshape_args;
    o->nargs = (uint32_t)nargs;
    for (size_t i = 0; i < nargs; i++) {
        rv_shape_arg a = args[i];
        a.dims = a.ndims >= 0 ? a.dims + base : 0;
        a.vals = a.nvals >= 0 ? a.vals + base : 0;
        t->shape_args[t->nshape_args++] = a;
    }
    return 0;
}

int rv_shapes_append(rv_trace *dst, const rv_trace *src, int32_t event_base)
{
    if (!src->nop_shapes)
        return src->shapes_truncated ? 1 : 0;
    if (src->shapes_truncated || dst->nop_shapes + src->nop_shapes > MAX_OPS ||
        dst->nshape_args + src->nshape_args > MAX_ARGS ||
        dst->nshape_ints + src->nshape_ints > RV_SHAPES_MAX_INTS)
        return 1;
    if (grow((void **)&dst->op_shapes, &dst->cap_op_shapes, dst->nop_shapes + src->nop_shapes,
             sizeof(rv_op_shape), 256) ||
        grow((void **)&dst->shape_args, &dst->cap_shape_args,
             dst->nshape_args + src->nshape_args + 1, sizeof(rv_shape_arg), 1024) ||
        grow((void **)&dst->shape_ints, &dst->cap_shape_ints,
             dst->nshape_ints + src->nshape_ints + 1, sizeof(int64_t), 4096))
        return RV_ERR_NOMEM;
    uint32_t ints_base = (uint32_t)dst->nshape_ints;
    uint32_t args_base = (uint32_t)dst->nshape_args;
    if (src->nshape_ints)
        memcpy(dst->shape_ints + ints_base, src->shape_ints,
               src->nshape_ints * sizeof(*src->shape_ints));
    dst->nshape_ints += src->nshape_ints;
    for (size_t i = 0; i < src->nshape_args; i++) {
        rv_shape_arg a = src->shape_args[i];
        a.dims = a.ndims >= 0 ? a.dims + ints_base : 0;
        a.vals = a.nvals >= 0 ? a.vals + ints_base : 0;
        dst->shape_args[dst->nshape_args++] = a;
    }
    for (size_t i = 0; i < src->nop_shapes; i++) {
        rv_op_shape o = src->op_shapes[i];
        o.event += event_base;
        o.first += args_base;
        dst->op_shapes[dst->nop_shapes++] = o;
    }
    if (dst->shapes_source == RV_SHAPES_NONE)
        dst->shapes_source = src->shapes_source;
    return 0;
}

/* "Tensor(float)" -> "float"; other text unchanged. */
static void unwrap(const char **s, size_t *n)
{
    if (*n > 8 && !memcmp(*s, "Tensor(", 7) && (*s)[*n - 1] == ')') {
        *s += 7;
        *n -= 8;
    }
}

int rv_shapes_itemsize(const char *s, size_t n)
{
    static const rv_name tab[] = {
        RV_NAME("float", 4),
        RV_NAME("c10::Half", 2),
        RV_NAME("c10::BFloat16", 2),
        RV_NAME("double", 8),
        RV_NAME("long int", 8),
        RV_NAME("int", 4),
        RV_NAME("short int", 2),
        RV_NAME("signed char", 1),
        RV_NAME("unsigned char", 1),
        RV_NAME("bool", 1),
        RV_NAME("c10::complex<float>", 8),
        RV_NAME("c10::complex<double>", 16),
        RV_NAME("c10::Float8_e4m3fn", 1),
        RV_NAME("c10::Float8_e5m2", 1),
        RV_NAME("c10::Float8_e4m3fnuz", 1),
        RV_NAME("c10::Float8_e5m2fnuz", 1),
        RV_NAME("half", 2),
        RV_NAME("long", 8),
    };
    unwrap(&s, &n);
    return rv_names_find(tab, sizeof(tab) / sizeof(tab[0]), s, n, 0);
}

int rv_shapes_ptype(const char *s, size_t n)
{
    unwrap(&s, &n);
    return rv_kname_type_code(s, n);
}

void rv_shapes_clear(rv_trace *t)
{
    t->nop_shapes = t->nshape_args = t->nshape_ints = 0;
    t->shapes_source = RV_SHAPES_NONE;
    t->shapes_truncated = 0;
}

const rv_op_shape *rv_shapes_of(const rv_trace *t, int32_t event)
{
    size_t lo = 0, hi = t->nop_shapes;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->op_shapes[mid].event < event)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->nop_shapes && t->op_shapes[lo].event == event ? &t->op_shapes[lo] : NULL;
}

static int is_op(const rv_event *e)
{
    return e->cat == RV_CAT_CPU_OP || e->cat == RV_CAT_USER_ANNOTATION;
}

static int is_launch(const rv_event *e)
{
    return e->cat == RV_CAT_RUNTIME || e->cat == RV_CAT_DRIVER;
}

typedef struct cpuref {
    int64_t negdur, ts, thread;
    int32_t idx;
} cpuref;

int rv_shapes_op_tree(const rv_trace *t, int32_t *parent)
{
    size_t n = 0, depth = 0;
    cpuref *v = malloc((t->nevents + 1) * sizeof(*v));
    int32_t *stack = malloc((t->nevents + 1) * sizeof(*stack));
    rv_map corr;
    int rc = RV_ERR_NOMEM;
    rv_map_init(&corr, t->nevents + 1);
    if (!v || !stack)
        goto out;
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        parent[i] = -1;
        if (is_op(e) || is_launch(e))
            v[n++] = (cpuref){-e->dur_ns, e->ts_ns, (int64_t)(((uint64_t)e->pid << 32) | e->tid),
                              (int32_t)i};
    }
    /* Thread, then start, then longest first: a parent precedes its children. */
    rv_sort_i64(v, n, sizeof(*v), offsetof(cpuref, negdur));
    rv_sort_i64(v, n, sizeof(*v), offsetof(cpuref, ts));
    rv_sort_i64(v, n, sizeof(*v), offsetof(cpuref, thread));
    for (size_t k = 0; k < n; k++) {
        const rv_event *e = &t->events[v[k].idx];
        if (k > 0 && v[k].thread != v[k - 1].thread)
            depth = 0;
        while (depth > 0) {
            const rv_event *p = &t->events[stack[depth - 1]];
            if (p->ts_ns <= e->ts_ns && e->ts_ns + e->dur_ns <= p->ts_ns + p->dur_ns)
                break;
            depth--;
        }
        parent[v[k].idx] = depth ? stack[depth - 1] : -1;
        if (is_op(e))
            stack[depth++] = v[k].idx;
        else if (e->correlation != RV_NONE &&
                 (rc = rv_map_put(&corr, (uint64_t)e->correlation, (uint32_t)v[k].idx)) < 0)
            goto out;
    }
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        uint32_t li;
        if (rv_cat_is_gpu_task(e->cat) && e->correlation != RV_NONE &&
            rv_map_get(&corr, (uint64_t)e->correlation, &li))
            parent[i] = parent[li];
    }
    rc = 0;
out:
    rv_map_free(&corr);
    free(v);
    free(stack);
    return rc;
}

/* ------------------------------------------------------------ Kineto side */

#define PEND_INTS 16384

struct rv_shapes_pending {
    rv_mem_sample mem; /* a "[memory]" event's args */
    int64_t mem_dev_type;
    int seen_dims;
    size_t nargs, nints; /* args: the longest of the three lists */
    rv_shape_arg args[RV_SHAPES_MAX_ARGS];
    int64_t ints[PEND_INTS];
};

rv_shapes_pending *rv_shapes_pending_new(void)
{
    rv_shapes_pending *p = malloc(sizeof(*p));
    if (p)
        rv_shapes_pending_reset(p);
    return p;
}

void rv_shapes_pending_free(rv_shapes_pending *p)
{
    free(p);
}

void rv_shapes_pending_reset(rv_shapes_pending *p)
{
    p->mem = (rv_mem_sample){0, 0, RV_NONE, RV_NONE, RV_NONE, 0};
    p->mem_dev_type = RV_NONE;
    p->seen_dims = 0;
    p->nargs = p->nints = 0;
}

/* Argument i, set up empty the first time a list reaches it; NULL past
 * the cap (the op's later arguments are dropped). */
static rv_shape_arg *pend_arg(rv_shapes_pending *p, size_t i)
{
    if (i >= RV_SHAPES_MAX_ARGS)
        return NULL;
    while (p->nargs <= i) {
        rv_shape_arg *a = &p->args[p->nargs++];
        memset(a, 0, sizeof(*a));
        a->ndims = a->nvals = -1;
    }
    return &p->args[i];
}

static int is_digit_start(int c)
{
    return c == '-' || (c >= '0' && c <= '9');
}

/* An integer token in js->num; 0 when it is not one. */
static int num_int(const rv_jscan *js, int64_t *v)
{
    if (memchr(js->num, '.', js->num_len) || memchr(js->num, 'e', js->num_len) ||
        memchr(js->num, 'E', js->num_len))
        return 0;
    return rv_jscan_dec_i64(js->num, js->num_len, 0, v) == RV_JSCAN_OK;
}

/* Array iteration after '[' was consumed: 1 while an element follows. */
static int arr_more(rv_jscan *js, int first)
{
    int c = rv_jscan_ws(js);
    if (c == ']') {
        rv_jscan_eat(js);
        return 0;
    }
    if (!first) {
        if (c != ',')
            return rv_jscan_fail_char(js, c, "',' or ']'");
        rv_jscan_eat(js);
        c = rv_jscan_ws(js);
    }
    if (c < 0)
        return rv_jscan_fail_eof(js, "an array");
    return 1;
}

/* One shape: flat ints kept (at most RV_ET_MAX_DIMS-like 16), else none. */
static int read_one_dims(rv_jscan *js, int depth, rv_shapes_pending *p, rv_shape_arg *a)
{
    int c = rv_jscan_ws(js), rc, more, flat = 1;
    size_t start = p->nints, n = 0;
    if (c != '[')
        return rv_jscan_skip(js, depth);
    rv_jscan_eat(js);
    for (int first = 1; (more = arr_more(js, first)) > 0; first = 0) {
        c = rv_jscan_ws(js);
        int64_t d;
        if (flat && is_digit_start(c)) {
            if ((rc = rv_jscan_number(js)) < 0)
                return rc;
            if (!num_int(js, &d) || n >= 16 || p->nints >= PEND_INTS) {
                flat = 0;
                continue;
            }
            p->ints[p->nints++] = d;
            n++;
        } else {
            flat = 0;
            if ((rc = rv_jscan_skip(js, depth + 1)) < 0)
                return rc;
        }
    }
    if (more < 0)
        return more;
    if (flat && a) {
        a->ndims = (int32_t)n;
        a->dims = (uint32_t)start;
    } else {
        p->nints = start;
    }
    return 0;
}

int rv_shapes_read_dims(rv_jscan *js, int depth, rv_shapes_pending *p)
{
    int c = rv_jscan_ws(js), rc, more;
    size_t i = 0;
    if (c != '[')
        return rv_jscan_skip(js, depth);
    rv_jscan_eat(js);
    p->seen_dims = 1;
    for (int first = 1; (more = arr_more(js, first)) > 0; first = 0, i++)
        if ((rc = read_one_dims(js, depth + 1, p, pend_arg(p, i))) < 0)
            return rc;
    return more;
}

void rv_shapes_note_type(rv_shapes_pending *p, size_t i, const char *s, size_t n)
{
    rv_shape_arg *a = pend_arg(p, i);
    if (!a || !s)
        return;
    a->ptype = (uint8_t)rv_shapes_ptype(s, n);
    a->itemsize = (uint8_t)rv_shapes_itemsize(s, n);
}

/* "[1, 1]", "3": ints into p; 0 when the text is anything else. */
static int parse_concrete(rv_shapes_pending *p, const char *s, size_t n, rv_shape_arg *a)
{
    size_t i = 0, start = p->nints;
    int list = 0, count = 0;
    while (i < n && s[i] == ' ')
        i++;
    if (i < n && s[i] == '[') {
        list = 1;
        i++;
    }
    for (;;) {
        while (i < n && (s[i] == ' ' || s[i] == ','))
            i++;
        if (i >= n || s[i] == ']')
            break;
        size_t j = i;
        if (s[j] == '-')
            j++;
        while (j < n && s[j] >= '0' && s[j] <= '9')
            j++;
        int64_t v;
        if (j == i || (j < n && s[j] != ',' && s[j] != ']' && s[j] != ' ') || count >= 16 ||
            p->nints >= PEND_INTS || rv_jscan_dec_i64(s + i, j - i, 0, &v) != RV_JSCAN_OK) {
            p->nints = start;
            return 0;
        }
        p->ints[p->nints++] = v;
        count++;
        i = j;
        if (!list)
            break;
    }
    if (!list && count != 1) {
        p->nints = start;
        return 0;
    }
    a->nvals = count;
    a->vals = (uint32_t)start;
    return 1;
}

int rv_shapes_read_concrete(rv_jscan *js, int depth, rv_shapes_pending *p, rv_buf *b)
{
    int c = rv_jscan_ws(js), rc, more;
    size_t i = 0;
    if (c != '[')
        return rv_jscan_skip(js, depth);
    rv_jscan_eat(js);
    for (int first = 1; (more = arr_more(js, first)) > 0; first = 0, i++) {
        c = rv_jscan_ws(js);
        if (c != '"') {
            if ((rc = rv_jscan_skip(js, depth + 1)) < 0)
                return rc;
            continue;
        }
        rv_jscan_eat(js);
        if ((rc = rv_jscan_string(js, b)) < 0)
            return rc;
        rv_shape_arg *a = pend_arg(p, i);
        if (a && !b->err && b->len)
            parse_concrete(p, b->p, b->len, a);
    }
    return more;
}

int rv_shapes_commit(rv_trace *t, int32_t event, rv_shapes_pending *p)
{
    int rc = 0;
    if (p->seen_dims && event >= 0) {
        rc = rv_shapes_add(t, event, p->args, p->nargs, p->ints, p->nints);
        if (rc == 0 && t->shapes_source == RV_SHAPES_NONE)
            t->shapes_source = RV_SHAPES_KINETO;
    }
    rv_shapes_pending_reset(p);
    return rc < 0 ? rc : 0;
}

static int key_is(const char *k, size_t n, const char *lit)
{
    return strlen(lit) == n && !memcmp(k, lit, n);
}

int rv_shapes_key(const char *key, size_t n)
{
    static const rv_name keys[] = {
        RV_NAME("Input Dims", 1),      RV_NAME("Concrete Inputs", 1), RV_NAME("Bytes", 1),
        RV_NAME("Total Allocated", 1), RV_NAME("Total Reserved", 1),  RV_NAME("Device Type", 1),
        RV_NAME("Device Id", 1),
    };
    return rv_names_find(keys, sizeof(keys) / sizeof(keys[0]), key, n, 0);
}

/* An integer, or a string holding one; RV_NONE (value skipped) otherwise. */
static int read_int_or_none(rv_jscan *js, int depth, rv_buf *b, int64_t *v)
{
    int c = rv_jscan_ws(js), rc;
    *v = RV_NONE;
    if (is_digit_start(c)) {
        if ((rc = rv_jscan_number(js)) < 0)
            return rc;
        if (!num_int(js, v))
            *v = RV_NONE;
        return 0;
    }
    if (c == '"') {
        rv_jscan_eat(js);
        if ((rc = rv_jscan_string(js, b)) < 0)
            return rc;
        if (b->err || rv_jscan_dec_i64(b->p ? b->p : "", b->len, 0, v) != RV_JSCAN_OK)
            *v = RV_NONE;
        return 0;
    }
    return rv_jscan_skip(js, depth);
}

int rv_shapes_read_arg(rv_jscan *js, int depth, const char *key, size_t n, rv_shapes_pending *p,
                       rv_buf *b)
{
    int64_t v;
    int rc;
    if (key_is(key, n, "Input Dims"))
        return rv_shapes_read_dims(js, depth, p);
    if (key_is(key, n, "Concrete Inputs"))
        return rv_shapes_read_concrete(js, depth, p, b);
    if ((rc = read_int_or_none(js, depth, b, &v)) < 0)
        return rc;
    if (key_is(key, n, "Bytes"))
        p->mem.bytes = v == RV_NONE ? 0 : v;
    else if (key_is(key, n, "Total Allocated"))
        p->mem.allocated = v;
    else if (key_is(key, n, "Total Reserved"))
        p->mem.reserved = v;
    else if (key_is(key, n, "Device Type"))
        p->mem_dev_type = v;
    else if (key_is(key, n, "Device Id"))
        p->mem.device = v >= 0 && v <= INT32_MAX ? (int32_t)v : RV_NONE;
    return 0;
}

int rv_shapes_commit_mem(rv_trace *t, rv_shapes_pending *p, int instant, const char *name, size_t n,
                         int64_t ts_ns)
{
    int rc = 0;
    if (instant && n == 8 && !memcmp(name, "[memory]", 8) && p->mem_dev_type == 1 &&
        p->mem.device >= 0) {
        rv_mem_sample m = p->mem;
        m.ts_ns = ts_ns;
        rc = rv_trace_add_mem(t, &m);
    }
    rv_shapes_pending_reset(p);
    return rc < 0 ? rc : 0;
}

/* The batch size the shapes say: the leading dim of the first conv input,
 * else of the first attention query or rank >= 3 linear/matmul input,
 * else of the first 2-D linear/addmm input. 0 when none. *from names it. */
int64_t rv_shapes_batch(const rv_trace *t, const char **from)
{
    static const char *const conv[] = {"aten::conv2d",      "aten::conv1d",       "aten::conv3d",
                                       "aten::convolution", "aten::_convolution", NULL};
    static const char *const seq[] = {"aten::scaled_dot_product_attention", "aten::linear",
                                      "aten::matmul", NULL};
    static const char *const mlp[] = {"aten::linear", "aten::addmm", NULL};
    const char *const *lists[3] = {conv, seq, mlp};
    static const char *const names[3] = {"the first convolution's input",
                                         "the first attention or 3-D linear input",
                                         "the first linear layer's input rows"};
    for (int pass = 0; pass < 3; pass++) {
        for (size_t k = 0; k < t->nop_shapes; k++) {
            const rv_op_shape *s = &t->op_shapes[k];
            const char *n = rv_trace_str(t, t->events[s->event].name);
            int hit = 0;
            for (const char *const *l = lists[pass]; *l && !hit; l++)
                hit = !strcmp(n, *l);
            if (!hit)
                continue;
            /* addmm's input rows are its second argument. */
            uint32_t ai = (pass == 2 && !strcmp(n, "aten::addmm")) ? 1 : 0;
            if (ai >= s->nargs)
                continue;
            const rv_shape_arg *a = &t->shape_args[s->first + ai];
            int min_rank = pass == 0 ? 3 : pass == 1 ? 3 : 2;
            if (a->ndims < min_rank || (pass == 2 && a->ndims != 2))
                continue;
            int64_t b = rv_shapes_dims(t, a)[0];
            if (b > 0) {
                *from = names[pass];
                return b;
            }
        }
    }
    return 0;
}
