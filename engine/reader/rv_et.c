/* PyTorch execution trace (ET) reader on top of the streaming scanner in
 * rv_jscan.c: nodes, their inputs and outputs (tensor ids, flat shapes,
 * types), parents and record-function ids; everything else is skipped
 * while still validated. The join with a Kineto trace is in rv_et_join.c.
 * See docs/internals/et-reader.md. */
#include "reader/rv_et.h"

#include <inttypes.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "util/rv_buf.h"
#include "util/rv_jscan.h"
#include "util/rv_map.h"
#include "util/rv_tar.h"

#define DEFAULT_INPUT ((size_t)4 << 30)
#define MAX_DIMS_ALL  ((size_t)64 << 20) /* dims over the whole ET */
#define MAX_ARGS_ALL  ((size_t)64 << 20)

/* One value, shape or type list of a node as it streams past. */
typedef struct tval {
    int64_t tensor_id, numel;
    int32_t itemsize;
    int32_t nvals; /* ints of a scalar or int list; -1 none */
    uint32_t off;
    int32_t device; /* RV_ET_DEV_* */
} tval;
typedef struct tshape {
    int32_t ndims;
    uint32_t off;
} tshape;

typedef struct side {
    tval vals[RV_ET_MAX_ARGS];
    tshape shapes[RV_ET_MAX_ARGS];
    uint32_t types[RV_ET_MAX_ARGS];
    uint32_t nvals, nshapes, ntypes;
} side;

typedef struct reader {
    rv_jscan js;
    rv_et *et;
    size_t max_nodes;
    rv_buf sbuf, name;
    rv_buf dev; /* the last string of a value list: a tensor's device */
    rv_map ids; /* node id -> index */
    side in, out;
    int seen_nodes, seen_schema;
} reader;

#define FAIL(r, code, ...) rv_jscan_fail_at(&(r)->js, (code), rv_jscan_off(&(r)->js), __VA_ARGS__)

static int nomem(reader *r)
{
    return FAIL(r, RV_ERR_NOMEM, "out of memory");
}

/* Interns s[0..n); 0 or a negative rv_err (limit on the table). */
static int intern(reader *r, const char *s, size_t n, uint32_t *id)
{
    uint32_t v = rv_strtab_intern(&r->et->strings, s ? s : "", s ? n : 0);
    if (v == UINT32_MAX)
        return FAIL(r, RV_ERR_LIMIT, "string table full");
    *id = v;
    return 0;
}

/* Reads a string value into b; a string past b's cap is refused. */
static int read_str(reader *r, rv_buf *b, const char *what)
{
    int c = rv_jscan_ws(&r->js), rc;
    if (c != '"')
        return rv_jscan_fail_char(&r->js, c, what);
    rv_jscan_eat(&r->js);
    if ((rc = rv_jscan_string(&r->js, b)) < 0)
        return rc;
    if (b->err)
        return FAIL(r, RV_ERR_LIMIT, "%s longer than %zu bytes", what, (size_t)RV_ET_MAX_NAME);
    return 0;
}

/* Reads an integer; *ok is 0 (value skipped) when it is not one. */
static int read_int(reader *r, int depth, int64_t *v, int *ok)
{
    int c = rv_jscan_ws(&r->js), rc;
    *ok = 0;
    if (c == '-' || (c >= '0' && c <= '9')) {
        if ((rc = rv_jscan_number(&r->js)) < 0)
            return rc;
        /* Integers only: 0.5 is a double argument, not an id or a size. */
        *ok = !memchr(r->js.num, '.', r->js.num_len) && !memchr(r->js.num, 'e', r->js.num_len) &&
              !memchr(r->js.num, 'E', r->js.num_len) &&
              rv_jscan_dec_i64(r->js.num, r->js.num_len, 0, v) == RV_JSCAN_OK;
        return 0;
    }
    return rv_jscan_skip(&r->js, depth);
}

