#include "reader/rv_snapshot.h"
#include "util/rv_buf.h"
#include "util/rv_mem.h"
#include "trace/rv_kname.h"
#include "trace/rv_shapes.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define FLAG_ZLIB 1u
/* Smallest possible encoding of one event: one byte per per-event column
 * (at most 24 columns, but constant columns take none). Only used as a
 * sanity bound together with the body length. */
#define NCOLS 24

/* ---- writing ------------------------------------------------------------ */

/* The body is written into one rv_buf capped at RV_SNAPSHOT_MAX_RAW; its
 * error is sticky, so the encoder writes on and checks once at the end. */

/* Unsigned LEB128: a varint takes at most 10 bytes, so room is made once
 * and the bytes are written in place. */
static void wb_u(rv_buf *b, uint64_t v)
{
    if (b->err || (rv_buf_room(b) < 10 && !rv_buf_reserve(b, 10)))
        return;
    uint8_t *p = (uint8_t *)b->p + b->len;
    size_t n = 0;
    while (v >= 0x80) {
        p[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    p[n++] = (uint8_t)v;
    rv_buf_commit(b, n);
}

static inline uint64_t zz(int64_t v)
{
    return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
}

static inline int64_t unzz(uint64_t v)
{
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

static void wb_s(rv_buf *b, int64_t v)
{
    wb_u(b, zz(v));
}

static void wb_bytes(rv_buf *b, const void *p, size_t n)
{
    rv_buf_add(b, p, n); /* a failure stays in b->err */
}

static void put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static void put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t get_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t get_le64(const uint8_t *p)
{
    return (uint64_t)get_le32(p) | (uint64_t)get_le32(p + 4) << 32;
}

/* Writes one event column: mode 0 + value when every event has the same
 * value, else mode 1 + one varint per event. GET(e) reads the field as
 * int64_t; DELTA codes each value as the difference to the previous one. */
#define ENC_COL(b, t, GET, DELTA)                                                                  \
    do {                                                                                           \
        size_t n_ = (t)->nevents;                                                                  \
        int same_ = 1;                                                                             \
        for (size_t i_ = 1; i_ < n_ && same_; i_++) {                                              \
            const rv_event *e = &(t)->events[i_];                                                  \
            int64_t v1_ = (GET);                                                                   \
            e = &(t)->events[0];                                                                   \
            same_ = v1_ == (GET);                                                                  \
        }                                                                                          \
        if (same_ && !(DELTA)) {                                                                   \
            const rv_event *e = &(t)->events[0];                                                   \
            wb_u(b, 0);                                                                            \
            wb_s(b, n_ ? (GET) : 0);                                                               \
        } else {                                                                                   \
            int64_t prev_ = 0;                                                                     \
            wb_u(b, 1);                                                                            \
            for (size_t i_ = 0; i_ < n_; i_++) {                                                   \
                const rv_event *e = &(t)->events[i_];                                              \
                int64_t v_ = (GET);                                                                \
                wb_s(b, (DELTA) ? (int64_t)((uint64_t)v_ - (uint64_t)prev_) : v_);                 \
                prev_ = v_;                                                                        \
            }                                                                                      \
        }                                                                                          \
    } while (0)

/* Sections after the event columns, each optional for readers: the op
 * shapes (rv_shapes.h), then the GPU memory events. */
static void encode_extras(const rv_trace *t, rv_buf *b)
{
    wb_u(b, (uint64_t)t->shapes_source);
    wb_u(b, (uint64_t)t->shapes_truncated);
    wb_u(b, t->nop_shapes);
    wb_u(b, t->nshape_args);
    wb_u(b, t->nshape_ints);
    int64_t prev = -1;
    for (size_t i = 0; i < t->nop_shapes; i++) {
        wb_u(b, (uint64_t)(t->op_shapes[i].event - prev));
        prev = t->op_shapes[i].event;
        wb_u(b, t->op_shapes[i].nargs);
    }
    for (size_t i = 0; i < t->nshape_args; i++) {
        const rv_shape_arg *a = &t->shape_args[i];
        wb_s(b, a->ndims);
        wb_s(b, a->nvals);
        wb_u(b, a->dims);
        wb_u(b, a->vals);
        wb_u(b, a->ptype);
        wb_u(b, a->is_out);
        wb_u(b, a->itemsize);
    }
    for (size_t i = 0; i < t->nshape_ints; i++)
        wb_s(b, t->shape_ints[i]);
    wb_u(b, t->nmem);
    wb_u(b, (uint64_t)t->mem_truncated);
    int64_t pts = 0;
    for (size_t i = 0; i < t->nmem; i++) {
        const rv_mem_sample *m = &t->mem[i];
        wb_s(b, (int64_t)((uint64_t)m->ts_ns - (uint64_t)pts));
        pts = m->ts_ns;
        wb_s(b, m->bytes);
        wb_s(b, m->allocated);
        wb_s(b, m->reserved);
        wb_s(b, m->device);
    }
    /* Version 2: the persistent memory an execution trace showed. */
    wb_u(b, (uint64_t)(t->mem_model != 0));
    wb_s(b, t->mem_weights);
    wb_s(b, t->mem_gradients);
    wb_s(b, t->mem_optimizer_state);
    wb_u(b, t->mem_optimizer);
}

static void encode_body(const rv_trace *t, rv_buf *b)
{
    uint32_t nstr = t->strings.count;
    wb_u(b, t->nevents);
    wb_u(b, nstr);
    wb_u(b, t->ndevices);

    wb_s(b, t->rank);
    wb_s(b, t->world_size);
    wb_u(b, t->backend);
    wb_u(b, t->source_format);
    wb_u(b, t->platform_gpu);
    wb_u(b, t->platform_cpu);
    wb_u(b, t->platform_driver);
    wb_u(b, t->platform_cuda);
    wb_u(b, t->platform_framework);
    wb_u(b, t->job);
    uint64_t bits;
    memcpy(&bits, &t->power_limit_w, sizeof(bits));
    uint8_t le[8];
    put_le64(le, bits);
    wb_bytes(b, le, 8);
    wb_s(b, t->base_time_ns);
    wb_u(b, t->skipped_events);
    wb_u(b, t->input_bytes);

    for (uint32_t id = 1; id < nstr; id++) {
        const char *s = rv_strtab_get(&t->strings, id);
        size_t n = strlen(s);
        wb_u(b, n);
        wb_bytes(b, s, n);
    }
    for (size_t i = 0; i < t->ndevices; i++) {
        const rv_device *d = &t->devices[i];
        wb_s(b, d->id);
        wb_u(b, d->name);
        wb_s(b, d->num_sms);
        wb_s(b, d->compute_major);
        wb_s(b, d->compute_minor);
        wb_s(b, d->total_mem);
    }

    ENC_COL(b, t, e->ts_ns, 1);
    ENC_COL(b, t, e->dur_ns, 0);
    ENC_COL(b, t, e->correlation, 0);
    ENC_COL(b, t, e->external_id, 0);
    ENC_COL(b, t, e->bytes, 0);
    ENC_COL(b, t, e->wait_event_corr, 0);
    ENC_COL(b, t, (int64_t)e->name, 0);
    ENC_COL(b, t, (int64_t)e->pid, 0);
    ENC_COL(b, t, (int64_t)e->tid, 0);
    ENC_COL(b, t, e->device, 0);
    ENC_COL(b, t, e->stream, 0);
    ENC_COL(b, t, e->wait_stream, 0);
    ENC_COL(b, t, e->grid[0], 0);
    ENC_COL(b, t, e->grid[1], 0);
    ENC_COL(b, t, e->grid[2], 0);
    ENC_COL(b, t, e->block[0], 0);
    ENC_COL(b, t, e->block[1], 0);
    ENC_COL(b, t, e->block[2], 0);
    ENC_COL(b, t, e->registers, 0);
    ENC_COL(b, t, e->shared_mem, 0);
    ENC_COL(b, t, e->cat, 0);
    ENC_COL(b, t, e->sync_kind, 0);
    /* Added after version 1's columns; readers take it when present. */
    ENC_COL(b, t, e->in_type, 0);
    /* Then the collectives' process group; seq and peer are stored plus
     * one, so that 0 (a column's constant default) means none. */
    ENC_COL(b, t, (int64_t)e->pg, 0);
    ENC_COL(b, t, (int64_t)e->pg_ranks, 0);
    ENC_COL(b, t, (int64_t)e->seq + 1, 0);
    ENC_COL(b, t, (int64_t)e->peer + 1, 0);
    /* Then the ops' shapes and memory sections (decode_extras). */
    encode_extras(t, b);
}

int rv_snapshot_encode(const rv_trace *t, int level, uint8_t **out, size_t *out_len, rv_error *err)
{
    rv_buf body = RV_BUF_INIT(RV_SNAPSHOT_MAX_RAW);
    uint8_t *res = NULL;
    int rc;

    *out = NULL;
    *out_len = 0;
    encode_body(t, &body);
    if (body.err) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1,
                          "snapshot: body of %zu events exceeds memory or the %llu-byte cap",
                          t->nevents, (unsigned long long)RV_SNAPSHOT_MAX_RAW);
        goto out;
    }
    size_t cap = RV_SNAPSHOT_HEADER_LEN + (level > 0 ? compressBound(body.len) : body.len);
    res = malloc(cap);
    if (!res) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "snapshot: out of memory (%zu bytes)", cap);
        goto out;
    }
    size_t plen;
    uint32_t flags = 0;
    if (level > 0) {
        uLongf dl = (uLongf)(cap - RV_SNAPSHOT_HEADER_LEN);
        int zrc = compress2(res + RV_SNAPSHOT_HEADER_LEN, &dl, (const Bytef *)body.p, body.len,
                            level > 9 ? 9 : level);
        if (zrc != Z_OK) {
            rc = rv_error_set(err, RV_ERR_INTERNAL, -1, -1, "snapshot: zlib compress failed (%d)",
                              zrc);
            goto out;
        }
        plen = dl;
        flags |= FLAG_ZLIB;
    } else {
        memcpy(res + RV_SNAPSHOT_HEADER_LEN, body.p, body.len);
        plen = body.len;
    }
    memcpy(res, "RVSN", 4);
    put_le32(res + 4, RV_SNAPSHOT_VERSION);
    put_le32(res + 8, flags);
    put_le32(res + 12, (uint32_t)crc32(0L, res + RV_SNAPSHOT_HEADER_LEN, (uInt)plen));
    put_le64(res + 16, body.len);
    put_le64(res + 24, plen);
    put_le64(res + 32, 0);
    *out = res;
    *out_len = RV_SNAPSHOT_HEADER_LEN + plen;
    res = NULL;
    rc = 0;
