#include "trace/rv_trace.h"
#include "util/rv_mem.h"

#include <stdlib.h>
#include <string.h>

#define STRTAB_MAX_COUNT (64u * 1024u * 1024u)
#define STRTAB_MAX_BYTES ((size_t)2 << 30)

/* The index compares the 64-bit hash first; this confirms the text. The
 * strings lie back to back in interning order, so a string's length is
 * where the next one starts (or the table's end), less its NUL. */
static int same_text(const void *ctx, uint32_t id, const void *key, size_t len)
{
    const rv_strtab *st = ctx;
    size_t next = id + 1 < st->count ? st->offsets[id + 1] : st->len;
    return next - st->offsets[id] - 1 == len && memcmp(st->data + st->offsets[id], key, len) == 0;
}

static uint32_t find_hashed(const rv_strtab *st, uint64_t h, const char *s, size_t len)
{
    uint32_t id;
    if (!rv_map_find(&st->index, h, same_text, st, s, len, &id))
        return UINT32_MAX;
    return id;
}

uint32_t rv_strtab_find(const rv_strtab *st, const char *s, size_t len)
{
    return find_hashed(st, rv_map_hash(s, len), s, len);
}

uint32_t rv_strtab_intern(rv_strtab *st, const char *s, size_t len)
{
    /* An embedded NUL would make the stored string shorter than the key. */
    const char *nul = memchr(s, '\0', len);
    if (nul)
        len = (size_t)(nul - s);
    uint64_t h = rv_map_hash(s, len);
    uint32_t id = find_hashed(st, h, s, len);
    if (id != UINT32_MAX)
        return id;
    if (st->count >= STRTAB_MAX_COUNT || st->len + len + 1 > STRTAB_MAX_BYTES)
        return UINT32_MAX;
    if (!st->index.max) /* a zeroed table is an empty one */
        rv_map_init(&st->index, (size_t)STRTAB_MAX_COUNT);
    if (st->len + len + 1 > st->cap) {
        size_t cap = st->cap ? st->cap : 4096;
        while (cap < st->len + len + 1)
            cap *= 2;
        char *d = realloc(st->data, cap);
        if (!d)
            return UINT32_MAX;
        st->data = d;
        st->cap = cap;
    }
    if (st->count == st->offsets_cap) {
        uint32_t cap = st->offsets_cap ? st->offsets_cap * 2 : 256;
        uint32_t *o = realloc(st->offsets, cap * sizeof(*o));
        if (!o)
            return UINT32_MAX;
        st->offsets = o;
        st->offsets_cap = cap;
    }
    if (rv_map_add(&st->index, h, st->count) != 0)
        return UINT32_MAX;
    id = st->count++;
    st->offsets[id] = (uint32_t)st->len;
    if (len)
        memcpy(st->data + st->len, s, len);
    st->data[st->len + len] = '\0';
    st->len += len + 1;
    return id;
}

const char *rv_strtab_get(const rv_strtab *st, uint32_t id)
{
    if (id >= st->count)
        return "";
    return st->data + st->offsets[id];
}

size_t rv_strtab_len(const rv_strtab *st, uint32_t id)
{
    if (id >= st->count)
        return 0;
    size_t next = id + 1 < st->count ? st->offsets[id + 1] : st->len;
    return next - st->offsets[id] - 1;
}

void rv_strtab_clear(rv_strtab *st)
{
    st->len = 0;
    st->count = 0;
    rv_map_clear(&st->index);
}

void rv_strtab_free(rv_strtab *st)
{
    if (!st)
        return;
    free(st->data);
    free(st->offsets);
    rv_map_free(&st->index);
    memset(st, 0, sizeof(*st));
}

size_t rv_strtab_bytes(const rv_strtab *st)
{
    return st->cap + (size_t)st->offsets_cap * sizeof(uint32_t) + rv_map_bytes(&st->index);
}

rv_trace *rv_trace_new(void)
{
    rv_trace *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->rank = RV_NONE;
    t->world_size = RV_NONE;
    if (rv_strtab_intern(&t->strings, "", 0) != 0) {
        rv_trace_free(t);
        return NULL;
    }
    return t;
}

static int same_bytes(const void *a, const void *b, size_t n)
{
    return n == 0 || memcmp(a, b, n) == 0;
}

