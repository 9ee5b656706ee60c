/* Ingest, the SQL half: the duplicate check, the platform row, and the
 * one transaction that writes the trace row, original, snapshot, the
 * trace's overhead sketches (COPY) and merges them into its platform's; plus the entry points that
 * run both halves (rv_db_ingest.h; the CPU half is rv_db_ingest_prep.c). */
#include "rv_db_ingest.h"
#include "rv_db_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ingest/rv_ingest.h"
#include "util/rv_buf.h"
#include "util/rv_sha256.h"
#include "reader/rv_snapshot.h"

#define COPY_CHUNK (1u << 20)

/* COPY text format escaping. */
static void add_copy_text(rv_buf *b, const char *s)
{
    const char *run = s;
    for (; *s; s++) {
        const char *esc = NULL;
        switch (*s) {
        case '\\': esc = "\\\\"; break;
        case '\t': esc = "\\t"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        default: break;
        }
        if (esc) {
            rv_buf_add(b, run, (size_t)(s - run));
            rv_buf_adds(b, esc);
            run = s + 1;
        }
    }
    rv_buf_add(b, run, (size_t)(s - run));
}

/* A sketch's histogram as a PostgreSQL array literal pair ("{k,...}" and
 * "{c,...}"), appended to b. */
static void add_sketch_arrays(rv_buf *b, const rv_sketch *sk)
{
    char num[32];
    int first = 1;
    rv_buf_adds(b, "{");
    for (uint32_t i = 0; i < sk->nbins; i++) {
        if (!sk->bins[i])
            continue;
        snprintf(num, sizeof(num), first ? "%d" : ",%d", sk->lo + (int32_t)i);
        rv_buf_adds(b, num);
        first = 0;
    }
    rv_buf_adds(b, "}\t{");
    first = 1;
    for (uint32_t i = 0; i < sk->nbins; i++) {
        if (!sk->bins[i])
            continue;
        snprintf(num, sizeof(num), first ? "%llu" : ",%llu", (unsigned long long)sk->bins[i]);
        rv_buf_adds(b, num);
        first = 0;
    }
    rv_buf_adds(b, "}");
}

/* COPY of the trace's per-group sketches: O(groups x buckets), what the
 * platform's statistics are merged from (raw samples are not stored). */
static int copy_sketches(rv_db__conn *pc, const rv_trace *t, const rv_db_ingest_prep *p,
                         const char *trace_id, rv_error *err)
{
    /* Errors are sticky: one check per line. */
    rv_buf b = RV_BUF_INIT((size_t)64 << 20);
    int rc = 0;
    PGresult *r = PQexec(pc->c, "COPY trace_overhead_sketches (trace_id, type, op_name, n, zeros, "
                                "sum, sumsq, min, max, keys, counts) FROM STDIN");
    if (PQresultStatus(r) != PGRES_COPY_IN) {
        rc = rv_db__fail(err, "COPY trace_overhead_sketches", pc->c, r);
        PQclear(r);
        return rc;
    }
    PQclear(r);
    for (size_t i = 0; i < p->f.nsketches && !rc; i++) {
        const rv_overhead_sketch_group *g = &p->f.sketches[i];
        char line[64], mom[160];
        snprintf(line, sizeof(line), "%s\t%d\t", trace_id, g->type);
        rv_buf_adds(&b, line);
        add_copy_text(&b, g->name == RV_OH_OVERALL ? "*" : rv_trace_str(t, g->name));
        snprintf(mom, sizeof(mom), "\t%llu\t%llu\t%.17g\t%.17g\t%.17g\t%.17g\t",
                 (unsigned long long)g->sk.n, (unsigned long long)g->sk.zeros, g->sk.sum,
                 g->sk.sumsq, g->sk.min, g->sk.max);
        rv_buf_adds(&b, mom);
        add_sketch_arrays(&b, &g->sk);
        rv_buf_adds(&b, "\n");
        if (b.err)
            rc = rv_error_set(err, b.err, -1, -1, "COPY: a sketch line does not fit the buffer");
        else if (b.len >= COPY_CHUNK || i + 1 == p->f.nsketches) {
            if (PQputCopyData(pc->c, b.p, (int)b.len) != 1)
                rc = rv_db__fail(err, "COPY data", pc->c, NULL);
            rv_buf_reset(&b);
        }
    }
    if (PQputCopyEnd(pc->c, rc ? "aborted by client" : NULL) != 1 && !rc)
        rc = rv_db__fail(err, "COPY end", pc->c, NULL);
    while ((r = PQgetResult(pc->c))) {
        if (PQresultStatus(r) != PGRES_COMMAND_OK && !rc)
            rc = rv_db__fail(err, "COPY trace_overhead_sketches", pc->c, r);
        PQclear(r);
    }
    rv_buf_free(&b);
    return rc;
}

