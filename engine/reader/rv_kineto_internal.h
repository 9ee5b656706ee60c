/* Internal to the Kineto reader: the reader state and the scanning
 * helpers shared by rv_kineto.c (events, metadata, flows, the driver) and
 * rv_kineto_args.c (an event's "args" object). Not a public API;
 * rv_kineto.h is. */
#ifndef RV_KINETO_INTERNAL_H
#define RV_KINETO_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "util/rv_buf.h"
#include "util/rv_jscan.h"
#include "reader/rv_kineto.h"
#include "trace/rv_shapes.h"

#define MAX_SHORT 256 /* pid, tid, cat, ph, metadata strings */

enum {
    ST_ABSENT = RV_JSCAN_ABSENT,
    ST_OK = RV_JSCAN_OK,
    ST_NOT_NUMBER = RV_JSCAN_NOT_NUMBER,
    ST_RANGE = RV_JSCAN_RANGE
};

/* One ac2g flow endpoint, kept until every event has been read. */
typedef struct rv_kineto__flow {
    int64_t id;
    int64_t ts_ns;
    uint32_t pid, tid;
    uint8_t ph;   /* 's' or 'f' */
    uint8_t bp_e; /* "bp": "e": binds to the enclosing slice */
} rv_kineto__flow;

struct rv_kineto__par; /* rv_kineto_par.c */

typedef struct rv_kineto__reader {
    rv_jscan js; /* input, window, grammar, errors; js.item is the event */

    const rv_kineto_opts *opts;
    size_t max_events;
    rv_trace *t;

    /* Decoded values; a set err (RV_ERR_LIMIT) means the value was longer
     * than the cap and was cut. fix holds a name with invalid UTF-8 made
     * valid before it is interned. */
    rv_buf name, sbuf, fix;

    rv_kineto__flow *flows;
    size_t nflows, cap_flows;
    size_t missing_corr;

    /* The previous event's pid and tid: most events repeat them, so this
     * saves two string-table lookups per event. */
    char last_pid[MAX_SHORT + 1], last_tid[MAX_SHORT + 1];
    size_t last_pid_len, last_tid_len;
    uint32_t last_pid_id, last_tid_id;

    /* Top-level metadata seen. */
    int seen_events, seen_reverie, seen_et_nodes, seen_et_schema;
    rv_shapes_pending *shp; /* the current event's record_shapes / [memory] args */
    size_t total_events;
    uint32_t rv_gpu;
    /* distributedInfo.pg_config: each group's name and member list (text),
     * for collectives that name their group but not its members. */
    uint32_t pgc_name[64], pgc_ranks[64];
    size_t npgc;

    /* Set while the events are read on two cores (rv_kineto_par.c). */
    struct rv_kineto__par *par;
} rv_kineto__reader;

/* ---------------------------------------------------------------- scanning */

/* Thin wrappers: the reader reads through its rv_jscan. */
#define FAIL_AT(r, code, off, ...) rv_jscan_fail_at(&(r)->js, (code), (off), __VA_ARGS__)
#define FAIL(r, code, ...)         FAIL_AT((r), (code), rv_jscan_off(&(r)->js), __VA_ARGS__)

static inline int64_t cur_off(const rv_kineto__reader *r)
{
    return rv_jscan_off(&r->js);
}

static inline int ws(rv_kineto__reader *r)
{
    return rv_jscan_ws(&r->js);
}

static inline void eat(rv_kineto__reader *r)
{
    rv_jscan_eat(&r->js);
}

static inline int fail_eof(rv_kineto__reader *r, const char *inside)
{
    return rv_jscan_fail_eof(&r->js, inside);
}

static inline int fail_char(rv_kineto__reader *r, int c, const char *expected)
{
    return rv_jscan_fail_char(&r->js, c, expected);
}

static inline int skip_value(rv_kineto__reader *r, int depth)
{
    return rv_jscan_skip(&r->js, depth);
}

static inline int read_string(rv_kineto__reader *r, rv_buf *b)
{
    return rv_jscan_string(&r->js, b);
}

static inline int read_number(rv_kineto__reader *r)
{
    return rv_jscan_number(&r->js);
}

static inline int read_literal(rv_kineto__reader *r, const char *lit)
{
    return rv_jscan_literal(&r->js, lit);
}

static inline int object_first(rv_kineto__reader *r)
{
    return rv_jscan_object_first(&r->js);
}

static inline int object_next(rv_kineto__reader *r)
{
    return rv_jscan_object_next(&r->js);
}

/* At a value that should be an array: 1 after its '[' when elements
 * follow, 0 when it was empty (eaten) or not an array (skipped), or the
 * error. */