out:
    rv_buf_free(&body);
    free(res);
    return rc;
}

/* ---- reading ------------------------------------------------------------ */

typedef struct rbuf {
    const uint8_t *p, *end, *start;
    int bad;
} rbuf;

static inline uint64_t rb_u(rbuf *r)
{
    if (r->p < r->end && *r->p < 0x80)
        return *r->p++;
    uint64_t v = 0;
    for (int shift = 0; shift < 64; shift += 7) {
        if (r->p >= r->end) {
            r->bad = 1;
            return 0;
        }
        uint8_t c = *r->p++;
        v |= (uint64_t)(c & 0x7f) << shift;
        if (!(c & 0x80))
            return v;
    }
    r->bad = 1;
    return 0;
}

static inline int64_t rb_s(rbuf *r)
{
    return unzz(rb_u(r));
}

static int64_t rb_off(const rbuf *r)
{
    return (int64_t)(r->p - r->start);
}

/* Decodes one column into events[]; CHECK(v) must hold for every value, and
 * SET(e, v) stores it. */
#define DEC_COL(r, t, name_, DELTA, CHECK, SET)                                                    \
    do {                                                                                           \
        uint64_t mode_ = rb_u(r);                                                                  \
        size_t n_ = (t)->nevents;                                                                  \
        if (mode_ == 0 && !(DELTA)) {                                                              \
            int64_t v = rb_s(r);                                                                   \
            if ((r)->bad || (n_ && !(CHECK)))                                                      \
                return bad_col(r, err, name_, 0);                                                  \
            /* Events start zeroed (calloc): a constant 0 needs no pass. */                        \
            for (size_t i_ = 0; v != 0 && i_ < n_; i_++) {                                         \
                rv_event *e = &(t)->events[i_];                                                    \
                SET;                                                                               \
            }                                                                                      \
        } else if (mode_ == 1) {                                                                   \
            int64_t prev_ = 0;                                                                     \
            for (size_t i_ = 0; i_ < n_; i_++) {                                                   \
                int64_t v = rb_s(r);                                                               \
                if (DELTA)                                                                         \
                    v = (int64_t)((uint64_t)prev_ + (uint64_t)v);                                  \
                if ((r)->bad || !(CHECK))                                                          \
                    return bad_col(r, err, name_, i_);                                             \
                rv_event *e = &(t)->events[i_];                                                    \
                SET;                                                                               \
                prev_ = v;                                                                         \
            }                                                                                      \
        } else {                                                                                   \
            return bad_col(r, err, name_, 0);                                                      \
        }                                                                                          \
    } while (0)