/* A short lookup on a borrowed connection: when the content is stored
 * already, fills res as a duplicate and returns 1; 0 when it is new. */
static int find_duplicate(rv_db *db, const char *sha, rv_db_ingest_result *res, rv_error *err)
{
    int64_t existing = 0;
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    int rc = rv_db__trace_id_by_sha(pc, sha, &existing, err);
    rv_db__release(db, pc);
    if (rc)
        return rc;
    if (!existing)
        return 0;
    res->trace_id = existing;
    res->duplicate = 1;
    return 1;
}

/* INSERT of one row with a bytea last parameter. */
static int insert_bytes(rv_db__conn *pc, const char *what, const char *sql, const char *a,
                        const char *b, const char *c, const void *bytes, size_t n, rv_error *err)
{
    const char *vals[] = {a, b, c, bytes};
    int lens[] = {0, 0, 0, (int)n};
    int fmts[] = {0, 0, 0, 1};
    PGresult *r = PQexecParams(pc->c, sql, 4, NULL, vals, lens, fmts, 0);
    int rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : rv_db__fail(err, what, pc->c, r);
    PQclear(r);
    return rc;
}

int rv_db_ingest_commit(rv_db *db, const rv_db_ingest_prep *p, rv_db_ingest_result *res,
                        rv_error *err)
{
    char pid_s[24], tid_s[24], rank_s[16], ws_s[16], meas_s[40], tasks_s[24], it_s[16];
    PGresult *r = NULL;
    int64_t existing = 0;
    int rc = 0;

    memset(res, 0, sizeof(*res));
    memcpy(res->sha256, p->sha256, sizeof(res->sha256));
    rv_db__conn *pc = rv_db__acquire(db, err);
    if (!pc)
        return RV_ERR_IO;
    /* A big trace's transaction is long by nature: its deadline grows with
     * the bytes it writes (1 s per MiB on top of RV_DB__LONG_MS). */
    rv_db__deadline(db, pc,
                    RV_DB__LONG_MS + (unsigned)((p->stored_len + p->f.snap_len) >> 20) * 1000u);
    rc = rv_db__trace_id_by_sha(pc, p->sha256, &existing, err);
    if (rc)
        goto out;
    if (existing) {
        res->trace_id = existing;
        res->duplicate = 1;
        goto out;
    }
    /* The platform row is committed on its own: harmless if the ingest
     * then fails, and it keeps concurrent ingests of one platform from
     * queueing behind each other's whole transaction. */
    rc = rv_db__platform_upsert(pc, &p->platform, p->platform_key, &res->platform_id, err);
    if (rc)
        goto out;
    rv_db__id_text(pid_s, res->platform_id);
    snprintf(rank_s, sizeof(rank_s), "%d", p->rank);
    snprintf(ws_s, sizeof(ws_s), "%d", p->world_size);
    snprintf(meas_s, sizeof(meas_s), "%.17g", p->f.measured_us);
    snprintf(tasks_s, sizeof(tasks_s), "%zu", p->t->nevents);
    snprintf(it_s, sizeof(it_s), "%d", p->f.iterations);

    rc = rv_db__exec(pc, "BEGIN", "BEGIN", err);
    if (rc)
        goto out;
    const char *vals[] = {p->job,
                          p->rank >= 0 ? rank_s : NULL,
                          p->world_size >= 1 ? ws_s : NULL,
                          pid_s,
                          p->source_format,
                          p->f.measured_us > 0 ? meas_s : NULL,
                          tasks_s,
                          it_s,
                          p->sha256,
                          p->summary_txt,
                          p->tags};
    r = rv_db__q(pc, "insert trace",
                 "INSERT INTO traces (job, rank, world_size, platform_id, source_format, "
                 "measured_us, tasks, iterations, content_sha256, summary, tags) VALUES ($1, $2, "
                 "$3, $4, $5, $6, $7, $8, $9, $10::jsonb, $11::text[]) ON CONFLICT "
                 "(content_sha256) DO NOTHING RETURNING id",
                 11, vals, PGRES_TUPLES_OK, err);
    if (!r) {
        rc = RV_ERR_IO;
        goto out;
    }
    if (PQntuples(r) == 0) {
        /* A concurrent upload of the same bytes committed first. */
        PQclear(PQexec(pc->c, "ROLLBACK"));
        rc = rv_db__trace_id_by_sha(pc, p->sha256, &existing, err);
        res->trace_id = existing;
        res->duplicate = 1;
        goto out;
    }
    res->trace_id = strtoll(PQgetvalue(r, 0, 0), NULL, 10);
    rv_db__id_text(tid_s, res->trace_id);
    if (db->hook)
        db->hook(1, db->hook_ctx);
    char size_s[24], ver_s[16], raw_s[24];
    uint64_t raw_len = 0;
    snprintf(size_s, sizeof(size_s), "%zu", p->len);
    rv_snapshot_peek(p->f.snap, p->f.snap_len, NULL, &raw_len, NULL);
    snprintf(ver_s, sizeof(ver_s), "%d", RV_SNAPSHOT_VERSION);
    snprintf(raw_s, sizeof(raw_s), "%llu", (unsigned long long)raw_len);
    rc = insert_bytes(pc, "store original",
                      "INSERT INTO trace_originals (trace_id, encoding, size, bytes) VALUES ($1, "
                      "$2, $3, $4)",
                      tid_s, p->already_gzip ? "identity" : "gzip", size_s, p->stored,
                      p->stored_len, err);
    if (!rc)
        rc = insert_bytes(pc, "store snapshot",
                          "INSERT INTO trace_snapshots (trace_id, format_version, raw_size, "
                          "bytes) VALUES ($1, $2, $3, $4)",
                          tid_s, ver_s, raw_s, p->f.snap, p->f.snap_len, err);
    if (!rc && p->f.nsketches)
        rc = copy_sketches(pc, p->t, p, tid_s, err);
    if (!rc && p->keff[0])
        rc = rv_db__kmodels_merge_trace(pc, pid_s, tid_s, (const char *const *)p->keff, err);
    if (rc)
        goto out;
    if (db->hook)
        db->hook(2, db->hook_ctx);
    if (p->f.nsketches) {
        /* The platform's statistics grow by this trace's sketches in one
         * upsert, the transaction's last statement, so the rows it locks
         * are held only until the COMMIT below. */
        const char *mv[] = {pid_s, tid_s};
        PGresult *m =
            rv_db__q(pc, "merge overhead statistics", "SELECT rv_overheads_merge_trace($1, $2)", 2,
                     mv, PGRES_TUPLES_OK, err);
        if (!m) {
            rc = RV_ERR_IO;
            goto out;
        }
        PQclear(m);
    }
    if (db->hook)
        db->hook(3, db->hook_ctx);
    if ((rc = rv_db__training_record(pc, p->job, p->rank, p->world_size, p->writer, p->writer_admin,
                                     err)) != 0)
        goto out;
    rc = rv_db__exec(pc, "COMMIT", "COMMIT", err);
    if (rc)
        goto out;
    res->samples = p->f.samples.n;
out:
    if (rc)
        res->trace_id = res->duplicate ? res->trace_id : 0;
    PQclear(r);
    rv_db__release(db, pc);
    return rc;
}