/* A required integer field: a non-integer is refused. */
static int read_req_int(reader *r, int depth, const char *field, int64_t *v)
{
    int ok, rc = read_int(r, depth, v, &ok);
    if (rc < 0)
        return rc;
    if (!ok)
        return FAIL(r, RV_ERR_PARSE, "\"%s\" is not an integer in range", field);
    return 0;
}

/* Array iteration after '[' was consumed: 1 while an element follows. */
static int array_more(reader *r, int first)
{
    int c = rv_jscan_ws(&r->js);
    if (c == ']') {
        rv_jscan_eat(&r->js);
        return 0;
    }
    if (!first) {
        if (c != ',')
            return rv_jscan_fail_char(&r->js, c, "',' or ']'");
        rv_jscan_eat(&r->js);
        c = rv_jscan_ws(&r->js);
    }
    if (c < 0)
        return rv_jscan_fail_eof(&r->js, "an array");
    return 1;
}

static int open_array(reader *r, const char *what)
{
    int c = rv_jscan_ws(&r->js);
    if (c != '[')
        return rv_jscan_fail_char(&r->js, c, what);
    rv_jscan_eat(&r->js);
    return 0;
}

/* Appends one int to et->dims (shapes and int values share it). */
static int push_int(reader *r, int64_t d)
{
    rv_et *et = r->et;
    if (et->ndims == et->cap_dims) {
        if (et->ndims >= MAX_DIMS_ALL)
            return FAIL(r, RV_ERR_LIMIT, "more than %zu shape dims and values in the ET",
                        (size_t)MAX_DIMS_ALL);
        size_t nc = et->cap_dims ? et->cap_dims * 2 : 1024;
        int64_t *p = realloc(et->dims, nc * sizeof(*p));
        if (!p)
            return nomem(r);
        et->dims = p;
        et->cap_dims = nc;
    }
    et->dims[et->ndims++] = d;
    return 0;
}

/* A tensor's device string ("cuda:0", "cpu"); a string past the scratch's
 * cap is not a device. */
static int32_t device_of(const rv_buf *b)
{
    if (b->err || !b->p)
        return RV_ET_DEV_UNKNOWN;
    if (strncmp(b->p, "cuda", 4) == 0 || strncmp(b->p, "hip", 3) == 0)
        return RV_ET_DEV_GPU;
    if (strncmp(b->p, "cpu", 3) == 0)
        return RV_ET_DEV_CPU;
    return RV_ET_DEV_UNKNOWN;
}

/* One entry of a values list: a tensor is [id, storage, offset, numel,
 * itemsize, device]; an int or a flat list of ints (sizes, strides,
 * groups) is kept as values; anything else is skipped. */