static int bad_col(const rbuf *r, rv_error *err, const char *col, size_t idx)
{
    if (r->bad)
        return rv_error_placed(
            err, rv_error_set(err, RV_ERR_PARSE, rb_off(r), (int64_t)idx,
                              "snapshot: body truncated in column '%s' at event %zu", col, idx));
    return rv_error_placed(err, rv_error_set(err, RV_ERR_PARSE, rb_off(r), (int64_t)idx,
                                             "snapshot: bad value in column '%s' at event %zu", col,
                                             idx));
}

#define IN32(v) ((v) >= INT32_MIN && (v) <= INT32_MAX)

static int decode_events(rbuf *r, rv_trace *t, uint32_t nstr, rv_error *err)
{
    DEC_COL(r, t, "ts", 1, 1, e->ts_ns = v);
    DEC_COL(r, t, "dur", 0, v >= 0, e->dur_ns = v);
    DEC_COL(r, t, "correlation", 0, 1, e->correlation = v);
    DEC_COL(r, t, "external_id", 0, 1, e->external_id = v);
    DEC_COL(r, t, "bytes", 0, 1, e->bytes = v);
    DEC_COL(r, t, "wait_event_corr", 0, 1, e->wait_event_corr = v);
    DEC_COL(r, t, "name", 0, v >= 0 && v < nstr, e->name = (uint32_t)v);
    DEC_COL(r, t, "pid", 0, v >= 0 && v < nstr, e->pid = (uint32_t)v);
    DEC_COL(r, t, "tid", 0, v >= 0 && v < nstr, e->tid = (uint32_t)v);
    DEC_COL(r, t, "device", 0, IN32(v), e->device = (int32_t)v);
    DEC_COL(r, t, "stream", 0, IN32(v), e->stream = (int32_t)v);
    DEC_COL(r, t, "wait_stream", 0, IN32(v), e->wait_stream = (int32_t)v);
    DEC_COL(r, t, "grid.x", 0, IN32(v), e->grid[0] = (int32_t)v);
    DEC_COL(r, t, "grid.y", 0, IN32(v), e->grid[1] = (int32_t)v);
    DEC_COL(r, t, "grid.z", 0, IN32(v), e->grid[2] = (int32_t)v);
    DEC_COL(r, t, "block.x", 0, IN32(v), e->block[0] = (int32_t)v);
    DEC_COL(r, t, "block.y", 0, IN32(v), e->block[1] = (int32_t)v);
    DEC_COL(r, t, "block.z", 0, IN32(v), e->block[2] = (int32_t)v);
    DEC_COL(r, t, "registers", 0, IN32(v), e->registers = (int32_t)v);
    DEC_COL(r, t, "shared_mem", 0, IN32(v), e->shared_mem = (int32_t)v);
    DEC_COL(r, t, "cat", 0, v >= 0 && v < RV_CAT_COUNT, e->cat = (uint8_t)v);
    DEC_COL(r, t, "sync_kind", 0, v >= 0 && v <= RV_SYNC_WAIT_EVENT, e->sync_kind = (uint8_t)v);
    /* Snapshots written before the ops' input types end here. */
    if (r->p != r->end)
        DEC_COL(r, t, "in_type", 0, v >= 0 && v < RV_PT_COUNT, e->in_type = (uint8_t)v);
    for (size_t i = 0; i < t->nevents; i++)
        t->events[i].seq = t->events[i].peer = RV_NONE;
    /* Snapshots written before the process groups end here. */
    if (r->p != r->end) {
        DEC_COL(r, t, "pg", 0, v >= 0 && v < nstr, e->pg = (uint32_t)v);
        DEC_COL(r, t, "pg_ranks", 0, v >= 0 && v < nstr, e->pg_ranks = (uint32_t)v);
        DEC_COL(r, t, "seq", 0, v >= 0 && v <= INT32_MAX, e->seq = (int32_t)(v - 1));
        DEC_COL(r, t, "peer", 0, v >= 0 && v <= INT32_MAX, e->peer = (int32_t)(v - 1));
    }
    return 0;
}