static inline int array_open(rv_kineto__reader *r, int depth)
{
    if (ws(r) != '[') {
        int rc = skip_value(r, depth);
        return rc < 0 ? rc : 0;
    }
    eat(r);
    if (ws(r) == ']') {
        eat(r);
        return 0;
    }
    return 1;
}

/* After an array element: 1 past a ',' (another follows), 0 past the
 * closing ']', or the error naming what was expected. */
static inline int array_next(rv_kineto__reader *r, const char *expected)
{
    int c = ws(r);
    if (c == ']') {
        eat(r);
        return 0;
    }
    if (c != ',')
        return fail_char(r, c, expected);
    eat(r);
    return 1;
}

static inline int key_is(const rv_kineto__reader *r, const char *k)
{
    return rv_jscan_key_is(&r->js, k);
}

/* The current key, or "" (length 0) when it was too long to be one we use. */
static inline size_t key(const rv_kineto__reader *r, const char **k)
{
    *k = rv_buf_str(&r->js.key);
    return r->js.key.err ? 0 : r->js.key.len;
}

static inline int32_t to_i32(int64_t v, int32_t absent)
{
    if (v == RV_NONE && absent == RV_NONE)
        return RV_NONE;
    if (v > INT32_MAX || v < INT32_MIN)
        return absent;
    return (int32_t)v;
}

/* Value readers (rv_kineto.c); each returns 0 or a negative rv_err. */

/* A value that should be a number (or a string holding one): sets *st
 * (ST_*); the value is skipped when it is neither. The token text stays in
 * r->js.num or r->sbuf (borrowed, returned in *txt, *len). */
int rv_kineto__num_value(rv_kineto__reader *r, int depth, int *st, const char **txt, size_t *len);

/* An integer into *out (left as it was when absent or not a number); fold:
 * ids above INT64_MAX keep their low 63 bits instead of clamping. */
int rv_kineto__int_arg(rv_kineto__reader *r, int depth, int fold, int64_t *out);

/* A string (numbers kept as their text) into b (borrowed); *ok = 0 when
 * absent, cut or of another type (skipped). */
int rv_kineto__text_value(rv_kineto__reader *r, int depth, rv_buf *b, int *ok);

/* Interns s[0..n) (borrowed; NULL: "") into the trace's string table,
 * repairing invalid UTF-8; UINT32_MAX and *rc set on failure. */
uint32_t rv_kineto__intern(rv_kineto__reader *r, const char *s, size_t n, int *rc);

/* Sets r up empty for opts (borrowed, not NULL): its buffers, a new
 * trace and shapes scratch; the scanner is the caller's to open. 0 or
 * RV_ERR_NOMEM (r then needs rv_kineto__reader_free all the same). */
int rv_kineto__reader_init(rv_kineto__reader *r, const rv_kineto_opts *opts);

/* Frees what r holds, its trace included (NULL it first to keep it). */
void rv_kineto__reader_free(rv_kineto__reader *r);

/* Room for more flows (r->flows grows by doubling, up to the events'
 * cap). 0, or RV_ERR_LIMIT past the cap, RV_ERR_NOMEM. */
int rv_kineto__flows_room(rv_kineto__reader *r, size_t more);

/* One element of "traceEvents" at the scanner's position (depth: its
 * nesting), kept, counted as skipped, or taken as a flow. */
int rv_kineto__parse_event(rv_kineto__reader *r, int depth);

/* The two-core read (rv_kineto_par.c). */

/* Whether r, its scanner just opened on the input, should read on two
 * cores; then moves the input to a second scanner that splits it into
 * parts, starts the helper thread and turns r->js into a feed of those
 * parts. 0 (either way), or a negative rv_err with r->js.err filled. */
int rv_kineto__par_start(rv_kineto__reader *r);

/* Stops the helper and frees the parts. NULL-safe on r->par. */
void rv_kineto__par_stop(rv_kineto__reader *r);

/* In "traceEvents", just past a ',': when the scanner's part is used up
 * here, takes in the parts read ahead on both cores that follow on whole
 * and moves the scanner to the first byte left to read. 0: read on at the
 * next element; 1: read on at the ',' or ']' after an element (a part
 * closed the array); negative rv_err. */
int rv_kineto__par_join(rv_kineto__reader *r);

/* An event's "args" object (rv_kineto_args.c), its '{' already eaten,
 * into ev: ids, launch geometry, sync, collective sizes and process
 * groups, record_shapes through r->shp. */
int rv_kineto__parse_args(rv_kineto__reader *r, int depth, rv_event *ev);

#endif