static int read_value(reader *r, int depth, tval *v)
{
    rv_et *et = r->et;
    int c = rv_jscan_ws(&r->js), rc, more;
    size_t start = et->ndims;
    int n = 0, ok, ints = 1, last_str = 0;
    v->tensor_id = v->numel = RV_NONE;
    v->itemsize = 0;
    v->nvals = -1;
    v->device = RV_ET_DEV_UNKNOWN;
    v->off = (uint32_t)start;
    if (c == '-' || (c >= '0' && c <= '9')) {
        int64_t d = 0;
        if ((rc = read_int(r, depth, &d, &ok)) < 0)
            return rc;
        if (ok) {
            if ((rc = push_int(r, d)) < 0)
                return rc;
            v->nvals = 1;
        }
        return 0;
    }
    if (c != '[')
        return rv_jscan_skip(&r->js, depth);
    rv_jscan_eat(&r->js);
    for (int first = 1; (more = array_more(r, first)) > 0; first = 0) {
        c = rv_jscan_ws(&r->js);
        last_str = 0;
        if (ints && n < RV_ET_MAX_DIMS && (c == '-' || (c >= '0' && c <= '9'))) {
            int64_t d = 0;
            if ((rc = read_int(r, depth + 1, &d, &ok)) < 0)
                return rc;
            if (ok && (rc = push_int(r, d)) < 0)
                return rc;
            ints &= ok;
        } else if (c == '"') {
            rv_jscan_eat(&r->js);
            if ((rc = rv_jscan_string(&r->js, &r->dev)) < 0)
                return rc;
            last_str = 1;
            ints = 0;
        } else {
            ints = 0;
            if ((rc = rv_jscan_skip(&r->js, depth + 1)) < 0)
                return rc;
        }
        n++;
    }
    if (more < 0)
        return more;
    /* dims is non-NULL whenever five ints were pushed. */
    const int64_t *num = et->ndims - start == 5 ? et->dims + start : NULL;
    if (n == 6 && last_str && num && num[3] >= 0 && num[4] >= 0 && num[4] <= 64) {
        v->tensor_id = num[0];
        v->numel = num[3];
        v->itemsize = (int32_t)num[4];
        v->device = device_of(&r->dev);
    } else if (ints) {
        v->nvals = n;
        return 0;
    }
    et->ndims = start; /* not an int list: give the values back */
    return 0;
}

/* One entry of a shapes list: a flat list of ints keeps its dims; nested
 * lists (list arguments) and longer ranks keep none. */
static int read_shape(reader *r, int depth, tshape *sh)
{
    rv_et *et = r->et;
    int c = rv_jscan_ws(&r->js), rc, more, ok;
    size_t start = et->ndims;
    int flat = 1, n = 0;
    sh->ndims = -1;
    sh->off = (uint32_t)start;
    if (c != '[')
        return rv_jscan_skip(&r->js, depth);
    rv_jscan_eat(&r->js);
    for (int first = 1; (more = array_more(r, first)) > 0; first = 0) {
        c = rv_jscan_ws(&r->js);
        int64_t d = 0;
        if (flat && (c == '-' || (c >= '0' && c <= '9'))) {
            if ((rc = read_int(r, depth + 1, &d, &ok)) < 0)
                return rc;
            if (!ok || n >= RV_ET_MAX_DIMS) {
                flat = 0;
                continue;
            }
            if ((rc = push_int(r, d)) < 0)
                return rc;
            n++;
        } else {
            flat = 0;
            if ((rc = rv_jscan_skip(&r->js, depth + 1)) < 0)
                return rc;
        }
    }
    if (more < 0)
        return more;
    if (flat) {
        sh->ndims = n;
    } else {
        et->ndims = start; /* nested: give the dims back */
    }
    return 0;
}

static int read_type(reader *r, int depth, uint32_t *id)
{
    int c = rv_jscan_ws(&r->js), rc;
    *id = 0;
    if (c != '"')
        return rv_jscan_skip(&r->js, depth);
    if ((rc = read_str(r, &r->sbuf, "a type string")) < 0)
        return rc;
    return intern(r, r->sbuf.p, r->sbuf.len, id);
}

/* kind 0: values, 1: shapes, 2: types. */
static int read_list(reader *r, int depth, side *sd, int kind)
{
    int rc, more;
    uint32_t *cnt = kind == 0 ? &sd->nvals : kind == 1 ? &sd->nshapes : &sd->ntypes;
    if (rv_jscan_ws(&r->js) == 'n')
        return rv_jscan_literal(&r->js, "null");
    if ((rc = open_array(r, "'[' (an inputs or outputs list)")) < 0)
        return rc;
    *cnt = 0;
    for (int first = 1; (more = array_more(r, first)) > 0; first = 0) {
        if (*cnt >= RV_ET_MAX_ARGS)
            return FAIL(r, RV_ERR_LIMIT, "more than %d inputs or outputs", RV_ET_MAX_ARGS);
        if (kind == 0)
            rc = read_value(r, depth + 1, &sd->vals[*cnt]);
        else if (kind == 1)
            rc = read_shape(r, depth + 1, &sd->shapes[*cnt]);
        else
            rc = read_type(r, depth + 1, &sd->types[*cnt]);
        if (rc < 0)
            return rc;
        (*cnt)++;
    }
    return more;
}