static int bad_extra(const rbuf *r, rv_error *err, const char *what)
{
    return rv_error_set(err, RV_ERR_PARSE, rb_off(r), -1, "snapshot: %s %s", what,
                        r->bad ? "truncated" : "is bad");
}

/* The sections encode_extras writes, every count bounded by the bytes
 * left (each item costs at least one) and every index checked. */
static int decode_extras(rbuf *r, rv_trace *t, uint32_t version, rv_error *err)
{
    size_t left = (size_t)(r->end - r->p);
    uint64_t src = rb_u(r), trunc = rb_u(r), nops = rb_u(r), nargs = rb_u(r), nints = rb_u(r);
    if (r->bad || src > RV_SHAPES_ET || trunc > 1 || nops > left || nargs > left || nints > left)
        return bad_extra(r, err, "shapes header");
    t->shapes_source = (int)src;
    t->shapes_truncated = (int)trunc;
    t->op_shapes = malloc((size_t)(nops + 1) * sizeof(*t->op_shapes));
    t->shape_args = malloc((size_t)(nargs + 1) * sizeof(*t->shape_args));
    t->shape_ints = malloc((size_t)(nints + 1) * sizeof(*t->shape_ints));
    if (!t->op_shapes || !t->shape_args || !t->shape_ints)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "snapshot: out of memory for shapes");
    t->cap_op_shapes = (size_t)nops + 1;
    t->cap_shape_args = (size_t)nargs + 1;
    t->cap_shape_ints = (size_t)nints + 1;
    int64_t ev = -1;
    uint64_t first = 0;
    for (uint64_t i = 0; i < nops; i++) {
        uint64_t d = rb_u(r), na = rb_u(r);
        if (r->bad || d == 0 || d > t->nevents || (uint64_t)(ev + (int64_t)d) >= t->nevents ||
            na > nargs - first)
            return bad_extra(r, err, "op shape");
        ev += (int64_t)d;
        t->op_shapes[i] = (rv_op_shape){(int32_t)ev, (uint32_t)first, (uint32_t)na};
        first += na;
    }
    if (first != nargs)
        return bad_extra(r, err, "op shape argument count");
    t->nop_shapes = (size_t)nops;
    for (uint64_t i = 0; i < nargs; i++) {
        int64_t nd = rb_s(r), nv = rb_s(r);
        uint64_t dims = rb_u(r), vals = rb_u(r), pt = rb_u(r), out = rb_u(r), isz = rb_u(r);
        if (r->bad || nd < -1 || nv < -1 || nd > 64 || nv > 64 || pt >= RV_PT_COUNT || out > 1 ||
            isz > 255 || (nd >= 0 && dims + (uint64_t)nd > nints) ||
            (nv >= 0 && vals + (uint64_t)nv > nints))
            return bad_extra(r, err, "shape argument");
        t->shape_args[i] = (rv_shape_arg){(int32_t)nd, (int32_t)nv,  (uint32_t)dims, (uint32_t)vals,
                                          (uint8_t)pt, (uint8_t)out, (uint8_t)isz,   0};
    }
    t->nshape_args = (size_t)nargs;
    for (uint64_t i = 0; i < nints; i++)
        t->shape_ints[i] = rb_s(r);
    if (r->bad)
        return bad_extra(r, err, "shape values");
    t->nshape_ints = (size_t)nints;
    if (r->p == r->end)
        return 0;
    left = (size_t)(r->end - r->p);
    uint64_t nmem = rb_u(r), mtrunc = rb_u(r);
    if (r->bad || nmem > left || nmem > RV_TRACE_MAX_MEM || mtrunc > 1)
        return bad_extra(r, err, "memory events header");
    t->mem_truncated = (int)mtrunc;
    int64_t ts = 0;
    for (uint64_t i = 0; i < nmem; i++) {
        rv_mem_sample m = {0};
        ts = (int64_t)((uint64_t)ts + (uint64_t)rb_s(r));
        m.ts_ns = ts;
        m.bytes = rb_s(r);
        m.allocated = rb_s(r);
        m.reserved = rb_s(r);
        int64_t dev = rb_s(r);
        if (r->bad || !IN32(dev))
            return bad_extra(r, err, "memory event");
        m.device = (int32_t)dev;
        if (rv_trace_add_mem(t, &m) < 0)
            return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "snapshot: out of memory");
    }
    if (version < 2)
        return 0;
    uint64_t model = rb_u(r), opt;
    int64_t w = rb_s(r), g = rb_s(r), st = rb_s(r);
    opt = rb_u(r);
    if (r->bad || model > 1 || w < RV_NONE || g < RV_NONE || st < RV_NONE ||
        opt >= t->strings.count)
        return bad_extra(r, err, "memory model");
    t->mem_model = (int)model;
    t->mem_weights = w;
    t->mem_gradients = g;
    t->mem_optimizer_state = st;
    t->mem_optimizer = (uint32_t)opt;
    return 0;
}