/* Field by field: padding is not part of an event's value. */
static int same_events(const rv_trace *a, const rv_trace *b)
{
    if (a->nevents != b->nevents)
        return 0;
    for (size_t i = 0; i < a->nevents; i++) {
        const rv_event *x = &a->events[i], *y = &b->events[i];
        if (x->ts_ns != y->ts_ns || x->dur_ns != y->dur_ns || x->correlation != y->correlation ||
            x->external_id != y->external_id || x->bytes != y->bytes ||
            x->wait_event_corr != y->wait_event_corr || x->name != y->name || x->pid != y->pid ||
            x->tid != y->tid || x->device != y->device || x->stream != y->stream ||
            x->wait_stream != y->wait_stream || memcmp(x->grid, y->grid, sizeof(x->grid)) != 0 ||
            memcmp(x->block, y->block, sizeof(x->block)) != 0 || x->registers != y->registers ||
            x->shared_mem != y->shared_mem || x->cat != y->cat || x->sync_kind != y->sync_kind ||
            x->in_type != y->in_type || x->pg != y->pg || x->pg_ranks != y->pg_ranks ||
            x->seq != y->seq || x->peer != y->peer)
            return 0;
    }
    return 1;
}

/* Field by field: a device's padding is not set. */
static int same_devices(const rv_trace *a, const rv_trace *b)
{
    if (a->ndevices != b->ndevices)
        return 0;
    for (size_t i = 0; i < a->ndevices; i++) {
        const rv_device *x = &a->devices[i], *y = &b->devices[i];
        if (x->id != y->id || x->name != y->name || x->num_sms != y->num_sms ||
            x->compute_major != y->compute_major || x->compute_minor != y->compute_minor ||
            x->total_mem != y->total_mem)
            return 0;
    }
    return 1;
}

int rv_trace_same(const rv_trace *a, const rv_trace *b, const char **what)
{
    const char *w = NULL;
    if (!same_events(a, b))
        w = "events";
    else if (a->strings.count != b->strings.count || a->strings.len != b->strings.len ||
             !same_bytes(a->strings.data, b->strings.data, a->strings.len) ||
             !same_bytes(a->strings.offsets, b->strings.offsets,
                         a->strings.count * sizeof(uint32_t)))
        w = "strings";
    else if (!same_devices(a, b))
        w = "devices";
    else if (a->rank != b->rank || a->world_size != b->world_size || a->backend != b->backend ||
             a->source_format != b->source_format || a->platform_gpu != b->platform_gpu ||
             a->platform_cpu != b->platform_cpu || a->platform_driver != b->platform_driver ||
             a->platform_cuda != b->platform_cuda ||
             a->platform_framework != b->platform_framework || a->job != b->job ||
             a->power_limit_w != b->power_limit_w || a->base_time_ns != b->base_time_ns)
        w = "metadata";
    else if (a->nop_shapes != b->nop_shapes || a->nshape_args != b->nshape_args ||
             a->nshape_ints != b->nshape_ints || a->shapes_source != b->shapes_source ||
             a->shapes_truncated != b->shapes_truncated ||
             !same_bytes(a->op_shapes, b->op_shapes, a->nop_shapes * sizeof(rv_op_shape)) ||
             !same_bytes(a->shape_args, b->shape_args, a->nshape_args * sizeof(rv_shape_arg)) ||
             !same_bytes(a->shape_ints, b->shape_ints, a->nshape_ints * sizeof(int64_t)))
        w = "shapes";
    else if (a->nmem != b->nmem || a->mem_truncated != b->mem_truncated ||
             !same_bytes(a->mem, b->mem, a->nmem * sizeof(rv_mem_sample)))
        w = "memory samples";
    else if (a->mem_model != b->mem_model || a->mem_weights != b->mem_weights ||
             a->mem_gradients != b->mem_gradients ||
             a->mem_optimizer_state != b->mem_optimizer_state ||
             a->mem_optimizer != b->mem_optimizer || a->et_kernels_fitted != b->et_kernels_fitted)
        w = "memory model";
    else if (a->skipped_events != b->skipped_events || a->input_bytes != b->input_bytes)
        w = "reader counts";
    if (what)
        *what = w;
    return w == NULL;
}

int rv_trace_reset(rv_trace *t)
{
    rv_event *events = t->events;
    size_t cap_events = t->cap_events;
    rv_device *devices = t->devices;
    rv_strtab strings = t->strings;
    rv_op_shape *op_shapes = t->op_shapes;
    size_t cap_op_shapes = t->cap_op_shapes;
    rv_shape_arg *shape_args = t->shape_args;
    size_t cap_shape_args = t->cap_shape_args;
    int64_t *shape_ints = t->shape_ints;
    size_t cap_shape_ints = t->cap_shape_ints;
    rv_mem_sample *mem = t->mem;
    size_t cap_mem = t->cap_mem;

    free(devices);
    memset(t, 0, sizeof(*t));
    t->events = events;
    t->cap_events = cap_events;
    t->op_shapes = op_shapes;
    t->cap_op_shapes = cap_op_shapes;
    t->shape_args = shape_args;
    t->cap_shape_args = cap_shape_args;
    t->shape_ints = shape_ints;
    t->cap_shape_ints = cap_shape_ints;
    t->mem = mem;
    t->cap_mem = cap_mem;
    t->strings = strings;
    rv_strtab_clear(&t->strings);
    t->rank = RV_NONE;
    t->world_size = RV_NONE;
    return rv_strtab_intern(&t->strings, "", 0) == 0 ? 0 : RV_ERR_NOMEM;
}