/* 1.0.2+ "inputs": {"values": [...], "shapes": [...], "types": [...]}. */
static int read_io_object(reader *r, int depth, side *sd)
{
    int rc;
    rv_jscan_eat(&r->js); /* '{' */
    for (rc = rv_jscan_object_first(&r->js); rc > 0; rc = rv_jscan_object_next(&r->js)) {
        int k = rv_jscan_key_is(&r->js, "values")   ? 0
                : rv_jscan_key_is(&r->js, "shapes") ? 1
                : rv_jscan_key_is(&r->js, "types")  ? 2
                                                    : -1;
        rc = k < 0 ? rv_jscan_skip(&r->js, depth + 1) : read_list(r, depth + 1, sd, k);
        if (rc < 0)
            return rc;
    }
    return rc;
}

static int read_io(reader *r, int depth, side *sd)
{
    int c = rv_jscan_ws(&r->js);
    if (c == '{') {
        r->et->layout = 1;
        return read_io_object(r, depth, sd);
    }
    return read_list(r, depth, sd, 0);
}

typedef struct nodeacc {
    rv_et_node n;
    int has_id, has_name;
} nodeacc;

/* 1.0.2+ "attrs": [{"name": ..., "type": ..., "value": ...}, ...]. */
static int read_attrs(reader *r, int depth, nodeacc *a)
{
    int rc, more;
    if ((rc = open_array(r, "'[' (attrs)")) < 0)
        return rc;
    for (int first = 1; (more = array_more(r, first)) > 0; first = 0) {
        int c = rv_jscan_ws(&r->js);
        if (c != '{')
            return rv_jscan_fail_char(&r->js, c, "'{' (an attr)");
        rv_jscan_eat(&r->js);
        int64_t iv = 0;
        int have_int = 0, have_str = 0, which = 0; /* 1 rf_id, 2 tid, 3 op_schema */
        uint32_t sv = 0;
        for (rc = rv_jscan_object_first(&r->js); rc > 0; rc = rv_jscan_object_next(&r->js)) {
            if (rv_jscan_key_is(&r->js, "name")) {
                if ((rc = read_str(r, &r->sbuf, "an attr name")) < 0)
                    return rc;
                which = !strcmp(r->sbuf.p ? r->sbuf.p : "", "rf_id")       ? 1
                        : !strcmp(r->sbuf.p ? r->sbuf.p : "", "tid")       ? 2
                        : !strcmp(r->sbuf.p ? r->sbuf.p : "", "op_schema") ? 3
                                                                           : 0;
            } else if (rv_jscan_key_is(&r->js, "value")) {
                c = rv_jscan_ws(&r->js);
                if (c == '"') {
                    if ((rc = read_str(r, &r->name, "an attr value")) < 0)
                        return rc;
                    have_str = 1;
                } else if ((rc = read_int(r, depth + 2, &iv, &have_int)) < 0) {
                    return rc;
                }
            } else if ((rc = rv_jscan_skip(&r->js, depth + 2)) < 0) {
                return rc;
            }
        }
        if (rc < 0)
            return rc;
        if (which == 1 && have_int)
            a->n.rf_id = iv;
        else if (which == 2 && have_int)
            a->n.tid = iv;
        else if (which == 3 && have_str) {
            if ((rc = intern(r, r->name.p, r->name.len, &sv)) < 0)
                return rc;
            a->n.schema = sv;
        }
    }
    return more;
}