static int decode_body(const uint8_t *body, size_t len, rv_trace *t, uint32_t version,
                       rv_error *err)
{
    rbuf r = {body, body + len, body, 0};
    uint64_t nev = rb_u(&r), nstr = rb_u(&r), ndev = rb_u(&r);
    if (r.bad)
        return rv_error_set(err, RV_ERR_PARSE, rb_off(&r), -1, "snapshot: body truncated");
    /* Every event costs at least one byte in the delta-coded ts column, and
     * every string and device at least one byte: bound counts by length
     * before allocating. */
    if (nev > RV_TRACE_MAX_EVENTS || nev > len)
        return rv_error_set(err, RV_ERR_PARSE, 0, -1, "snapshot: event count %llu is impossible",
                            (unsigned long long)nev);
    if (nstr == 0 || nstr > len + 1 || nstr > UINT32_MAX)
        return rv_error_set(err, RV_ERR_PARSE, 0, -1, "snapshot: string count %llu is impossible",
                            (unsigned long long)nstr);
    if (ndev > len || ndev > RV_TRACE_MAX_DEVICES)
        return rv_error_set(err, RV_ERR_PARSE, 0, -1, "snapshot: device count %llu is impossible",
                            (unsigned long long)ndev);

    int64_t rank = rb_s(&r), world = rb_s(&r);
    uint64_t sid[8];
    for (int i = 0; i < 8; i++)
        sid[i] = rb_u(&r);
    if (r.bad || r.end - r.p < 8)
        return rv_error_set(err, RV_ERR_PARSE, rb_off(&r), -1, "snapshot: metadata truncated");
    uint64_t bits = get_le64(r.p);
    r.p += 8;
    int64_t base = rb_s(&r);
    uint64_t skipped = rb_u(&r), input_bytes = rb_u(&r);
    if (r.bad || !IN32(rank) || !IN32(world))
        return rv_error_set(err, RV_ERR_PARSE, rb_off(&r), -1, "snapshot: bad metadata");
    for (int i = 0; i < 8; i++)
        if (sid[i] >= nstr)
            return rv_error_set(err, RV_ERR_PARSE, rb_off(&r), -1,
                                "snapshot: metadata string id %llu out of range (%llu strings)",
                                (unsigned long long)sid[i], (unsigned long long)nstr);
    t->rank = (int32_t)rank;
    t->world_size = (int32_t)world;
    t->backend = (uint32_t)sid[0];
    t->source_format = (uint32_t)sid[1];
    t->platform_gpu = (uint32_t)sid[2];
    t->platform_cpu = (uint32_t)sid[3];
    t->platform_driver = (uint32_t)sid[4];
    t->platform_cuda = (uint32_t)sid[5];
    t->platform_framework = (uint32_t)sid[6];
    t->job = (uint32_t)sid[7];
    memcpy(&t->power_limit_w, &bits, sizeof(bits));
    t->base_time_ns = base;
    t->skipped_events = (size_t)skipped;
    t->input_bytes = (size_t)input_bytes;

    for (uint64_t id = 1; id < nstr; id++) {
        uint64_t n = rb_u(&r);
        if (r.bad || n > (uint64_t)(r.end - r.p))
            return rv_error_set(err, RV_ERR_PARSE, rb_off(&r), -1,
                                "snapshot: string %llu truncated", (unsigned long long)id);
        if (memchr(r.p, '\0', n))
            return rv_error_set(err, RV_ERR_PARSE, rb_off(&r), -1,
                                "snapshot: string %llu contains a NUL byte",
                                (unsigned long long)id);
        uint32_t got = rv_strtab_intern(&t->strings, (const char *)r.p, n);
        if (got == UINT32_MAX)
            return rv_error_set(err, RV_ERR_NOMEM, rb_off(&r), -1,
                                "snapshot: string table full at string %llu",
                                (unsigned long long)id);
        /* The table holds each string once, so a repeat means corruption. */
        if (got != id)
            return rv_error_set(err, RV_ERR_PARSE, rb_off(&r), -1,
                                "snapshot: string %llu repeats string %u", (unsigned long long)id,
                                got);
        r.p += n;
    }
    for (uint64_t i = 0; i < ndev; i++) {
        int64_t id = rb_s(&r);
        uint64_t name = rb_u(&r);
        int64_t sms = rb_s(&r), maj = rb_s(&r), min = rb_s(&r), mem = rb_s(&r);
        if (r.bad || name >= nstr || !IN32(id) || !IN32(sms) || !IN32(maj) || !IN32(min))
            return rv_error_set(err, RV_ERR_PARSE, rb_off(&r), -1, "snapshot: device %llu is bad",
                                (unsigned long long)i);
        rv_device d = {(int32_t)id, (uint32_t)name, (int32_t)sms, (int32_t)maj, (int32_t)min, mem};
        if (rv_trace_add_device(t, &d) != 0)
            return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "snapshot: out of memory");
    }

    if (nev) {
        t->events = calloc((size_t)nev, sizeof(rv_event));
        rv_mem_huge(t->events, (size_t)nev * sizeof(rv_event));
        if (!t->events)
            return rv_error_set(err, RV_ERR_NOMEM, -1, -1,
                                "snapshot: out of memory for %llu events", (unsigned long long)nev);
        t->cap_events = (size_t)nev;
    }
    t->nevents = (size_t)nev;
    int rc = decode_events(&r, t, (uint32_t)nstr, err);
    if (rc)
        return rc;
    /* Snapshots written before the shapes and memory sections end here. */
    if (r.p != r.end && (rc = decode_extras(&r, t, version, err)) != 0)
        return rc;
    if (r.p != r.end)
        return rv_error_set(err, RV_ERR_PARSE, rb_off(&r), -1,
                            "snapshot: %td trailing bytes after the events", r.end - r.p);
    return 0;
}

