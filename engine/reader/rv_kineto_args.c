/* The Kineto reader's per-event "args" object: correlation and external
 * ids, launch geometry, sync kinds, collective message sizes and process
 * groups, and (through rv_shapes) record_shapes and [memory] args. The
 * reader state and scanning helpers are in rv_kineto_internal.h. See
 * docs/internals/kineto-reader.md. */
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "reader/rv_kineto_internal.h"
#include "trace/rv_kname.h"
#include "trace/rv_shapes.h"

/* The reader state (rv_kineto_internal.h), by its short local name. */
typedef rv_kineto__reader reader;

/* Reads [x, y, z] into g (up to 3 integers); other shapes are skipped. */
static int read_dim3(reader *r, int depth, int32_t g[3])
{
    int rc = array_open(r, depth);
    for (int i = 0; rc > 0; i++) {
        int64_t v = RV_NONE;
        if (i < 3) {
            if ((rc = rv_kineto__int_arg(r, depth + 1, 0, &v)) < 0)
                return rc;
            g[i] = v < 0 ? 0 : to_i32(v, 0);
        } else if ((rc = skip_value(r, depth + 1)) < 0) {
            return rc;
        }
        rc = array_next(r, "',' or ']'");
    }
    return rc;
}

/* Bytes per element of a C++ type name as "Input type" writes it
 * ("float", "long int", "c10::Half"); 0 when unknown. */