static int push_args(reader *r, const side *sd, uint32_t *count)
{
    rv_et *et = r->et;
    uint32_t n = sd->nvals;
    if (sd->nshapes > n)
        n = sd->nshapes;
    if (sd->ntypes > n)
        n = sd->ntypes;
    if (et->nargs + n > MAX_ARGS_ALL)
        return FAIL(r, RV_ERR_LIMIT, "more than %zu inputs and outputs in the ET",
                    (size_t)MAX_ARGS_ALL);
    if (et->nargs + n > et->cap_args) {
        size_t nc = et->cap_args ? et->cap_args : 1024;
        while (nc < et->nargs + n)
            nc *= 2;
        rv_et_arg *p = realloc(et->args, nc * sizeof(*p));
        if (!p)
            return nomem(r);
        et->args = p;
        et->cap_args = nc;
    }
    for (uint32_t i = 0; i < n; i++) {
        rv_et_arg *a = &et->args[et->nargs++];
        a->tensor_id = i < sd->nvals ? sd->vals[i].tensor_id : RV_NONE;
        a->numel = i < sd->nvals ? sd->vals[i].numel : RV_NONE;
        a->itemsize = i < sd->nvals ? sd->vals[i].itemsize : 0;
        a->device = i < sd->nvals ? sd->vals[i].device : RV_ET_DEV_UNKNOWN;
        a->ndims = i < sd->nshapes ? sd->shapes[i].ndims : -1;
        a->dims_off = i < sd->nshapes ? sd->shapes[i].off : 0;
        a->type = i < sd->ntypes ? sd->types[i] : 0;
        a->nvals = i < sd->nvals ? sd->vals[i].nvals : -1;
        a->vals_off = i < sd->nvals ? sd->vals[i].off : 0;
    }
    *count = n;
    return 0;
}

