/* Kineto-dialect Chrome-trace writer. See rv_ktrace.h. */
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

#include "util/rv_buf.h"
#include "util/rv_jsonw.h"
#include "rv_ktrace.h"

/* --- output: JSON text -> (gzip) -> growable buffer with a cap ------------ */

typedef struct jout {
    z_stream z;
    int zinit, plain, failed;
    char stage[64 * 1024];
    size_t staged;
    rv_buf out; /* the trace as it will be returned, capped at max_bytes */
} jout;

/* Moves the staged text to the output, compressed unless plain. */
static int jo_drain(jout *o, int finish)
{
    int rc;
    if (o->plain) {
        if ((rc = rv_buf_add(&o->out, o->stage, o->staged)) < 0)
            return rc;
        o->staged = 0;
        return 0;
    }
    o->z.next_in = (Bytef *)o->stage;
    o->z.avail_in = (uInt)o->staged;
    for (;;) {
        /* deflate writes straight into the output's tail. */
        if (!rv_buf_reserve(&o->out, (size_t)64 * 1024))
            return o->out.err;
        size_t room = rv_buf_room(&o->out);
        if (room > UINT32_MAX)
            room = UINT32_MAX; /* avail_out is a uInt */
        o->z.next_out = (Bytef *)o->out.p + o->out.len;
        o->z.avail_out = (uInt)room;
        int zr = deflate(&o->z, finish ? Z_FINISH : Z_NO_FLUSH);
        rv_buf_commit(&o->out, room - o->z.avail_out);
        if (zr == Z_STREAM_END)
            break;
        if (zr != Z_OK && zr != Z_BUF_ERROR)
            return RV_ERR_INTERNAL;
        if (!finish && o->z.avail_in == 0)
            break;
    }
    o->staged = 0;
    return 0;
}

static void jo_write(jout *o, const char *s, size_t n)
{
    while (n && !o->failed) {
        size_t room = sizeof(o->stage) - o->staged;
        size_t k = n < room ? n : room;
        memcpy(o->stage + o->staged, s, k);
        o->staged += k;
        s += k;
        n -= k;
        if (o->staged == sizeof(o->stage) && jo_drain(o, 0) < 0)
            o->failed = 1;
    }
}

static void jo_puts(jout *o, const char *s)
{
    jo_write(o, s, strlen(s));
}

