/* Trace endpoints: upload, list, get, delete, original bytes; platforms and
 * their overhead statistics; loading a stored trace for the simulator. */
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "hw/rv_hw.h"
#include "rv_api_internal.h"
#include "rv_gcache.h"
#include "rv_db.h"
#include "rv_db_kmodels.h"
#include "rv_auth.h"
#include "util/rv_jsonw.h"
#include "reader/rv_kineto.h"
#include "rv_metrics.h"

#define MAX_TAGS      16
#define LIST_PAGE     500
#define LIST_SCAN_CAP 20000

/* A query parameter, else a header (X-Reverie-Job for "job"). */
static const char *meta_value(rv_req *r, const char *key, const char *header)
{
    const char *v = rv_req_query(r, key);
    return v ? v : rv_req_header(r, header);
}

/* The metadata headers go into text columns: each must be UTF-8 text (query
 * parameters are checked by the HTTP layer). -1 with a 400 naming the
 * header when one is not. */
static int meta_headers_valid(rv_req *r)
{
    static const char *const names[] = {"X-Reverie-Job", "X-Reverie-Tags", "X-Reverie-Rank",
                                        "X-Reverie-World-Size", "X-Reverie-Gpu"};

    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        const char *v = rv_req_header(r, names[i]);
        if (v && rv_jsonw_utf8_valid(v, strlen(v)) != strlen(v)) {
            rv_req_error(r, 400, "invalid_parameter", names[i], "%s is not valid UTF-8 text",
                         names[i]);
            return -1;
        }
    }
    return 0;
}

static int parse_small_int(rv_req *r, const char *field, const char *s, int32_t *out)
{
    char *end;

    if (!s)
        return 0;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (!*s || *end || errno || v < 0 || v > 1000000) {
        rv_req_error(r, 400, "invalid_parameter", field,
                     "%s must be an integer between 0 and 1000000", field);
        return -1;
    }
    *out = (int32_t)v;
    return 0;
}