static int read_node(reader *r, int depth)
{
    rv_et *et = r->et;
    int64_t start = rv_jscan_off(&r->js);
    int c = rv_jscan_ws(&r->js), rc;
    nodeacc a;
    if (c != '{')
        return rv_jscan_fail_char(&r->js, c, "'{' (a node)");
    rv_jscan_eat(&r->js);
    memset(&a, 0, sizeof(a));
    a.n.parent = a.n.rf_id = a.n.tid = RV_NONE;
    r->in.nvals = r->in.nshapes = r->in.ntypes = 0;
    r->out.nvals = r->out.nshapes = r->out.ntypes = 0;
    for (rc = rv_jscan_object_first(&r->js); rc > 0; rc = rv_jscan_object_next(&r->js)) {
        rv_jscan *js = &r->js;
        if (rv_jscan_key_is(js, "id")) {
            rc = read_req_int(r, depth + 1, "id", &a.n.id);
            a.has_id = 1;
        } else if (rv_jscan_key_is(js, "name")) {
            if ((rc = read_str(r, &r->name, "the node name")) == 0)
                rc = intern(r, r->name.p, r->name.len, &a.n.name);
            a.has_name = 1;
        } else if (rv_jscan_key_is(js, "parent") || rv_jscan_key_is(js, "ctrl_deps")) {
            int ok;
            int64_t v;
            rc = read_int(r, depth + 1, &v, &ok);
            if (ok)
                a.n.parent = v;
        } else if (rv_jscan_key_is(js, "rf_id")) {
            int ok;
            int64_t v;
            rc = read_int(r, depth + 1, &v, &ok);
            if (ok)
                a.n.rf_id = v;
        } else if (rv_jscan_key_is(js, "tid")) {
            int ok;
            int64_t v;
            rc = read_int(r, depth + 1, &v, &ok);
            if (ok)
                a.n.tid = v;
        } else if (rv_jscan_key_is(js, "op_schema")) {
            if ((rc = read_str(r, &r->name, "op_schema")) == 0)
                rc = intern(r, r->name.p, r->name.len, &a.n.schema);
        } else if (rv_jscan_key_is(js, "inputs")) {
            rc = read_io(r, depth + 1, &r->in);
        } else if (rv_jscan_key_is(js, "outputs")) {
            rc = read_io(r, depth + 1, &r->out);
        } else if (rv_jscan_key_is(js, "input_shapes")) {
            rc = read_list(r, depth + 1, &r->in, 1);
        } else if (rv_jscan_key_is(js, "input_types")) {
            rc = read_list(r, depth + 1, &r->in, 2);
        } else if (rv_jscan_key_is(js, "output_shapes")) {
            rc = read_list(r, depth + 1, &r->out, 1);
        } else if (rv_jscan_key_is(js, "output_types")) {
            rc = read_list(r, depth + 1, &r->out, 2);
        } else if (rv_jscan_key_is(js, "attrs")) {
            r->et->layout = 1;
            rc = read_attrs(r, depth + 1, &a);
        } else {
            rc = rv_jscan_skip(js, depth + 1);
        }
        if (rc < 0)
            return rc;
    }
    if (rc < 0)
        return rc;
    if (!a.has_id)
        return rv_jscan_fail_at(&r->js, RV_ERR_INVALID, start, "node without an \"id\"");
    if (!a.has_name)
        return rv_jscan_fail_at(&r->js, RV_ERR_INVALID, start,
                                "node id %" PRId64 " has no \"name\"", a.n.id);
    uint32_t prev;
    if (rv_map_get(&r->ids, (uint64_t)a.n.id, &prev))
        return rv_jscan_fail_at(&r->js, RV_ERR_INVALID, start,
                                "node id %" PRId64 " appears twice (nodes %u and %zu)", a.n.id,
                                prev, et->nnodes);
    if (et->nnodes >= r->max_nodes)
        return rv_jscan_fail_at(&r->js, RV_ERR_LIMIT, start, "more than %zu nodes", r->max_nodes);
    if ((rc = rv_map_put(&r->ids, (uint64_t)a.n.id, (uint32_t)et->nnodes)) < 0)
        return rv_jscan_fail_at(&r->js, rc, start, "node index full");
    a.n.args_off = (uint32_t)et->nargs;
    if ((rc = push_args(r, &r->in, &a.n.n_in)) < 0 || (rc = push_args(r, &r->out, &a.n.n_out)) < 0)
        return rc;
    if (et->nnodes == et->cap_nodes) {
        size_t nc = et->cap_nodes ? et->cap_nodes * 2 : 256;
        rv_et_node *p = realloc(et->nodes, nc * sizeof(*p));
        if (!p)
            return nomem(r);
        et->nodes = p;
        et->cap_nodes = nc;
    }
    et->nodes[et->nnodes++] = a.n;
    return 0;
}

static int read_nodes(reader *r)
{
    int rc, more;
    if ((rc = open_array(r, "'[' (the \"nodes\" array)")) < 0)
        return rc;
    r->js.item = 0;
    for (int first = 1; (more = array_more(r, first)) > 0; first = 0) {
        if ((rc = read_node(r, 2)) < 0)
            return rc;
        r->js.item++;
    }
    r->js.item = -1;
    return more;
}

