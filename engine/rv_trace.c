#include "rv_trace.h"
#include "rv_mem.h"

#include <stdlib.h>
#include <string.h>

#define STRTAB_MAX_COUNT (64u * 1024u * 1024u)
#define STRTAB_MAX_BYTES ((size_t)2 << 30)

static uint32_t hash_bytes(const char *s, size_t len)
{
    /* FNV-1a: short kernel and op names dominate, so simplicity wins. */
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < len; i++) {
        h ^= (unsigned char)s[i];
        h *= 16777619u;
    }
    return h;
}

static int strtab_grow_slots(rv_strtab *st)
{
    uint32_t n = st->nslots ? st->nslots * 2 : 1024;
    uint32_t *slots = calloc(n, sizeof(*slots));
    if (!slots)
        return RV_ERR_NOMEM;
    for (uint32_t id = 0; id < st->count; id++) {
        const char *s = st->data + st->offsets[id];
        uint32_t i = hash_bytes(s, strlen(s)) & (n - 1);
        while (slots[i])
            i = (i + 1) & (n - 1);
        slots[i] = id + 1;
    }
    free(st->slots);
    st->slots = slots;
    st->nslots = n;
    return 0;
}

uint32_t rv_strtab_find(const rv_strtab *st, const char *s, size_t len)
{
    if (!st->nslots)
        return UINT32_MAX;
    uint32_t i = hash_bytes(s, len) & (st->nslots - 1);
    while (st->slots[i]) {
        uint32_t id = st->slots[i] - 1;
        const char *c = st->data + st->offsets[id];
        if (strncmp(c, s, len) == 0 && c[len] == '\0')
            return id;
        i = (i + 1) & (st->nslots - 1);
    }
    return UINT32_MAX;
}

uint32_t rv_strtab_intern(rv_strtab *st, const char *s, size_t len)
{
    /* An embedded NUL would make the stored string shorter than the key. */
    const char *nul = memchr(s, '\0', len);
    if (nul)
        len = (size_t)(nul - s);
    uint32_t id = rv_strtab_find(st, s, len);
    if (id != UINT32_MAX)
        return id;
    if (st->count >= STRTAB_MAX_COUNT || st->len + len + 1 > STRTAB_MAX_BYTES)
        return UINT32_MAX;
    if ((st->count + 1) * 2 > st->nslots && strtab_grow_slots(st) != 0)
        return UINT32_MAX;
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
    id = st->count++;
    st->offsets[id] = (uint32_t)st->len;
    if (len)
        memcpy(st->data + st->len, s, len);
    st->data[st->len + len] = '\0';
    st->len += len + 1;
    uint32_t i = hash_bytes(s, len) & (st->nslots - 1);
    while (st->slots[i])
        i = (i + 1) & (st->nslots - 1);
    st->slots[i] = id + 1;
    return id;
}

const char *rv_strtab_get(const rv_strtab *st, uint32_t id)
{
    if (id >= st->count)
        return "";
    return st->data + st->offsets[id];
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

void rv_trace_free(rv_trace *t)
{
    if (!t)
        return;
    free(t->events);
    free(t->devices);
    free(t->strings.data);
    free(t->strings.offsets);
    free(t->strings.slots);
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