void rv_api_trace_upload(rv_req *r, void *app)
{
    rv_app *a = app;
    uint64_t size = 0;
    const char *spool = rv_req_spool(r, &size);
    rv_db_ingest_meta meta = {0};
    rv_db_ingest_result res = {0};
    const char *tags[MAX_TAGS];
    char tagbuf[1024];
    rv_error e;

    rv_error_clear(&e);
    meta.rank = RV_NONE;
    meta.world_size = RV_NONE;
    if (!spool || size == 0) {
        rv_req_error(r, 400, "body_required", NULL, "the request body must be a trace");
        goto rejected;
    }
    if (meta_headers_valid(r) != 0)
        goto rejected;
    if (rv_api_disk_guard(r, a, size) != 0)
        goto rejected;
    char who[32];
    unsigned scopes = 0;
    rv_api_caller(a, r, who, sizeof(who), &scopes);
    meta.writer = who;
    meta.writer_admin = (scopes & RV_SCOPE_ADMIN) != 0;
    meta.job = meta_value(r, "job", "X-Reverie-Job");
    if (meta.job && strlen(meta.job) > 256) {
        rv_req_error(r, 400, "invalid_parameter", "job", "job is longer than 256 characters");
        goto rejected;
    }
    if (parse_small_int(r, "rank", meta_value(r, "rank", "X-Reverie-Rank"), &meta.rank) != 0 ||
        parse_small_int(r, "world_size", meta_value(r, "world_size", "X-Reverie-World-Size"),
                        &meta.world_size) != 0)
        goto rejected;
    if (meta.rank != RV_NONE && meta.world_size != RV_NONE && meta.world_size > 0 &&
        meta.rank >= meta.world_size) {
        rv_req_error(r, 400, "invalid_parameter", "rank", "rank %d is not below world_size %d",
                     (int)meta.rank, (int)meta.world_size);
        goto rejected;
    }
    const char *tl = meta_value(r, "tags", "X-Reverie-Tags");
    if (tl) {
        snprintf(tagbuf, sizeof(tagbuf), "%s", tl);
        char *save = NULL;
        for (char *tok = strtok_r(tagbuf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
            while (*tok == ' ')
                tok++;
            if (!*tok)
                continue;
            if (meta.ntags == MAX_TAGS) {
                rv_req_error(r, 400, "invalid_parameter", "tags", "at most %d tags", MAX_TAGS);
                goto rejected;
            }
            tags[meta.ntags++] = tok;
        }
        meta.tags = tags;
    }
    meta.max_bytes = (size_t)a->cfg.upload_cap;
    meta.max_trace_bytes = (size_t)a->cfg.max_trace_bytes;
    meta.max_events = (size_t)a->cfg.max_events;
    /* An execution trace alone: ?kind=et, or found by the Kineto reader. */
    const char *kind = rv_req_query(r, "kind");
    if (kind && strcmp(kind, "et") != 0 && strcmp(kind, "kineto") != 0) {
        rv_req_error(r, 400, "invalid_parameter", "kind", "kind must be kineto or et");
        goto rejected;
    }
    if (kind && strcmp(kind, "et") == 0) {
        if (rv_api_trace_upload_et(r, a, &meta) != 0)
            goto rejected;
        return;
    }
    if (rv_db_ingest_file(a->db, spool, &meta, &res, &e) != 0) {
        if (rv_kineto_error_is_et(&e) && !kind) {
            if (rv_api_trace_upload_et(r, a, &meta) != 0)
                goto rejected;
            return;
        }
        if (e.code == RV_ERR_IO) {
            rv_req_error_rv(r, &e);
            return;
        }
        /* Over one of the server's caps: 413 naming the limit. */
        if (e.code == RV_ERR_LIMIT &&
            (strcmp(e.field, "max_events") == 0 || strcmp(e.field, "max_trace_bytes") == 0)) {
            rv_req_error(r, 413, rv_err_name(e.code), e.field, "%s", e.message);
            goto rejected;
        }
        /* Everything else is about the input: the reader's message says
         * what and where. */
        rv_req_error_rv(r, &e);
        goto rejected;
    }
    rv_api_upload_answer(r, a, &res, size);
    return;
rejected:
    rv_metrics_add(a->metrics, RV_M_UPLOAD_REJECTED, 1);
}

/* Keyset paging over the store with the filters it does not know (job
 * globs) applied here; scans at most LIST_SCAN_CAP rows per call and
 * hands back a cursor to continue. */
void rv_api_trace_list(rv_req *r, void *app)
{
    rv_app *a = app;
    rv_db_trace_filter f = {0};
    const char *job = rv_req_query(r, "job");
    const char *since = rv_req_query(r, "since");
    const char *cursor = rv_req_query(r, "cursor");
    json_t *out = json_array(), *page = NULL;
    int64_t last_id = 0;
    size_t scanned = 0;
    int more = 0, glob = job && strpbrk(job, "*?[") != NULL;
    rv_error e;

    rv_error_clear(&e);
    int64_t limit = rv_req_query_int(r, "limit", 100, 1000);
    int64_t platform = rv_req_query_int(r, "platform", 0, INT64_MAX - 1);
    if (limit < 0 || platform < 0)
        goto out;
    if (limit == 0)
        limit = 100;
    if (cursor) {
        char *end;
        errno = 0;
        long long c = strtoll(cursor, &end, 10);
        if (!*cursor || *end || errno || c <= 0) {
            rv_req_error(r, 400, "invalid_parameter", "cursor", "cursor is not one we issued");
            goto out;
        }
        f.before_id = c;
    }
    char since_t[RV_DB_TIME_MAX];
    if (since && rv_db_time_parse(since, since_t, sizeof(since_t)) != 0) {
        rv_req_error(r, 400, "invalid_parameter", "since",
                     "since must be an RFC 3339 / ISO 8601 time, e.g. 2024-05-01 or "
                     "2024-05-01T12:00:00Z");
        goto out;
    }
    f.platform_id = platform;
    f.job = glob ? NULL : job;
    f.tag = rv_req_query(r, "tag");
    f.since = since; /* compared as a timestamptz by the store */
    f.limit = glob ? LIST_PAGE : (unsigned)limit + 1;
    for (;;) {
        json_decref(page);
        page = NULL;
        if (rv_db_trace_list(a->db, &f, &page, &e) != 0) {
            rv_req_error_rv(r, &e);
            goto out;
        }
        size_t n = json_array_size(page);
        int stop = 0;
        for (size_t i = 0; i < n; i++) {
            json_t *t = json_array_get(page, i);
            int64_t id = (int64_t)json_integer_value(json_object_get(t, "id"));
            if ((size_t)json_array_size(out) == (size_t)limit) {
                more = 1;
                stop = 1;
                break;
            }
            last_id = id;
            scanned++;
            const char *tj = json_string_value(json_object_get(t, "job"));
            if (glob && fnmatch(job, tj ? tj : "", 0) != 0)
                continue;
            json_array_append(out, t);
        }
        if (stop || n < f.limit)
            break;
        if (!glob) {
            more = 1;
            break;
        }
        if (scanned >= LIST_SCAN_CAP) {
            more = 1;
            break;
        }
        f.before_id = last_id;
    }
    json_t *body = json_pack("{s:O,s:I}", "traces", out, "count", (json_int_t)json_array_size(out));
    if (body && more && last_id > 0) {
        char c[32];
        snprintf(c, sizeof(c), "%lld", (long long)last_id);
        json_object_set_new(body, "next_cursor", json_string(c));
    } else if (body) {
        json_object_set_new(body, "next_cursor", json_null());
    }
    rv_req_respond_json(r, 200, body);
out:
    json_decref(page);
    json_decref(out);
}

int rv_api_fetch_by_id(rv_req *r, rv_app *a,
                       int (*get)(struct rv_db *, int64_t, json_t **, rv_error *), int64_t *id,
                       json_t **out)
{
    rv_error e;

    *out = NULL;
    rv_error_clear(&e);
    *id = rv_api_id_param(r, "id");
    if (*id < 0)
        return -1;
    if (get(a->db, *id, out, &e) != 0) {
        rv_req_error_rv(r, &e);
        return -1;
    }
    return 0;
}

void rv_api_get_by_id(rv_req *r, rv_app *a,
                      int (*get)(struct rv_db *, int64_t, json_t **, rv_error *))
{
    int64_t id;
    json_t *j;
    if (rv_api_fetch_by_id(r, a, get, &id, &j) == 0)
        rv_req_respond_json(r, 200, j);
}

/* A trace that is not there, in the user's words (the store says "no
 * snapshot for trace N" or "no trace with id N"). */
static void trace_not_found_words(rv_error *e, int64_t id)
{
    if (e->code == RV_ERR_NOTFOUND)
        rv_error_field(e, RV_ERR_NOTFOUND, "id", "trace %lld does not exist", (long long)id);
}

/* The hardware row the models resolve the trace's GPU to (the lookup every
 * what-if makes), so that clients need not match names themselves: the
 * row as GET /v1/hardware lists it, with the GPU name it was matched from
 * and the device memory the trace records; null when the GPU is not in
 * the table. */
static void add_hardware(json_t *trace)
{
    const char *gpu =
        json_string_value(json_object_get(json_object_get(trace, "platform"), "gpu_model"));
    const rv_hw *hw = gpu ? rv_hw_lookup(gpu) : NULL;
    json_t *row = hw ? rv_api_hw_json(hw) : NULL;
    if (row) {
        json_t *dev =
            json_array_get(json_object_get(json_object_get(trace, "summary"), "devices"), 0);
        json_int_t mem = json_integer_value(json_object_get(dev, "total_mem"));
        json_object_set_new(row, "matched_from", json_string(gpu));
        json_object_set_new(row, "memory_bytes", mem > 0 ? json_integer(mem) : json_null());
    }
    json_object_set_new(trace, "hardware", row ? row : json_null());
}

void rv_api_trace_get(rv_req *r, void *app)
{
    rv_app *a = app;
    int64_t id = rv_api_id_param(r, "id");
    json_t *j = NULL;
    rv_error e;

    rv_error_clear(&e);
    if (id < 0)
        return;
    if (rv_db_trace_get(a->db, id, &j, &e) != 0) {
        trace_not_found_words(&e, id);
        rv_req_error_rv(r, &e);
        return;
    }
    add_hardware(j);
    rv_req_respond_json(r, 200, j);
}

void rv_api_trace_delete(rv_req *r, void *app)
{
    rv_app *a = app;
    int64_t id = rv_api_id_param(r, "id");
    rv_error e;

    rv_error_clear(&e);
    if (id < 0)
        return;
    if (rv_db_trace_delete(a->db, id, &e) != 0) {
        trace_not_found_words(&e, id);
        rv_req_error_rv(r, &e);
        return;
    }
    /* After the database let it go, so a request loading it meanwhile
     * cannot put it back (ids are never reused). */
    rv_gcache_forget(a->gcache, id);
    rv_req_respond_json(r, 200, json_pack("{s:I,s:b}", "id", (json_int_t)id, "deleted", 1));
}

static int accepts_gzip(rv_req *r)
{
    const char *ae = rv_req_header(r, "Accept-Encoding");
    return ae && strstr(ae, "gzip") != NULL;
}

/* An unlinked file in the spool folder, for a body too big for memory:
 * its fd, or -1 with err set. */
static int spool_fd(rv_app *a, rv_error *err)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/original-XXXXXX",
             a->cfg.spool_dir ? a->cfg.spool_dir : "/tmp");
    int fd = mkostemp(path, O_CLOEXEC);
    if (fd < 0) {
        rv_error_set(err, RV_ERR_IO, -1, -1, "cannot create a spool file: %s", strerror(errno));
        return -1;
    }
    unlink(path);
    return fd;
}