static int read_document(reader *r)
{
    int c = rv_jscan_ws(&r->js), rc;
    if (c != '{') {
        if (c < 0)
            return FAIL(r, RV_ERR_PARSE, "empty input");
        return rv_jscan_fail_char(&r->js, c,
                                  "'{' (an execution trace is an object with \"schema\" and "
                                  "\"nodes\")");
    }
    rv_jscan_eat(&r->js);
    for (rc = rv_jscan_object_first(&r->js); rc > 0; rc = rv_jscan_object_next(&r->js)) {
        if (rv_jscan_key_is(&r->js, "schema")) {
            if ((rc = read_str(r, &r->sbuf, "the \"schema\" string")) == 0)
                rc = intern(r, r->sbuf.p, r->sbuf.len, &r->et->schema_version);
            r->seen_schema = 1;
        } else if (rv_jscan_key_is(&r->js, "nodes")) {
            if (r->seen_nodes)
                return FAIL(r, RV_ERR_INVALID, "\"nodes\" given twice");
            rc = read_nodes(r);
            r->seen_nodes = 1;
        } else if (rv_jscan_key_is(&r->js, "traceEvents")) {
            return FAIL(r, RV_ERR_UNSUPPORTED,
                        "this is a Kineto trace (\"traceEvents\"), not an execution trace");
        } else {
            rc = rv_jscan_skip(&r->js, 1);
        }
        if (rc < 0)
            return rc;
    }
    if (rc < 0)
        return rc;
    c = rv_jscan_ws(&r->js);
    if (c >= 0) {
        char tmp[12];
        return FAIL(r, RV_ERR_PARSE, "unexpected %s after the top-level value",
                    rv_jscan_show_char(c, tmp));
    }
    if (r->js.rc)
        return r->js.rc;
    if (!r->seen_schema || !r->seen_nodes)
        return rv_jscan_fail_at(&r->js, RV_ERR_UNSUPPORTED, 0,
                                "not an execution trace: no top-level \"%s\"",
                                r->seen_schema ? "nodes" : "schema");
    const char *v = rv_et_str(r->et, r->et->schema_version);
    if (strncmp(v, "1.0.", 4) != 0 && strncmp(v, "1.1.", 4) != 0)
        return rv_jscan_fail_at(&r->js, RV_ERR_UNSUPPORTED, 0,
                                "execution trace schema \"%.40s\" is not supported (1.0.x and "
                                "1.1.x are)",
                                v);
    if (r->et->nnodes == 0)
        return rv_jscan_fail_at(&r->js, RV_ERR_INVALID, 0, "the execution trace has no nodes");
    return 0;
}

/* ---------------------------------------------------------------- tar */

/* rv_tar's reader over the scanner's decompressed bytes. */
static long tar_read(void *ctx, void *buf, size_t n)
{
    rv_jscan *js = ctx;
    size_t got = 0;
    while (got < n && rv_jscan_peek(js) >= 0) {
        size_t k = js->end - js->pos;
        if (k > n - got)
            k = n - got;
        memcpy((unsigned char *)buf + got, js->buf + js->pos, k);
        js->pos += k;
        got += k;
    }
    return js->rc < 0 ? -1 : (long)got;
}

/* The one file of a tar archive read through js: 0 and *data (new), or a
 * negative rv_err with err set. Two files are refused: which one is the ET
 * is not ours to guess. */
static int tar_member(rv_jscan *js, size_t max, uint8_t **data, size_t *len, rv_error *err)
{
    rv_tar *t = NULL;
    char name[RV_TAR_NAME_MAX];
    uint8_t *more = NULL;
    size_t more_len = 0;
    *data = NULL;
    int rc = rv_tar_open_fn(tar_read, js, &t, err);
    if (rc == 0 && (rc = rv_tar_next(t, max, name, data, len, err)) == 0)
        rc = rv_error_set(err, RV_ERR_INVALID, -1, -1, "tar archive holds no file");
    if (rc == 1 && (rc = rv_tar_next(t, max, name, &more, &more_len, err)) == 1)
        rc = rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1,
                          "tar archive holds more than one file (%.200s too); give the "
                          "execution trace alone",
                          name);
    free(more);
    rv_tar_close(t);
    if (rc < 0) {
        free(*data);
        *data = NULL;
    }
    return rc < 0 ? rc : 0;
}

/* ---------------------------------------------------------------- driver */

static void reader_free(reader *r)
{
    rv_jscan_close(&r->js);
    rv_buf_free(&r->sbuf);
    rv_buf_free(&r->name);
    rv_buf_free(&r->dev);
    rv_map_free(&r->ids);
    free(r);
}

void rv_et_free(rv_et *et)
{
    if (!et)
        return;
    free(et->nodes);
    free(et->args);
    free(et->dims);
    rv_strtab_free(&et->strings);
    free(et);
}