static int ctype_bytes(const char *s, size_t n)
{
    static const struct {
        const char *name;
        int bytes;
    } t[] = {
        {"float", 4},    {"double", 8},      {"c10::Half", 2},     {"c10::BFloat16", 2},
        {"long int", 8}, {"long", 8},        {"int", 4},           {"short int", 2},
        {"short", 2},    {"signed char", 1}, {"unsigned char", 1}, {"bool", 1},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (strlen(t[i].name) == n && !memcmp(s, t[i].name, n))
            return t[i].bytes;
    return 0;
}

/* An op's "Input type" list: its precision code (trace/rv_kname.h, the
 * first floating tensor type) and (first, may be NULL) the element width
 * of its first entry; other shapes are skipped. */
static int read_input_types(reader *r, int depth, uint8_t *code, int *first)
{
    int c = ws(r), rc, ok, k = RV_PT_NONE, i = 0;
    if (c != '[')
        return skip_value(r, depth);
    eat(r);
    for (c = ws(r); c != ']'; i++) {
        if ((rc = rv_kineto__text_value(r, depth + 1, &r->sbuf, &ok)) < 0)
            return rc;
        if (ok && first && i == 0)
            *first = ctype_bytes(r->sbuf.p, r->sbuf.len);
        if (ok)
            k = rv_kname_type_merge(k, rv_kname_type_code(r->sbuf.p, r->sbuf.len));
        rv_shapes_note_type(r->shp, (size_t)i, ok ? r->sbuf.p : NULL, r->sbuf.len);
        c = ws(r);
        if (c == ',') {
            eat(r);
            ws(r);
        } else if (c != ']') {
            return fail_char(r, c, "',' or ']'");
        }
    }
    eat(r);
    *code = (uint8_t)k;
    return 0;
}

static int sync_kind(const char *s, size_t n)
{
    if (n == 11 && !memcmp(s, "Stream Sync", 11))
        return RV_SYNC_STREAM;
    if (n == 10 && !memcmp(s, "Event Sync", 10))
        return RV_SYNC_EVENT;
    if (n == 12 && !memcmp(s, "Context Sync", 12))
        return RV_SYNC_CONTEXT;
    if ((n == 10 && !memcmp(s, "Wait Event", 10)) ||
        (n == 17 && !memcmp(s, "Stream Wait Event", 17)))
        return RV_SYNC_WAIT_EVENT;
    return RV_SYNC_NONE;
}

/* Bytes per element of a PyTorch dtype name as Kineto writes it ("Float",
 * "BFloat16", ...); 0 when unknown. */
static int dtype_bytes(const char *s, size_t n)
{
    static const struct {
        const char *name;
        int bytes;
    } t[] = {
        {"Float", 4},        {"Half", 2},           {"BFloat16", 2},      {"Double", 8},
        {"Int", 4},          {"Long", 8},           {"Short", 2},         {"Char", 1},
        {"Byte", 1},         {"Bool", 1},           {"Float8_e4m3fn", 1}, {"Float8_e5m2", 1},
        {"ComplexFloat", 8}, {"ComplexDouble", 16},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (strlen(t[i].name) == n && !memcmp(s, t[i].name, n))
            return t[i].bytes;
    return 0;
}

/* "Input Dims" of a collective's annotation: the element count of its
 * first tensor (the product of its dims); the rest is skipped. *n is left
 * as it was when the first entry is not a list of counts. */
static int read_first_dims(reader *r, int depth, int64_t *n)
{
    int c, rc = array_open(r, depth);
    for (int i = 0; rc > 0; i++) {
        c = ws(r);
        if (i == 0 && c == '[') {
            int64_t prod = 1;
            int any = 0;
            eat(r);
            for (c = ws(r); c != ']'; c = ws(r)) {
                int64_t v = RV_NONE;
                if ((rc = rv_kineto__int_arg(r, depth + 2, 0, &v)) < 0)
                    return rc;
                if (v < 0 || (v > 0 && prod > INT64_MAX / 16 / v))
                    prod = -1; /* unknown or too large: no size */
                else if (prod >= 0)
                    prod *= v;
                any = 1;
                c = ws(r);
                if (c == ',')
                    eat(r);
                else if (c != ']')
                    return fail_char(r, c, "',' or ']'");
            }
            eat(r);
            if (any && prod > 0)
                *n = prod;
        } else if ((rc = skip_value(r, depth + 1)) < 0) {
            return rc;
        }
        rc = array_next(r, "',' or ']'");
    }
    return rc;
}

int rv_kineto__parse_args(reader *r, int depth, rv_event *ev)
{
    int rc, more;
    int64_t v;
    /* Collectives (newer Kineto: on the NCCL kernel and on
     * record_param_comms) give their message as elements and a dtype. */
    int64_t in_nelems = RV_NONE, out_nelems = RV_NONE, dims_nelems = RV_NONE;
    int elem_bytes = 0, note_bytes = 0;
    /* Its process group's members as a rank range, when no list is given. */
    int64_t rank_start = RV_NONE, rank_stride = RV_NONE, group_size = RV_NONE;
    /* Older Kineto names a collective's message only on its CPU-side
     * annotation ("nccl:all_reduce"): its first input tensor. */
    int nccl_note = r->name.len > 5 && !memcmp(r->name.p, "nccl:", 5);
    if ((rc = object_first(r)) < 0)
        return rc;
    for (more = rc; more; more = rc) {
        const char *k;
        size_t n = key(r, &k);
        if (n == 11 && !memcmp(k, "correlation", 11)) {
            rc = rv_kineto__int_arg(r, depth + 1, 1, &ev->correlation);
        } else if (n == 11 && (!memcmp(k, "External id", 11) || !memcmp(k, "external id", 11))) {
            rc = rv_kineto__int_arg(r, depth + 1, 1, &ev->external_id);
        } else if (n == 6 && !memcmp(k, "device", 6)) {
            v = RV_NONE;
            rc = rv_kineto__int_arg(r, depth + 1, 0, &v);
            ev->device = to_i32(v, RV_NONE);
        } else if (n == 6 && !memcmp(k, "stream", 6)) {
            v = RV_NONE;
            rc = rv_kineto__int_arg(r, depth + 1, 0, &v);
            ev->stream = to_i32(v, RV_NONE);
        } else if (n == 5 && !memcmp(k, "bytes", 5)) {
            rc = rv_kineto__int_arg(r, depth + 1, 0, &ev->bytes);
        } else if (n == 4 && !memcmp(k, "grid", 4)) {
            rc = read_dim3(r, depth + 1, ev->grid);
        } else if (n == 5 && !memcmp(k, "block", 5)) {
            rc = read_dim3(r, depth + 1, ev->block);
        } else if (n == 20 && !memcmp(k, "registers per thread", 20)) {
            v = 0;
            rc = rv_kineto__int_arg(r, depth + 1, 0, &v);
            ev->registers = v < 0 ? 0 : to_i32(v, INT32_MAX);
        } else if (n == 13 && !memcmp(k, "shared memory", 13)) {
            v = 0;
            rc = rv_kineto__int_arg(r, depth + 1, 0, &v);
            ev->shared_mem = v < 0 ? 0 : to_i32(v, INT32_MAX);
        } else if (n == 14 && !memcmp(k, "cuda_sync_kind", 14)) {
            int ok;
            rc = rv_kineto__text_value(r, depth + 1, &r->sbuf, &ok);
            if (rc == 0 && ok)
                ev->sync_kind = (uint8_t)sync_kind(r->sbuf.p, r->sbuf.len);
        } else if (n == 14 && !memcmp(k, "wait_on_stream", 14)) {
            v = RV_NONE;
            rc = rv_kineto__int_arg(r, depth + 1, 0, &v);
            ev->wait_stream = to_i32(v, RV_NONE);
        } else if (n == 33 && !memcmp(k, "wait_on_cuda_event_record_corr_id", 33)) {
            rc = rv_kineto__int_arg(r, depth + 1, 1, &ev->wait_event_corr);
        } else if (n == 13 && !memcmp(k, "In msg nelems", 13)) {
            rc = rv_kineto__int_arg(r, depth + 1, 0, &in_nelems);
        } else if (n == 14 && !memcmp(k, "Out msg nelems", 14)) {
            rc = rv_kineto__int_arg(r, depth + 1, 0, &out_nelems);
        } else if (nccl_note && n == 10 && !memcmp(k, "Input Dims", 10)) {
            rc = read_first_dims(r, depth + 1, &dims_nelems);
        } else if (n == 10 && !memcmp(k, "Input type", 10)) {
            rc = read_input_types(r, depth + 1, &ev->in_type, nccl_note ? &note_bytes : NULL);
        } else if (rv_shapes_key(k, n)) { /* record_shapes and [memory] args */
            rc = rv_shapes_read_arg(&r->js, depth + 1, k, n, r->shp, &r->sbuf);
        } else if ((n == 18 && !memcmp(k, "Process Group Name", 18)) ||
                   (n == 19 && !memcmp(k, "Process Group Ranks", 19))) {
            int ok;
            uint32_t *dst = n == 18 ? &ev->pg : &ev->pg_ranks;
            rc = rv_kineto__text_value(r, depth + 1, &r->sbuf, &ok);
            if (rc == 0 && ok && r->sbuf.len > 0 && r->sbuf.len <= 4096)
                *dst = rv_kineto__intern(r, r->sbuf.p, r->sbuf.len, &rc);
        } else if ((n == 3 && !memcmp(k, "Seq", 3)) || (n == 8 && !memcmp(k, "Dst Rank", 8)) ||
                   (n == 8 && !memcmp(k, "Src Rank", 8))) {
            v = RV_NONE;
            rc = rv_kineto__int_arg(r, depth + 1, 0, &v);
            if (v >= 0)
                *(n == 3 ? &ev->seq : &ev->peer) = to_i32(v, RV_NONE);
        } else if (n == 17 && !memcmp(k, "Global rank start", 17)) {
            rc = rv_kineto__int_arg(r, depth + 1, 0, &rank_start);
        } else if (n == 18 && !memcmp(k, "Global rank stride", 18)) {
            rc = rv_kineto__int_arg(r, depth + 1, 0, &rank_stride);
        } else if (n == 10 && !memcmp(k, "Group size", 10)) {
            rc = rv_kineto__int_arg(r, depth + 1, 0, &group_size);
        } else if (n == 5 && !memcmp(k, "dtype", 5)) {
            int ok;
            rc = rv_kineto__text_value(r, depth + 1, &r->sbuf, &ok);
            if (rc == 0 && ok)
                elem_bytes = dtype_bytes(r->sbuf.p, r->sbuf.len);
        } else {
            rc = skip_value(r, depth + 1);
        }
        if (rc < 0)
            return rc;
        rc = object_next(r);
        if (rc < 0)
            return rc;
    }
    /* The full array a collective moves is the larger side (an all-gather's
     * output, a reduce-scatter's input). */
    int64_t nelems = in_nelems > out_nelems ? in_nelems : out_nelems;
    if (ev->bytes == RV_NONE && elem_bytes > 0 && nelems > 0 && nelems < INT64_MAX / 16)
        ev->bytes = nelems * elem_bytes;
    if (ev->bytes == RV_NONE && dims_nelems > 0 && note_bytes > 0 &&
        dims_nelems <= INT64_MAX / note_bytes)
        ev->bytes = dims_nelems * note_bytes;
    /* No member list: spell out the range start, start + stride, ... */
    if (ev->pg && !ev->pg_ranks && rank_start >= 0 && rank_stride > 0 && group_size > 0 &&
        group_size <= 256 && rank_start < INT32_MAX && rank_stride < INT32_MAX &&
        rank_start + rank_stride * group_size < INT32_MAX) {
        char list[256 * 12 + 4];
        size_t len = 0;
        list[len++] = '[';
        for (int64_t i = 0; i < group_size; i++) {
            int64_t member = rank_start + i * rank_stride;
            len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%" PRId64, i ? ", " : "",
                                    member);
        }
        list[len++] = ']';
        int irc = 0;
        ev->pg_ranks = rv_kineto__intern(r, list, len, &irc);
        if (irc < 0)
            return irc;
    }
    return 0;
}