/* validate, then everything but the hash for content of hash sha. */
static int ingest_hashed(rv_db *db, const rv_trace *t, const void *orig, size_t len,
                         const rv_db_ingest_meta *meta, const char *sha, rv_db_ingest_result *res,
                         rv_error *err)
{
    rv_db_ingest_prep *p = NULL;
    int rc = rv_db__ingest_validate(t, orig, len, meta, err);
    if (!rc)
        rc = rv_db__ingest_prepare_hashed(t, orig, len, meta, sha, &p, err);
    if (!rc)
        rc = rv_db_ingest_commit(db, p, res, err);
    rv_db_ingest_prep_free(p);
    return rc;
}

int rv_db_ingest(rv_db *db, const rv_trace *t, const void *orig, size_t len,
                 const rv_db_ingest_meta *meta, rv_db_ingest_result *res, rv_error *err)
{
    memset(res, 0, sizeof(*res));
    int rc = rv_db__ingest_validate(t, orig, len, meta, err);
    if (rc)
        return rc;
    rv_sha256_hex(orig, len, res->sha256);
    /* Answer a duplicate before the CPU work. */
    rc = find_duplicate(db, res->sha256, res, err);
    if (rc)
        return rc < 0 ? rc : 0;
    char sha[65];
    memcpy(sha, res->sha256, sizeof(sha));
    return ingest_hashed(db, t, orig, len, meta, sha, res, err);
}