static int parse(const unsigned char *mem, size_t len, const rv_et_opts *opts, int depth,
                 rv_et **out, rv_error *err)
{
    size_t max_in = opts && opts->max_input_bytes ? opts->max_input_bytes : DEFAULT_INPUT;
    reader *r = calloc(1, sizeof(*r));
    int rc;
    if (!r)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    r->max_nodes = opts && opts->max_nodes ? opts->max_nodes : RV_ET_MAX_NODES;
    rv_buf_init(&r->sbuf, RV_ET_MAX_NAME);
    rv_buf_init(&r->name, RV_ET_MAX_NAME);
    rv_buf_init(&r->dev, 64);
    rv_map_init(&r->ids, r->max_nodes);
    r->et = calloc(1, sizeof(*r->et));
    if (!r->et || rv_strtab_intern(&r->et->strings, "", 0) != 0) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    if ((rc = rv_jscan_open(&r->js, mem, len, NULL, max_in, err)) < 0)
        goto out;
    r->js.item_name = "node";
    r->js.item = -1;
    /* A tar archive: its header says "ustar" at byte 257. */
    if (rv_jscan_peek(&r->js) >= 0 && r->js.end - r->js.pos >= 512 &&
        !memcmp(r->js.buf + r->js.pos + 257, "ustar", 5)) {
        uint8_t *member = NULL;
        size_t mlen = 0;
        if (depth > 0) {
            rc = rv_error_set(err, RV_ERR_UNSUPPORTED, 0, -1, "a tar archive inside a tar archive");
            goto out;
        }
        if ((rc = tar_member(&r->js, max_in, &member, &mlen, err)) == 0)
            rc = parse(member, mlen, opts, depth + 1, out, err);
        free(member);
        goto out;
    }
    if ((rc = read_document(r)) == 0) {
        r->et->input_bytes = (size_t)rv_jscan_off(&r->js);
        *out = r->et;
        r->et = NULL;
    }
out:
    rv_et_free(r->et);
    reader_free(r);
    return rc;
}

int rv_et_read_buffer(const void *data, size_t len, const rv_et_opts *opts, rv_et **out,
                      rv_error *err)
{
    static const unsigned char empty[1] = {0};
    rv_error_clear(err);
    if (!out)
        return rv_error_set(err, RV_ERR_INTERNAL, -1, -1, "rv_et: out is NULL");
    *out = NULL;
    return parse(data ? data : empty, data ? len : 0, opts, 0, out, err);
}

int rv_et_read_file(const char *path, const rv_et_opts *opts, rv_et **out, rv_error *err)
{
    size_t max_in = opts && opts->max_input_bytes ? opts->max_input_bytes : DEFAULT_INPUT;
    rv_buf b = RV_BUF_INIT(max_in);
    char chunk[65536];
    size_t n;
    int rc;
    rv_error_clear(err);
    if (out)
        *out = NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return rv_error_set(err, RV_ERR_IO, -1, -1, "cannot open %s", path);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        if (rv_buf_add(&b, chunk, n) < 0)
            break;
    if (b.err)
        rc = rv_error_set(err, b.err, -1, -1, "%s is larger than %zu bytes", path, max_in);
    else if (ferror(f))
        rc = rv_error_set(err, RV_ERR_IO, -1, -1, "read error on %s", path);
    else
        rc = rv_et_read_buffer(b.p, b.len, opts, out, err);
    fclose(f);
    rv_buf_free(&b);
    return rc;
}

int rv_et_arg_is_tensor(const rv_et *et, const rv_et_arg *a)
{
    const char *t = rv_et_str(et, a->type);
    if (t[0])
        return !strncmp(t, "Tensor", 6) && strncmp(t, "TensorList", 10) != 0;
    return a->tensor_id != RV_NONE;
}