void rv_trace_free(rv_trace *t)
{
    if (!t)
        return;
    free(t->events);
    free(t->devices);
    free(t->op_shapes);
    free(t->shape_args);
    free(t->shape_ints);
    free(t->mem);
    rv_strtab_free(&t->strings);
    free(t);
}

void rv_event_init(rv_event *ev)
{
    memset(ev, 0, sizeof(*ev));
    ev->correlation = RV_NONE;
    ev->external_id = RV_NONE;
    ev->bytes = RV_NONE;
    ev->wait_event_corr = RV_NONE;
    ev->device = RV_NONE;
    ev->stream = RV_NONE;
    ev->wait_stream = RV_NONE;
    ev->seq = RV_NONE;
    ev->peer = RV_NONE;
}

int rv_trace_reserve(rv_trace *t, size_t n)
{
    if (n > RV_TRACE_MAX_EVENTS)
        n = RV_TRACE_MAX_EVENTS;
    if (n <= t->cap_events)
        return 0;
    rv_event *e = realloc(t->events, n * sizeof(*e));
    if (!e)
        return RV_ERR_NOMEM;
    t->events = e;
    rv_mem_huge(e, n * sizeof(*e));
    t->cap_events = n;
    return 0;
}

int64_t rv_trace_push(rv_trace *t, const rv_event *ev)
{
    if (t->nevents == t->cap_events) {
        if (t->cap_events >= RV_TRACE_MAX_EVENTS)
            return RV_ERR_LIMIT;
        size_t cap = t->cap_events ? t->cap_events * 2 : 4096;
        if (cap > RV_TRACE_MAX_EVENTS)
            cap = RV_TRACE_MAX_EVENTS;
        rv_event *e = realloc(t->events, cap * sizeof(*e));
        if (!e)
            return RV_ERR_NOMEM;
        t->events = e;
        rv_mem_huge(e, cap * sizeof(*e));
        t->cap_events = cap;
    }
    t->events[t->nevents] = *ev;
    return (int64_t)t->nevents++;
}

int rv_trace_add_device(rv_trace *t, const rv_device *d)
{
    if (t->ndevices >= RV_TRACE_MAX_DEVICES)
        return RV_ERR_LIMIT;
    rv_device *n = realloc(t->devices, (t->ndevices + 1) * sizeof(*n));
    if (!n)
        return RV_ERR_NOMEM;
    t->devices = n;
    t->devices[t->ndevices++] = *d;
    return 0;
}

const char *rv_cat_name(int cat)
{
    static const char *const names[RV_CAT_COUNT] = {
        "cpu_op", "user_annotation", "python_function", "cuda_runtime",        "cuda_driver",
        "kernel", "gpu_memcpy",      "gpu_memset",      "gpu_user_annotation", "cuda_sync",
    };
    if (cat < 0 || cat >= RV_CAT_COUNT)
        return "unknown";
    return names[cat];
}

int rv_trace_add_mem(rv_trace *t, const rv_mem_sample *m)
{
    if (t->nmem >= RV_TRACE_MAX_MEM) {
        t->mem_truncated = 1;
        return 1;
    }
    if (t->nmem == t->cap_mem) {
        size_t nc = t->cap_mem ? t->cap_mem * 2 : 1024;
        rv_mem_sample *p = realloc(t->mem, nc * sizeof(*p));
        if (!p)
            return RV_ERR_NOMEM;
        t->mem = p;
        t->cap_mem = nc;
    }
    t->mem[t->nmem++] = *m;
    return 0;
}

static const char *const source_names[] = {"", "kineto", "collector", "et"};

int rv_trace_source_of_name(const char *name)
{
    if (name)
        for (int k = RV_SOURCE_KINETO; k <= RV_SOURCE_ET; k++)
            if (strcmp(name, source_names[k]) == 0)
                return k;
    return RV_SOURCE_OTHER;
}

const char *rv_trace_source_name(int src)
{
    return src > RV_SOURCE_OTHER && src <= RV_SOURCE_ET ? source_names[src] : "";
}

int rv_trace_source(const rv_trace *t)
{
    return t ? rv_trace_source_of_name(rv_trace_str(t, t->source_format)) : RV_SOURCE_OTHER;
}