/* A reader limit that is one of the caps in meta (the reader says which
 * in err->reason) names it in err->field, so that the API can answer 413
 * naming the limit. */
static void name_reader_limit(const rv_db_ingest_meta *meta, rv_error *err)
{
    char why[128];

    if (!err || !meta)
        return;
    snprintf(why, sizeof(why), "%.120s", err->message);
    if (meta->max_trace_bytes && err->reason == RV_REASON_INPUT_BYTES)
        rv_error_field(err, RV_ERR_LIMIT, "max_trace_bytes",
                       "the trace is over this server's limit of %zu bytes decompressed "
                       "(max_trace_bytes): %s",
                       meta->max_trace_bytes, why);
    else if (meta->max_events && err->reason == RV_REASON_EVENTS)
        rv_error_field(err, RV_ERR_LIMIT, "max_events",
                       "the trace has more than %zu events, this server's limit "
                       "(max_events): %s",
                       meta->max_events, why);
}

int rv_db_ingest_buffer(rv_db *db, const void *orig, size_t len, const rv_db_ingest_meta *meta,
                        rv_db_ingest_result *res, rv_error *err)
{
    memset(res, 0, sizeof(*res));
    size_t cap = meta && meta->max_bytes ? meta->max_bytes : RV_DB__DEFAULT_MAX_BYTES;
    if (!orig || len == 0)
        return rv_error_set(err, RV_ERR_INVALID, -1, -1, "the upload is empty");
    if (len > cap)
        return rv_error_set(err, RV_ERR_LIMIT, -1, -1,
                            "the upload is %zu bytes, over the %zu-byte cap", len, cap);
    /* Answer a duplicate before spending time on parsing. */
    rv_sha256_hex(orig, len, res->sha256);
    int rc = find_duplicate(db, res->sha256, res, err);
    if (rc)
        return rc < 0 ? rc : 0;
    char sha[65];
    memcpy(sha, res->sha256, sizeof(sha));
    rv_trace *t = NULL;
    rv_ingest_opts io = {.format = RV_INGEST_KINETO,
                         .max_input_bytes = meta ? meta->max_trace_bytes : 0,
                         .max_events = meta ? meta->max_events : 0};
    rc = rv_ingest_read(orig, len, &io, &t, err);
    if (rc == RV_ERR_LIMIT)
        name_reader_limit(meta, err);
    if (rc)
        return rc;
    rc = ingest_hashed(db, t, orig, len, meta, sha, res, err);
    rv_trace_free(t);
    return rc;
}

int rv_db_ingest_file(rv_db *db, const char *path, const rv_db_ingest_meta *meta,
                      rv_db_ingest_result *res, rv_error *err)
{
    memset(res, 0, sizeof(*res));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return rv_error_set(err, RV_ERR_IO, -1, -1, "cannot open %s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return rv_error_set(err, RV_ERR_IO, -1, -1, "%s is not a regular file", path);
    }
    if (sb.st_size == 0) {
        close(fd);
        return rv_error_set(err, RV_ERR_INVALID, -1, -1, "%s is empty", path);
    }
    void *m = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (m == MAP_FAILED)
        return rv_error_set(err, RV_ERR_IO, -1, -1, "cannot map %s: %s", path, strerror(errno));
    int rc = rv_db_ingest_buffer(db, m, (size_t)sb.st_size, meta, res, err);
    munmap(m, (size_t)sb.st_size);
    return rc;
}

void rv_db_set_ingest_hook(rv_db *db, rv_db_ingest_hook fn, void *ctx)
{
    db->hook = fn;
    db->hook_ctx = ctx;
}