int rv_snapshot_peek(const void *data, size_t len, uint32_t *version, uint64_t *raw_len,
                     rv_error *err)
{
    const uint8_t *p = data;
    if (len < RV_SNAPSHOT_HEADER_LEN || memcmp(p, "RVSN", 4) != 0)
        return rv_error_set(err, RV_ERR_PARSE, 0, -1, "snapshot: missing RVSN header");
    if (version)
        *version = get_le32(p + 4);
    if (raw_len)
        *raw_len = get_le64(p + 16);
    return 0;
}

int rv_snapshot_decode(const void *data, size_t len, rv_trace **out, rv_error *err)
{
    const uint8_t *p = data;
    uint8_t *inflated = NULL;
    rv_trace *t = NULL;
    uint32_t version = 0;
    uint64_t raw_len = 0;
    int rc;

    *out = NULL;
    rc = rv_snapshot_peek(data, len, &version, &raw_len, err);
    if (rc)
        goto out;
    uint32_t flags = get_le32(p + 8);
    uint32_t crc = get_le32(p + 12);
    uint64_t plen = get_le64(p + 24);
    if (version < 1 || version > RV_SNAPSHOT_VERSION) {
        rc = rv_error_set(err, RV_ERR_UNSUPPORTED, 4, -1,
                          "snapshot: format version %u, this build reads versions 1 to %u", version,
                          RV_SNAPSHOT_VERSION);
        goto out;
    }
    if (flags & ~FLAG_ZLIB) {
        rc = rv_error_set(err, RV_ERR_UNSUPPORTED, 8, -1, "snapshot: unknown flags 0x%x", flags);
        goto out;
    }
    if (plen != len - RV_SNAPSHOT_HEADER_LEN) {
        rc = rv_error_set(err, RV_ERR_PARSE, 24, -1,
                          "snapshot: header says %llu payload bytes, %zu present",
                          (unsigned long long)plen, len - RV_SNAPSHOT_HEADER_LEN);
        goto out;
    }
    const uint8_t *payload = p + RV_SNAPSHOT_HEADER_LEN;
    if ((uint32_t)crc32(0L, payload, (uInt)plen) != crc) {
        rc = rv_error_set(err, RV_ERR_PARSE, 12, -1, "snapshot: payload checksum mismatch");
        goto out;
    }
    const uint8_t *body = payload;
    if (flags & FLAG_ZLIB) {
        /* deflate cannot expand more than about 1032:1; a larger claim is a
         * lie, and the cap bounds what a hostile header can allocate. */
        if (raw_len > RV_SNAPSHOT_MAX_RAW || raw_len > plen * 1032 + 64) {
            rc = rv_error_set(err, RV_ERR_PARSE, 16, -1,
                              "snapshot: inflated size %llu is impossible for %llu bytes",
                              (unsigned long long)raw_len, (unsigned long long)plen);
            goto out;
        }
        inflated = malloc(raw_len ? (size_t)raw_len : 1);
        if (!inflated) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "snapshot: out of memory (%llu bytes)",
                              (unsigned long long)raw_len);
            goto out;
        }
        uLongf dl = (uLongf)raw_len;
        int zrc = uncompress(inflated, &dl, payload, (uLong)plen);
        if (zrc != Z_OK || dl != raw_len) {
            rc = rv_error_set(err, RV_ERR_PARSE, RV_SNAPSHOT_HEADER_LEN, -1,
                              "snapshot: zlib payload is corrupt (%s)",
                              zrc == Z_OK ? "size mismatch" : zError(zrc));
            goto out;
        }
        body = inflated;
    } else if (raw_len != plen) {
        rc = rv_error_set(err, RV_ERR_PARSE, 16, -1, "snapshot: stored size mismatch");
        goto out;
    }
    t = rv_trace_new();
    if (!t) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "snapshot: out of memory");
        goto out;
    }
    rc = decode_body(body, (size_t)raw_len, t, version, err);
    if (rc)
        goto out;
    *out = t;
    t = NULL;
out:
    free(inflated);
    rv_trace_free(t);
    return rc;
}