int rv_api_original_map(rv_app *a, int64_t id, int mode, rv_api_mapped *m, rv_error *err)
{
    uint64_t n = 0;
    memset(m, 0, sizeof(*m));
    int fd = spool_fd(a, err);
    if (fd < 0)
        return RV_ERR_IO;
    /* Bounded by the same cap as an upload: what inflates past it was
     * refused there (or stored by an older server); and by the disk. */
    uint64_t room = rv_api_spool_room(a), cap = a->cfg.max_trace_bytes;
    int by_disk = room < cap || !cap;
    int rc =
        rv_db_original_write(a->db, id, fd, mode, by_disk ? (room ? room : 1) : cap, NULL, &n, err);
    if (rc == RV_ERR_LIMIT && by_disk)
        rc = rv_error_field(err, RV_ERR_LIMIT, "disk_reserve",
                            "the original does not fit on the spool disk above this server's "
                            "free-space reserve (--disk-reserve); retry later");
    if (!rc && n == 0)
        rc = rv_error_set(err, RV_ERR_INTERNAL, -1, -1,
                          "the stored original of trace %lld is empty", (long long)id);
    if (!rc) {
        /* Pages of a file: the kernel can drop them under pressure, which
         * it cannot do with a heap copy. */
        void *p = mmap(NULL, (size_t)n, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
            rc = rv_error_set(err, RV_ERR_IO, -1, -1, "cannot map the original: %s",
                              strerror(errno));
        else {
            m->bytes = p;
            m->len = (size_t)n;
        }
    }
    close(fd);
    if (rc)
        trace_not_found_words(err, id);
    return rc;
}

void rv_api_unmap(rv_api_mapped *m)
{
    if (m && m->bytes)
        munmap((void *)m->bytes, m->len);
    if (m) {
        m->bytes = NULL;
        m->len = 0;
    }
}

/* Streams the original through an unlinked spool file (1 MiB at a time
 * from the database), so that memory stays small whatever it inflates to. */
void rv_api_trace_original(rv_req *r, void *app)
{
    rv_app *a = app;
    int64_t id = rv_api_id_param(r, "id");
    rv_db_original_info info;
    uint64_t n = 0;
    rv_error e;

    rv_error_clear(&e);
    if (id < 0)
        return;
    int fd = spool_fd(a, &e);
    if (fd < 0) {
        rv_req_error(r, 503, "unavailable", NULL, "%s", e.message);
        return;
    }
    /* Stored as gzip(received): a client that takes gzip gets it as is and
     * unpacks the received bytes; others get them inflated here. */
    int gz_ok = accepts_gzip(r);
    int mode = gz_ok ? RV_DB_ORIGINAL_STORED : RV_DB_ORIGINAL_AS_RECEIVED;
    /* The spool file holds the answer until it is sent: never past the
     * disk's free-space reserve. */
    uint64_t room = rv_api_spool_room(a);
    if (rv_db_original_write(a->db, id, fd, mode, room == UINT64_MAX ? 0 : (room ? room : 1), &info,
                             &n, &e) != 0 ||
        lseek(fd, 0, SEEK_SET) != 0) {
        close(fd);
        if (e.code == RV_ERR_LIMIT) {
            rv_api_spool_full(r, a, room);
            return;
        }
        if (e.code == RV_ERR_PARSE) {
            rv_req_error(r, 500, "internal", NULL, "the stored original of trace %lld is damaged",
                         (long long)id);
            return;
        }
        trace_not_found_words(&e, id);
        rv_req_error_rv(r, &e);
        return;
    }
    char cd[96];
    snprintf(cd, sizeof(cd), "attachment; filename=\"trace-%lld.json%s\"", (long long)id,
             info.gzip_wrapped ? "" : ".gz");
    rv_req_add_header(r, "Content-Disposition", cd);
    if (info.gzip_wrapped && gz_ok)
        rv_req_add_header(r, "Content-Encoding", "gzip");
    rv_req_respond_fd(r, 200, info.gzip_wrapped ? "application/json" : "application/gzip", fd, n);
}

void rv_api_platform_list(rv_req *r, void *app)
{
    rv_app *a = app;
    json_t *arr = NULL;
    rv_error e;

    rv_error_clear(&e);
    if (rv_db_platform_list(a->db, &arr, &e) != 0) {
        rv_req_error_rv(r, &e);
        return;
    }
    rv_req_respond_json(r, 200, json_pack("{s:o}", "platforms", arr));
}

/* 1 when platform id exists, 0 when not, a negative rv_err on a database
 * error. The store has no single-platform lookup; the list is one row per
 * machine identity, so it stays small. */
static int platform_exists(rv_app *a, int64_t id, rv_error *err)
{
    json_t *arr = NULL;
    size_t i;
    json_t *p;
    int found = 0;

    if (rv_db_platform_list(a->db, &arr, err) != 0)
        return err->code ? err->code : RV_ERR_IO;
    json_array_foreach(arr, i, p)
    {
        if (json_integer_value(json_object_get(p, "id")) == id) {
            found = 1;
            break;
        }
    }
    json_decref(arr);
    return found;
}

void rv_api_upload_answer(rv_req *r, rv_app *a, const rv_db_ingest_result *res, size_t bytes)
{
    json_t *t = NULL;
    rv_error e;
    rv_error_clear(&e);
    rv_metrics_add(a->metrics, RV_M_INGEST_BYTES, bytes);
    rv_metrics_add(a->metrics, res->duplicate ? RV_M_UPLOAD_DUPLICATES : RV_M_UPLOADS, 1);
    /* A duplicate is someone's stored trace: a token that may not read
     * learns only its id, nothing it did not send. */
    char who[32];
    unsigned scopes = 0;
    rv_api_caller(a, r, who, sizeof(who), &scopes);
    int may_read = (scopes & (RV_SCOPE_READ | RV_SCOPE_ADMIN)) != 0;
    if ((!res->duplicate || may_read) && rv_db_trace_get(a->db, res->trace_id, &t, &e) != 0)
        t = NULL;
    if (!t)
        t = json_object();
    json_object_set_new(t, "id", json_integer(res->trace_id));
    json_object_set_new(t, "duplicate", json_boolean(res->duplicate));
    char loc[64];
    snprintf(loc, sizeof(loc), "/v1/traces/%lld", (long long)res->trace_id);
    rv_req_add_header(r, "Location", loc);
    rv_req_respond_json(r, res->duplicate ? 200 : 201, t);
}

void rv_api_platform_overheads(rv_req *r, void *app)
{
    rv_app *a = app;
    int64_t id = rv_api_id_param(r, "id");
    json_t *arr = NULL;
    rv_error e;

    rv_error_clear(&e);
    if (id < 0)
        return;
    if (rv_db_overheads_get(a->db, id, &arr, &e) != 0) {
        rv_req_error_rv(r, &e);
        return;
    }
    /* No rows: a known platform without statistics yet (200, empty list) or
     * no such platform (404); only then is the platform list consulted. */
    if (json_array_size(arr) == 0) {
        int known = platform_exists(a, id, &e);
        if (known <= 0) {
            json_decref(arr);
            if (known < 0)
                rv_req_error_rv(r, &e);
            else
                rv_req_error(r, 404, "not_found", "id", "platform %lld does not exist",
                             (long long)id);
            return;
        }
    }
    rv_req_respond_json(
        r, 200,
        json_pack("{s:I,s:s,s:o}", "platform_id", (json_int_t)id, "unit", "us", "overheads", arr));
}

void rv_api_platform_kmodels(rv_req *r, void *app)
{
    rv_app *a = app;
    int64_t id = rv_api_id_param(r, "id"), ntraces = 0;
    rv_error e;
    rv_kmodel_acc *acc;

    rv_error_clear(&e);
    if (id < 0)
        return;
    if ((acc = malloc(sizeof(*acc))) == NULL) {
        rv_req_error(r, 500, "internal", NULL, "out of memory");
        return;
    }
    if (rv_db_platform_kmodel(a->db, id, acc, &ntraces, &e) != 0) {
        rv_req_error_rv(r, &e);
        free(acc);
        return;
    }
    /* A platform without kernel models yet answers 200 with no classes. */
    rv_req_respond_json(r, 200,
                        json_pack("{s:I,s:I,s:f,s:s,s:o}", "platform_id", (json_int_t)id, "traces",
                                  (json_int_t)ntraces, "kernels", rv_kmodel_acc_count(acc),
                                  "efficiency", "geometric mean of roofline time / measured time",
                                  "classes", rv_kmodel_acc_render(acc)));
    free(acc);
}

int rv_api_load(rv_app *a, int64_t id, rv_loaded *out, rv_error *err)
{
    rv_trace *t = NULL;
    rv_graph *g = NULL;
    rv_sim *base = NULL;
    rv_gentry *e;
    memset(out, 0, sizeof(*out));
    out->id = id;
    out->cache = a->gcache;
    e = rv_gcache_get(a->gcache, id);
    if (!e) {
        if (rv_db_snapshot_load(a->db, id, &t, err) != 0) {
            trace_not_found_words(err, id);
            goto fail;
        }
        if (rv_graph_build(t, NULL, &g, err) != 0)
            goto fail;
        if (rv_sim_run(g, RV_SCHED_EARLIEST_START, &base, err) != 0)
            goto fail;
        rv_metrics_add(a->metrics, RV_M_SIMULATIONS, 1);
        e = rv_gcache_put(a->gcache, id, t, g, base); /* takes the three */
        t = NULL;
        g = NULL;
        base = NULL;
        if (!e) {
            rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory loading trace %lld",
                         (long long)id);
            goto fail;
        }
    }
    out->entry = e;
    out->trace = e->trace;
    out->graph = e->graph;
    out->base = e->base;
    return 0;
fail:
    rv_sim_free(base);
    rv_graph_free(g);
    rv_trace_free(t);
    return err->code ? err->code : RV_ERR_INTERNAL;
}

void rv_api_loaded_free(rv_loaded *l)
{
    if (!l)
        return;
    rv_gcache_release(l->cache, l->entry);
    l->entry = NULL;
    l->base = NULL;
    l->graph = NULL;
    l->trace = NULL;
}