__attribute__((format(printf, 2, 3))) static void jo_printf(jout *o, const char *fmt, ...)
{
    char tmp[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof(tmp), fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    jo_write(o, tmp, (size_t)n < sizeof(tmp) ? (size_t)n : sizeof(tmp) - 1);
}

static int jo_sink(void *ctx, const char *p, size_t n)
{
    jo_write(ctx, p, n); /* a failure stays in o->failed */
    return 0;
}

/* A JSON string literal (rv_jsonw: always valid UTF-8). */
static void jo_str(jout *o, const char *s)
{
    rv_jsonw_str_sink(jo_sink, o, s, strlen(s));
}

/* Microseconds with three decimals, exact: 1234567 ns -> 1234.567. */
static void jo_us(jout *o, uint64_t ns)
{
    jo_printf(o, "%" PRIu64 ".%03u", ns / 1000, (unsigned)(ns % 1000));
}

/* --- a small hash map: uint64 key -> two pointers --------------------------- */

typedef struct mslot {
    uint64_t key;
    const void *a, *b; /* a != NULL marks a used slot */
} mslot;

typedef struct map {
    mslot *slots;
    size_t mask, n;
} map;

static uint64_t mix(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    return k;
}

static int map_init(map *m, size_t expect)
{
    size_t n = 64;
    while (n < expect * 2 + 1)
        n *= 2;
    m->slots = calloc(n, sizeof(mslot));
    m->mask = n - 1;
    m->n = 0;
    return m->slots ? 0 : RV_ERR_NOMEM;
}

/* Inserts unless the key is present (first one wins). */
static void map_put(map *m, uint64_t key, const void *a, const void *b)
{
    size_t i = mix(key) & m->mask;
    while (m->slots[i].a) {
        if (m->slots[i].key == key)
            return;
        i = (i + 1) & m->mask;
    }
    if ((m->n + 1) * 2 > m->mask + 1)
        return; /* sized up front; never more than half full */
    m->slots[i].key = key;
    m->slots[i].a = a;
    m->slots[i].b = b;
    m->n++;
}

static const mslot *map_get(const map *m, uint64_t key)
{
    size_t i = mix(key) & m->mask;
    while (m->slots[i].a) {
        if (m->slots[i].key == key)
            return &m->slots[i];
        i = (i + 1) & m->mask;
    }
    return NULL;
}

/* --- the writer ------------------------------------------------------------ */

typedef struct range {
    const rv_rec *start;
    const rv_recset *set;
    uint64_t end;
} range;

typedef struct launch {
    uint32_t tid, device, stream, pad;
    uint64_t api_start, gpu_start, gpu_end;
} launch;

static int cmp_launch(const void *x, const void *y)
{
    const launch *a = x, *b = y;
    if (a->tid != b->tid)
        return a->tid < b->tid ? -1 : 1;
    if (a->api_start != b->api_start)
        return a->api_start < b->api_start ? -1 : 1;
    return 0;
}

static int is_gpu(int kind)
{
    return kind == RV_REC_KERNEL || kind == RV_REC_MEMCPY || kind == RV_REC_MEMSET;
}

typedef struct wctx {
    jout o;
    const rv_ktrace_opts *opts;
    map api;    /* correlation -> API record */
    map ext;    /* correlation -> external correlation */
    map events; /* cudaEventSyncId -> rv_rec_event */
    map marks;  /* marker id -> start marker */
    map ctxdev; /* context id -> device id (from GPU records) */
    range *ranges;
    size_t nranges;
    launch *launches;
    size_t nlaunches;
    int first;
    rv_ktrace_stats st;
} wctx;

static int in_window(const wctx *w, uint64_t ts)
{
    return w->opts->t1 == 0 || (ts >= w->opts->t0 && ts <= w->opts->t1);
}

static void ev_begin(wctx *w)
{
    jo_puts(&w->o, w->first ? "\n  {" : ",\n  {");
    w->first = 0;
    w->st.events++;
}

static void ev_x(wctx *w, const char *cat, const char *name, uint64_t pid, int64_t tid,
                 uint64_t start, uint64_t end)
{
    ev_begin(w);
    jo_puts(&w->o, "\"ph\": \"X\", \"cat\": ");
    jo_str(&w->o, cat);
    jo_puts(&w->o, ", \"name\": ");
    jo_str(&w->o, name);
    jo_printf(&w->o, ", \"pid\": %" PRIu64 ", \"tid\": %" PRId64 ", \"ts\": ", pid, tid);
    jo_us(&w->o, start);
    jo_puts(&w->o, ", \"dur\": ");
    jo_us(&w->o, end > start ? end - start : 0);
}

static int64_t sid(uint32_t v)
{
    return v == RV_REC_NO_ID ? -1 : (int64_t)v;
}

static void args_corr(wctx *w, uint32_t corr)
{
    jo_printf(&w->o, "\"correlation\": %u", corr);
    const mslot *x = corr ? map_get(&w->ext, corr) : NULL;
    if (x)
        jo_printf(&w->o, ", \"External id\": %" PRIu64,
                  ((const rv_rec_extcorr *)x->a)->external_id);
}

static void write_api(wctx *w, const rv_rec *r)
{
    char name[160];
    rv_records_api_name(r->kind, r->aux, name, sizeof(name));
    ev_x(w, r->kind == RV_REC_DRIVER ? "cuda_driver" : "cuda_runtime", name, r->pid, r->tid,
         r->start, r->end);
    jo_printf(&w->o, ", \"args\": {\"cbid\": %u, ", r->aux);
    args_corr(w, r->correlation);
    jo_puts(&w->o, "}}");
    if (r->kind == RV_REC_DRIVER)
        w->st.driver++;
    else
        w->st.runtime++;
}

static void write_gpu(wctx *w, const rv_recset *s, const rv_rec *r, const rv_rec *api)
{
    char name[160];
    const char *cat, *nm;
    if (r->kind == RV_REC_KERNEL) {
        cat = "kernel";
        nm = rv_recset_str(s, r->name);
        if (!*nm)
            nm = "kernel";
        w->st.kernels++;
    } else if (r->kind == RV_REC_MEMCPY) {
        cat = "gpu_memcpy";
        nm = rv_records_memcpy_name(r->aux, name, sizeof(name));
        w->st.memcpys++;
    } else {
        cat = "gpu_memset";
        nm = rv_records_memset_name(r->aux, name, sizeof(name));
        w->st.memsets++;
    }
    ev_x(w, cat, nm, r->device, sid(r->stream), r->start, r->end);
    jo_puts(&w->o, ", \"args\": {");
    args_corr(w, r->correlation);
    jo_printf(&w->o, ", \"device\": %" PRId64 ", \"context\": %" PRId64 ", \"stream\": %" PRId64,
              sid(r->device), sid(r->context), sid(r->stream));
    if (r->kind == RV_REC_KERNEL) {
        jo_printf(&w->o,
                  ", \"registers per thread\": %u, \"shared memory\": %u"
                  ", \"grid\": [%d, %d, %d], \"block\": [%d, %d, %d]",
                  r->registers, r->shared_mem, r->grid[0], r->grid[1], r->grid[2], r->block[0],
                  r->block[1], r->block[2]);
    } else {
        jo_printf(&w->o, ", \"bytes\": %" PRIu64, r->bytes);
        if (r->end > r->start)
            jo_printf(&w->o, ", \"memory bandwidth (GB/s)\": %.3f",
                      (double)r->bytes / (double)(r->end - r->start));
    }
    jo_puts(&w->o, "}}");

    /* ac2g: an arrow from the launch to the GPU task, keyed by correlation. */
    if (api && r->correlation) {
        ev_begin(w);
        jo_printf(&w->o,
                  "\"ph\": \"s\", \"id\": %u, \"pid\": %u, \"tid\": %u, \"ts\": ", r->correlation,
                  api->pid, api->tid);
        jo_us(&w->o, api->start);
        jo_puts(&w->o, ", \"cat\": \"ac2g\", \"name\": \"ac2g\"}");
        ev_begin(w);
        jo_printf(&w->o, "\"ph\": \"f\", \"id\": %u, \"pid\": %u, \"tid\": %" PRId64 ", \"ts\": ",
                  r->correlation, r->device, sid(r->stream));
        jo_us(&w->o, r->start);
        jo_puts(&w->o, ", \"cat\": \"ac2g\", \"name\": \"ac2g\", \"bp\": \"e\"}");
        w->st.flows++;
    }
}

static void write_sync(wctx *w, const rv_rec *r)
{
    const mslot *dev = map_get(&w->ctxdev, r->context);
    uint32_t device = dev ? (uint32_t)(uintptr_t)dev->b : 0;
    const char *kind = rv_records_sync_name(r->aux);
    ev_x(w, "cuda_sync", kind, device, sid(r->stream), r->start, r->end);
    jo_puts(&w->o, ", \"args\": {\"cuda_sync_kind\": ");
    jo_str(&w->o, kind);
    jo_printf(&w->o, ", \"correlation\": %u, \"device\": %u, \"stream\": %" PRId64, r->correlation,
              device, sid(r->stream));
    const mslot *e = r->aux64 ? map_get(&w->events, r->aux64) : NULL;
    if (e) {
        const rv_rec_event *ev = e->a;
        jo_printf(&w->o,
                  ", \"wait_on_stream\": %" PRId64 ", \"wait_on_cuda_event_record_corr_id\": %u",
                  sid(ev->stream), ev->correlation);
    }
    jo_puts(&w->o, "}}");
    w->st.syncs++;
}

static void write_range(wctx *w, const range *g)
{
    const rv_rec *r = g->start;
    const char *nm = rv_recset_str(g->set, r->name);
    ev_x(w, "user_annotation", nm, r->pid, r->tid, r->start, g->end);
    jo_printf(&w->o, ", \"args\": {\"nvtx_id\": %u}}", r->aux);
    w->st.ranges++;

    /* The GPU span of the work launched from this thread inside the range. */
    launch key = {.tid = r->tid, .api_start = r->start};
    size_t lo = 0, hi = w->nlaunches;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (cmp_launch(&w->launches[mid], &key) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    uint64_t gs = UINT64_MAX, ge = 0;
    uint32_t device = 0, stream = 0;
    for (size_t i = lo; i < w->nlaunches; i++) {
        const launch *l = &w->launches[i];
        if (l->tid != r->tid || l->api_start > g->end)
            break;
        if (l->gpu_start < gs) {
            gs = l->gpu_start;
            device = l->device;
            stream = l->stream;
        }
        if (l->gpu_end > ge)
            ge = l->gpu_end;
    }
    if (ge == 0)
        return;
    ev_x(w, "gpu_user_annotation", nm, device, sid(stream), gs, ge);
    jo_puts(&w->o, ", \"args\": {}}");
    w->st.gpu_ranges++;
}

static void write_overhead(wctx *w, const rv_rec *r)
{
    uint64_t pid = r->pid, tid = r->tid;
    ev_x(w, "overhead", rv_records_overhead_name(r->aux), pid, (int64_t)tid, r->start, r->end);
    jo_printf(&w->o, ", \"args\": {\"correlation\": %u}}", r->correlation);
    w->st.overheads++;
}

static void write_devices(wctx *w, const rv_recset *sets, const rv_meta *m)
{
    map seen;
    int first = 1;
    jo_puts(&w->o, ",\n\"deviceProperties\": [");
    if (map_init(&seen, 64) < 0) {
        w->o.failed = 1;
        return;
    }
    for (const rv_recset *s = sets; s; s = s->next) {
        const rv_rec_device *d = s->devices.items;
        for (size_t i = 0; i < s->devices.n; i++) {
            if (map_get(&seen, d[i].id + 1ull))
                continue;
            map_put(&seen, d[i].id + 1ull, &d[i], NULL);
            jo_puts(&w->o, first ? "\n  {" : ",\n  {");
            first = 0;
            jo_printf(&w->o, "\"id\": %u, \"name\": ", d[i].id);
            jo_str(&w->o, rv_recset_str(s, d[i].name));
            jo_printf(&w->o,
                      ", \"totalGlobalMem\": %" PRIu64 ", \"computeMajor\": %u"
                      ", \"computeMinor\": %u, \"maxThreadsPerBlock\": %u"
                      ", \"maxThreadsPerMultiprocessor\": %u, \"regsPerBlock\": %u"
                      ", \"regsPerMultiprocessor\": %u, \"warpSize\": %u"
                      ", \"sharedMemPerBlock\": %u, \"sharedMemPerMultiprocessor\": %u"
                      ", \"numSms\": %u, \"l2CacheSize\": %u, \"clockRateKHz\": %u}",
                      d[i].global_mem, d[i].cc_major, d[i].cc_minor, d[i].max_threads_per_block,
                      d[i].max_warps_per_sm * (d[i].warp_size ? d[i].warp_size : 32),
                      d[i].regs_per_block, d[i].regs_per_sm, d[i].warp_size, d[i].shmem_per_block,
                      d[i].shmem_per_sm, d[i].num_sms, d[i].l2_bytes, d[i].core_clock_khz);
        }
    }
    /* No CUPTI device record (capture started late): fall back to NVML. */
    for (int i = 0; first && i < m->ngpus; i++) {
        jo_puts(&w->o, i ? ",\n  {" : "\n  {");
        jo_printf(&w->o, "\"id\": %d, \"name\": ", m->gpus[i].index);
        jo_str(&w->o, m->gpus[i].name);
        jo_printf(&w->o, ", \"totalGlobalMem\": %" PRIu64 "}", m->gpus[i].total_mem);
    }
    free(seen.slots);
    jo_puts(&w->o, "\n]");
}

static const char *gpu_name(const rv_recset *sets, const rv_meta *m)
{
    if (m->gpu[0])
        return m->gpu;
    for (const rv_recset *s = sets; s; s = s->next)
        if (s->devices.n)
            return rv_recset_str(s, ((const rv_rec_device *)s->devices.items)[0].name);
    return "";
}

static void write_clock(jout *o, const char *name, const rv_clock_triple *c)
{
    jo_printf(o,
              "\"%s\": {\"cupti_ns\": %" PRIu64 ", \"realtime_ns\": %" PRIu64
              ", \"monotonic_ns\": %" PRIu64 "}",
              name, c->cupti_ns, c->realtime_ns, c->monotonic_ns);
}

static void write_meta(wctx *w, const rv_recset *sets, const rv_meta *m)
{
    jout *o = &w->o;
    int g = 0; /* the GPU this process most likely used */
    if (m->local_rank >= 0 && m->local_rank < m->ngpus)
        g = m->local_rank;
    jo_printf(o, ",\n\"distributedInfo\": {\"rank\": %d, \"world_size\": %d, \"backend\": ",
              m->rank >= 0 ? m->rank : 0, m->world_size > 0 ? m->world_size : 1);
    jo_str(o, m->backend[0] ? m->backend : "nccl");
    jo_puts(o, "},\n\"reverie\": {\"format\": \"reverie-collector\", \"version\": 1, \"gpu\": ");
    jo_str(o, gpu_name(sets, m));
    jo_puts(o, ", \"cpu\": ");
    jo_str(o, m->cpu);
    jo_puts(o, ", \"driver\": ");
    jo_str(o, m->driver);
    jo_puts(o, ", \"cuda\": ");
    jo_str(o, m->cuda);
    jo_puts(o, ", \"framework\": ");
    jo_str(o, m->framework);
    jo_puts(o, ", \"job\": ");
    jo_str(o, m->job);
    jo_puts(o, ", \"hostname\": ");
    jo_str(o, m->hostname);
    jo_printf(o, ", \"pid\": %d, \"rank\": %d, \"local_rank\": %d, \"world_size\": %d", m->pid,
              m->rank, m->local_rank, m->world_size);
    if (m->ngpus > 0) {
        const rv_meta_gpu *p = &m->gpus[g];
        jo_printf(o,
                  ", \"power_limit_w\": %.1f, \"power_limit_range_w\": [%.1f, %.1f]"
                  ", \"power_default_w\": %.1f, \"sm_clock_max_mhz\": %d"
                  ", \"mem_clock_max_mhz\": %d",
                  p->power_limit_w, p->power_min_w, p->power_max_w, p->power_default_w,
                  p->sm_clock_max_mhz, p->mem_clock_max_mhz);
    }
    jo_puts(o, ", \"clocks\": {");
    write_clock(o, "start", &m->start);
    jo_puts(o, ", ");
    write_clock(o, "end", &m->end);
    jo_printf(o, "}, \"dropped_records\": %" PRIu64, m->dropped_records);
    if (w->opts->t1) {
        jo_puts(o, ", \"window_ns\": [");
        jo_printf(o, "%" PRIu64 ", %" PRIu64 "]", w->opts->t0, w->opts->t1);
    }
    if (w->opts->window_desc) {
        jo_puts(o, ", \"window\": ");
        jo_str(o, w->opts->window_desc);
    }
    jo_puts(o, "}");
}

static int build_indexes(wctx *w, const rv_recset *sets)
{
    size_t nrec = 0, next = 0, nev = 0;
    int rc;
    for (const rv_recset *s = sets; s; s = s->next) {
        nrec += s->recs.n;
        next += s->ext.n;
        nev += s->events.n;
    }
    if ((rc = map_init(&w->api, nrec)) < 0 || (rc = map_init(&w->ext, next)) < 0 ||
        (rc = map_init(&w->events, nev)) < 0 || (rc = map_init(&w->marks, nrec)) < 0 ||
        (rc = map_init(&w->ctxdev, 256)) < 0)
        return rc;
    for (const rv_recset *s = sets; s; s = s->next) {
        const rv_rec *r = rv_recset_recs(s);
        for (size_t i = 0; i < s->recs.n; i++) {
            if ((r[i].kind == RV_REC_RUNTIME || r[i].kind == RV_REC_DRIVER) && r[i].correlation)
                map_put(&w->api, r[i].correlation, &r[i], s);
            else if (r[i].kind == RV_REC_MARKER_START)
                map_put(&w->marks, r[i].aux + 1ull, &r[i], s);
            else if (is_gpu(r[i].kind) && r[i].context != RV_REC_NO_ID && w->ctxdev.n < 100)
                map_put(&w->ctxdev, r[i].context, &r[i], (const void *)(uintptr_t)r[i].device);
        }
        const rv_rec_extcorr *x = s->ext.items;
        for (size_t i = 0; i < s->ext.n; i++)
            map_put(&w->ext, x[i].correlation, &x[i], s);
        const rv_rec_event *e = s->events.items;
        for (size_t i = 0; i < s->events.n; i++)
            if (e[i].sync_id)
                map_put(&w->events, e[i].sync_id, &e[i], s);
    }
    /* Pair range ends with their starts; collect launches for GPU spans. */
    w->ranges = calloc(nrec ? nrec : 1, sizeof(range));
    w->launches = calloc(nrec ? nrec : 1, sizeof(launch));
    if (!w->ranges || !w->launches)
        return RV_ERR_NOMEM;
    for (const rv_recset *s = sets; s; s = s->next) {
        const rv_rec *r = rv_recset_recs(s);
        for (size_t i = 0; i < s->recs.n; i++) {
            if (r[i].kind == RV_REC_MARKER_END) {
                const mslot *st = map_get(&w->marks, r[i].aux + 1ull);
                if (st && in_window(w, ((const rv_rec *)st->a)->start)) {
                    range *g = &w->ranges[w->nranges++];
                    g->start = st->a;
                    g->set = st->b;
                    g->end = r[i].start;
                }
            } else if (is_gpu(r[i].kind) && r[i].correlation) {
                const mslot *a = map_get(&w->api, r[i].correlation);
                if (!a || !in_window(w, ((const rv_rec *)a->a)->start))
                    continue;
                const rv_rec *api = a->a;
                launch *l = &w->launches[w->nlaunches++];
                l->tid = api->tid;
                l->api_start = api->start;
                l->gpu_start = r[i].start;
                l->gpu_end = r[i].end;
                l->device = r[i].device;
                l->stream = r[i].stream;
            }
        }
    }
    qsort(w->launches, w->nlaunches, sizeof(launch), cmp_launch);
    return 0;
}

int rv_ktrace_write(const rv_recset *sets, const rv_meta *m, const rv_ktrace_opts *opts,
                    uint8_t **out, size_t *out_len, rv_ktrace_stats *stats, rv_error *err)
{
    rv_ktrace_opts dflt = {0};
    wctx *w = calloc(1, sizeof(*w));
    int rc;
    *out = NULL;
    *out_len = 0;
    if (!w)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory for the trace writer");
    w->opts = opts ? opts : &dflt;
    w->first = 1;
    w->o.plain = w->opts->plain;
    rv_buf_init(&w->o.out, w->opts->max_bytes ? w->opts->max_bytes : (size_t)2 << 30);
    if (!w->o.plain) {
        /* windowBits 15 + 16: a gzip wrapper, so `zcat` and browsers read it. */
        if (deflateInit2(&w->o.z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "deflateInit2 failed");
            goto out;
        }
        w->o.zinit = 1;
    }
    if ((rc = build_indexes(w, sets)) < 0) {
        rv_error_set(err, rc, -1, -1, "out of memory indexing the collected records");
        goto out;
    }

    jo_puts(&w->o, "{\n\"schemaVersion\": 1");
    write_devices(w, sets, m);
    write_meta(w, sets, m);
    jo_puts(&w->o, ",\n\"traceEvents\": [");
    ev_begin(w);
    jo_printf(&w->o,
              "\"ph\": \"M\", \"name\": \"process_name\", \"pid\": %d, \"tid\": 0, "
              "\"args\": {\"name\": \"reverie-collector host process\"}}",
              m->pid);
    for (const rv_recset *s = sets; s; s = s->next) {
        const rv_rec *r = rv_recset_recs(s);
        for (size_t i = 0; i < s->recs.n && !w->o.failed; i++) {
            switch (r[i].kind) {
            case RV_REC_RUNTIME:
            case RV_REC_DRIVER:
                if (in_window(w, r[i].start))
                    write_api(w, &r[i]);
                break;
            case RV_REC_KERNEL:
            case RV_REC_MEMCPY:
            case RV_REC_MEMSET: {
                const mslot *a = r[i].correlation ? map_get(&w->api, r[i].correlation) : NULL;
                const rv_rec *api = a ? a->a : NULL;
                if (api ? in_window(w, api->start) : in_window(w, r[i].start))
                    write_gpu(w, s, &r[i], api);
                break;
            }
            case RV_REC_SYNC:
                if (in_window(w, r[i].start))
                    write_sync(w, &r[i]);
                break;
            case RV_REC_OVERHEAD:
                if (in_window(w, r[i].start))
                    write_overhead(w, &r[i]);
                break;
            default: break;
            }
        }
    }
    for (size_t i = 0; i < w->nranges && !w->o.failed; i++)
        write_range(w, &w->ranges[i]);
    jo_puts(&w->o, "\n]\n}\n");
    if (w->o.failed || jo_drain(&w->o, 1) < 0) {
        rc = rv_error_set(err, RV_ERR_LIMIT, -1, (int64_t)w->st.events,
                          "trace output passed its cap of %zu bytes (or ran out of memory)",
                          w->o.out.max);
        goto out;
    }
    *out = (uint8_t *)rv_buf_take(&w->o.out, out_len);
    if (stats)
        *stats = w->st;
    rc = 0;
out:
    if (w->o.zinit)
        deflateEnd(&w->o.z);
    rv_buf_free(&w->o.out);
    free(w->api.slots);
    free(w->ext.slots);
    free(w->events.slots);
    free(w->marks.slots);
    free(w->ctxdev.slots);
    free(w->ranges);
    free(w->launches);
    free(w);
    return rc;
}
