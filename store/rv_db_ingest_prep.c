/* Ingest, the CPU half: everything an ingest computes before it takes a
 * database connection (checks, gzip of the original, snapshot encoding,
 * overhead-sample extraction, the summary and the row's values). No libpq
 * call in this file (rv_db_ingest_prep.h). */
#include "rv_db_ingest_prep.h"
#include "rv_db_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cost/rv_flops.h"
#include "hw/rv_hw.h"
#include "util/rv_jsonw.h"
#include "cost/rv_kmodel_acc.h"
#include "graph/rv_graph.h"
#include "graph/rv_overhead.h"
#include "simulate/rv_report.h"
#include "reader/rv_snapshot.h"
#include "util/rv_sha256.h"

#define SNAPSHOT_LEVEL 1
#define TAGS_MAX       (1u << 20)

static const rv_db_ingest_meta no_meta = {.rank = RV_NONE, .world_size = RV_NONE};

/* A text[] literal {"a","b"} with " and \ escaped (new); NULL past
 * TAGS_MAX bytes or on OOM. */
static char *tags_literal(const char *const *tags, size_t n)
{
    size_t len = 2;
    for (size_t i = 0; i < n; i++)
        for (const char *s = tags[i] ? tags[i] : ""; *s; s++)
            len += *s == '"' || *s == '\\' ? 2 : 1;
    len += 3 * n; /* quotes and commas */
    if (len + 1 > TAGS_MAX)
        return NULL;
    char *out = malloc(len + 1), *o = out;
    if (!out)
        return NULL;
    *o++ = '{';
    for (size_t i = 0; i < n; i++) {
        if (i)
            *o++ = ',';
        *o++ = '"';
        for (const char *s = tags[i] ? tags[i] : ""; *s; s++) {
            if (*s == '"' || *s == '\\')
                *o++ = '\\';
            *o++ = *s;
        }
        *o++ = '"';
    }
    *o++ = '}';
    *o = '\0';
    return out;
}

/* Measured iteration as the engine sees it: the median step, else the
 * span (rv_report_trace_figures). */
static void measure_iterations(const rv_trace *t, double *measured_us, int *iterations)
{
    rv_trace_figures f;
    rv_report_trace_figures(t, &f);
    *measured_us = f.measured_us;
    *iterations = f.iterations;
}

/* GPU tasks (kernel, memcpy, memset) with a timestamp: what a simulation
 * needs; none means nothing to simulate (rv_graph's own check). */
static size_t count_gpu_tasks(const rv_trace *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->nevents; i++)
        if (rv_cat_is_gpu_task(t->events[i].cat) && t->events[i].ts_ns > 0)
            n++;
    return n;
}

static int by_start(const void *a, const void *b)
{
    const int64_t *x = a, *y = b;
    return x[0] < y[0] ? -1 : x[0] > y[0];
}

/* Time at least one GPU stream is busy: the union of every GPU task's
 * interval (concurrent streams count once, as the trace page's GPU
 * utilization does), in ns; -1 when out of memory. */
static int64_t gpu_busy_union(const rv_trace *t)
{
    size_t n = 0;
    for (size_t i = 0; i < t->nevents; i++)
        n += rv_cat_is_gpu_task(t->events[i].cat) != 0;
    if (n == 0)
        return 0;
    int64_t *iv = malloc(n * 2 * sizeof(*iv)), busy = 0;
    if (!iv)
        return -1;
    n = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if (!rv_cat_is_gpu_task(e->cat))
            continue;
        iv[2 * n] = e->ts_ns;
        iv[2 * n + 1] = e->ts_ns + (e->dur_ns > 0 ? e->dur_ns : 0);
        n++;
    }
    qsort(iv, n, 2 * sizeof(*iv), by_start);
    int64_t a = iv[0], b = iv[1];
    for (size_t i = 1; i < n; i++) {
        if (iv[2 * i] > b) {
            busy += b - a;
            a = iv[2 * i];
            b = iv[2 * i + 1];
        } else if (iv[2 * i + 1] > b) {
            b = iv[2 * i + 1];
        }
    }
    busy += b - a;
    free(iv);
    return busy;
}

/* New summary object; NULL when out of memory. */
static json_t *build_summary(const rv_trace *t, double measured_us, int iterations, size_t nsamples)
{
    size_t by_cat[RV_CAT_COUNT] = {0};
    int64_t lo = INT64_MAX, hi = INT64_MIN, gpu_busy = gpu_busy_union(t);
    if (gpu_busy < 0)
        return NULL;
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        by_cat[e->cat < RV_CAT_COUNT ? e->cat : 0]++;
        if (e->ts_ns < lo)
            lo = e->ts_ns;
        if (e->ts_ns + e->dur_ns > hi)
            hi = e->ts_ns + e->dur_ns;
    }
    json_t *cats = json_object();
    for (int c = 0; c < RV_CAT_COUNT; c++)
        if (by_cat[c])
            json_object_set_new(cats, rv_cat_name(c), json_integer((json_int_t)by_cat[c]));
    json_t *devs = json_array();
    for (size_t i = 0; i < t->ndevices; i++) {
        const rv_device *d = &t->devices[i];
        char cc[32];
        snprintf(cc, sizeof(cc), "%d.%d", d->compute_major, d->compute_minor);
        json_array_append_new(devs, json_pack("{s:i,s:s,s:i,s:s,s:I}", "id", d->id, "name",
                                              rv_trace_str(t, d->name), "num_sms", d->num_sms,
                                              "compute_capability", cc, "total_mem",
                                              (json_int_t)d->total_mem));
    }
    return json_pack("{s:I,s:o,s:o,s:f,s:f,s:i,s:o,s:I,s:I,s:I,s:s}", "events",
                     (json_int_t)t->nevents, "by_category", cats, "devices", devs, "span_us",
                     t->nevents ? (double)(hi - lo) / 1000.0 : 0.0, "gpu_busy_us",
                     (double)gpu_busy / 1000.0, "iterations", iterations, "measured_us",
                     measured_us > 0 ? json_real(measured_us) : json_null(), "overhead_samples",
                     (json_int_t)nsamples, "skipped_events", (json_int_t)t->skipped_events,
                     "input_bytes", (json_int_t)t->input_bytes, "backend",
                     rv_trace_str(t, t->backend));
}

int rv_db__gzip(const void *in, size_t len, uint8_t **out, size_t *out_len, rv_error *err)
{
    z_stream zs;
    memset(&zs, 0, sizeof(zs));
    *out = NULL;
    if (deflateInit2(&zs, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "gzip: init failed");
    size_t cap = deflateBound(&zs, (uLong)len) + 32;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        deflateEnd(&zs);
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "gzip: out of memory (%zu bytes)", cap);
    }
    zs.next_in = (Bytef *)(uintptr_t)in;
    zs.next_out = buf;
    int zrc = Z_OK;
    size_t left = len;
    /* avail_in is 32-bit; feed large inputs in pieces. */
    do {
        uInt chunk = left > (1u << 30) ? (1u << 30) : (uInt)left;
        zs.avail_in = chunk;
        left -= chunk;
        zs.avail_out = (uInt)(cap - zs.total_out > UINT_MAX ? UINT_MAX : cap - zs.total_out);
        zrc = deflate(&zs, left ? Z_NO_FLUSH : Z_FINISH);
    } while (left && zrc == Z_OK);
    deflateEnd(&zs);
    if (zrc != Z_STREAM_END) {
        free(buf);
        return rv_error_set(err, RV_ERR_INTERNAL, -1, -1, "gzip: deflate failed (%d)", zrc);
    }
    *out = buf;
    *out_len = zs.total_out;
    return 0;
}

static int utf8_ok(const char *s)
{
    return !s || rv_jsonw_utf8_valid(s, strlen(s)) == strlen(s);
}

/* The first string bound for a text column or the summary that is not
 * UTF-8 text (PostgreSQL refuses it, jansson too), by field name; NULL
 * when all are. The Kineto reader repairs a trace's own strings; this
 * catches what a caller passes. */
static const char *bad_text(const rv_trace *t, const rv_db_ingest_meta *meta)
{
    const rv_db_platform *mp = &meta->platform;

    if (!utf8_ok(meta->job) || !utf8_ok(rv_trace_str(t, t->job)))
        return "job";
    for (size_t i = 0; i < meta->ntags; i++)
        if (!utf8_ok(meta->tags[i]))
            return "tags";
    if (!utf8_ok(mp->gpu_model) || !utf8_ok(rv_trace_str(t, t->platform_gpu)))
        return "gpu";
    if (!utf8_ok(mp->cpu_model) || !utf8_ok(rv_trace_str(t, t->platform_cpu)))
        return "cpu";
    if (!utf8_ok(mp->driver) || !utf8_ok(rv_trace_str(t, t->platform_driver)))
        return "driver";
    if (!utf8_ok(mp->runtime_version) || !utf8_ok(rv_trace_str(t, t->platform_cuda)))
        return "cuda";
    if (!utf8_ok(mp->framework) || !utf8_ok(rv_trace_str(t, t->platform_framework)))
        return "framework";
    if (!utf8_ok(meta->source_format) || !utf8_ok(rv_trace_str(t, t->source_format)))
        return "source_format";
    if (!utf8_ok(rv_trace_str(t, t->backend)))
        return "distributedInfo.backend";
    for (size_t i = 0; i < t->ndevices; i++)
        if (!utf8_ok(rv_trace_str(t, t->devices[i].name)))
            return "deviceProperties.name";
    return NULL;
}

static const char *first_nonempty(const char *a, const char *b)
{
    return a && *a ? a : b ? b : "";
}

int rv_db__ingest_validate(const rv_trace *t, const void *orig, size_t len,
                           const rv_db_ingest_meta *meta, rv_error *err)
{
    if (!meta)
        meta = &no_meta;
    size_t cap = meta->max_bytes ? meta->max_bytes : RV_DB__DEFAULT_MAX_BYTES;
    if (cap > RV_DB__HARD_MAX_STORED)
        cap = RV_DB__HARD_MAX_STORED;
    if (!t || t->nevents == 0)
        return rv_error_set(err, RV_ERR_INVALID, -1, -1,
                            "the trace has no events the engine can use (no kernels, ops or "
                            "runtime calls)");
    if (!orig || len == 0)
        return rv_error_set(err, RV_ERR_INVALID, -1, -1, "the upload is empty");
    if (len > cap)
        return rv_error_set(err, RV_ERR_LIMIT, -1, -1,
                            "the upload is %zu bytes, over the %zu-byte cap", len, cap);
    if (meta->max_events && t->nevents > meta->max_events)
        return rv_error_field(err, RV_ERR_LIMIT, "max_events",
                              "the trace has %zu events, over this server's limit of %zu "
                              "(max_events)",
                              t->nevents, meta->max_events);
    if (meta->max_trace_bytes && t->input_bytes > meta->max_trace_bytes)
        return rv_error_field(err, RV_ERR_LIMIT, "max_trace_bytes",
                              "the trace is %zu bytes decompressed, over this server's limit of "
                              "%zu (max_trace_bytes)",
                              t->input_bytes, meta->max_trace_bytes);
    return 0;
}

/* The trace's kernel-model sums (measured on gpu) as the four array
 * literals of p->keff; none when the GPU is not in the hardware table or no
 * kernel has a cost. */
static int kernel_effs(rv_db_ingest_prep *p, const rv_trace *t, const char *gpu, rv_error *err)
{
    const rv_hw *hw = rv_hw_lookup(gpu);
    rv_flops_trace f;
    rv_kmodel_acc *a = NULL;
    rv_buf b[4];
    int rc = 0;
    memset(&f, 0, sizeof(f));
    if (!hw || t->nop_shapes == 0)
        return 0;
    if (rv_flops_of_trace(t, &f) != 0)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "ingest: out of memory costing the ops");
    for (int k = 0; k < 4; k++)
        rv_buf_init(&b[k], 1u << 20);
    if ((a = calloc(1, sizeof(*a))) == NULL || rv_kmodel_acc_add_trace(a, t, &f, hw) == 0)
        goto out;
    for (int c = 1; c < RV_FC_COUNT; c++)
        for (int k = 0; k < RV_KMODEL_BUCKETS; k++) {
            if (a->n[c][k] <= 0)
                continue;
            const char *sep = b[0].len ? "," : "{";
            rc |= rv_buf_printf(&b[0], "%s%s", sep, rv_flops_class_name(c));
            rc |= rv_buf_printf(&b[1], "%s%d", sep, k);
            rc |= rv_buf_printf(&b[2], "%s%.17g", sep, a->n[c][k]);
            rc |= rv_buf_printf(&b[3], "%s%.17g", sep, a->slog[c][k]);
        }
    for (int k = 0; k < 4 && !rc; k++) {
        rc |= rv_buf_addc(&b[k], '}');
        if (!rc && (p->keff[k] = rv_buf_take(&b[k], NULL)) == NULL)
            rc = RV_ERR_NOMEM;
    }
    if (rc)
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "ingest: out of memory");
out:
    for (int k = 0; k < 4; k++)
        rv_buf_free(&b[k]);
    free(a);
    rv_flops_trace_free(&f);
    return rc;
}

void rv_db_ingest_prep_free(rv_db_ingest_prep *p)
{
    if (!p)
        return;
    free(p->gz);
    free(p->snap);
    rv_overhead_samples_free(&p->samples);
    rv_overhead_sketch_groups_free(p->sketches, p->nsketches);
    free(p->summary_txt);
    free(p->tags);
    free(p->job);
    free(p->source_format);
    free(p->writer);
    for (int i = 0; i < 5; i++)
        free(p->pf[i]);
    for (int i = 0; i < 4; i++)
        free(p->keff[i]);
    free(p);
}

int rv_db__ingest_prepare_hashed(const rv_trace *t, const void *orig, size_t len,
                                 const rv_db_ingest_meta *meta, const char *sha,
                                 rv_db_ingest_prep **out, rv_error *err)
{
    json_t *summary = NULL;
    int rc = 0;
    rv_db_ingest_prep *p = calloc(1, sizeof(*p));

    *out = NULL;
    if (!meta)
        meta = &no_meta;
    if (!p)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "ingest: out of memory");
    const char *bad = bad_text(t, meta);
    if (bad) {
        rc = rv_error_field(err, RV_ERR_INVALID, bad, "%s is not valid UTF-8 text", bad);
        goto out;
    }
    /* Refused before anything is stored: a trace the engine cannot
     * simulate would only fail every later what-if. */
    if (count_gpu_tasks(t) == 0) {
        rc = rv_error_set(err, RV_ERR_UNSUPPORTED, -1, -1,
                          "nothing to simulate: the trace has no GPU kernels, memcpy or memset "
                          "events (a CPU-only trace, a counters-only capture or a non-GPU "
                          "accelerator)");
        goto out;
    }
    /* The same for what the graph builder or the simulator would refuse
     * (a million streams, times past what the simulator holds). */
    if ((rc = rv_graph_check_trace(t, err)) != 0)
        goto out;
    p->t = t;
    p->len = len;
    memcpy(p->sha256, sha, sizeof(p->sha256));
    const uint8_t *ob = orig;
    p->already_gzip = len >= 2 && ob[0] == 0x1f && ob[1] == 0x8b;
    p->stored = orig;
    p->stored_len = len;
    if (!p->already_gzip) {
        size_t gz_len = 0;
        rc = rv_db__gzip(orig, len, &p->gz, &gz_len, err);
        if (rc)
            goto out;
        p->stored = p->gz;
        p->stored_len = gz_len;
    }
    if (p->stored_len > RV_DB__HARD_MAX_STORED) {
        rc = rv_error_set(err, RV_ERR_LIMIT, -1, -1,
                          "the compressed upload is %zu bytes, over "
                          "the %zu-byte storage cap",
                          p->stored_len, RV_DB__HARD_MAX_STORED);
        goto out;
    }
    rc = rv_snapshot_encode(t, SNAPSHOT_LEVEL, &p->snap, &p->snap_len, err);
    if (rc)
        goto out;
    if (p->snap_len > RV_DB__HARD_MAX_STORED) {
        rc = rv_error_set(err, RV_ERR_LIMIT, -1, -1, "snapshot of %zu bytes is over the cap",
                          p->snap_len);
        goto out;
    }
    /* An execution trace alone was modelled, not measured (docs/models/et.md):
     * its host overheads and kernel efficiencies are no platform's. */
    int modelled = rv_trace_source_of_name(first_nonempty(
                       meta->source_format, rv_trace_str(t, t->source_format))) == RV_SOURCE_ET;
    if (!modelled)
        rc = rv_overhead_extract(t, &p->samples, err);
    if (!rc && !modelled)
        rc = rv_overhead_sketch(&p->samples, &p->sketches, &p->nsketches, err);
    if (rc)
        goto out;
    measure_iterations(t, &p->measured_us, &p->iterations);
    if (modelled)
        p->measured_us = 0; /* stored null: nothing was measured */
    summary = build_summary(t, p->measured_us, p->iterations, p->samples.n);
    p->summary_txt = summary ? json_dumps(summary, JSON_COMPACT) : NULL;
    p->tags = tags_literal(meta->tags, meta->ntags);

    /* The row's values: the uploader's, else the trace's. */
    const rv_db_platform *mp = &meta->platform;
    const char *pf[5] = {
        first_nonempty(mp->gpu_model, rv_trace_str(t, t->platform_gpu)),
        first_nonempty(mp->cpu_model, rv_trace_str(t, t->platform_cpu)),
        first_nonempty(mp->driver, rv_trace_str(t, t->platform_driver)),
        first_nonempty(mp->runtime_version, rv_trace_str(t, t->platform_cuda)),
        first_nonempty(mp->framework, rv_trace_str(t, t->platform_framework)),
    };
    int oom = !p->summary_txt || !p->tags;
    for (int i = 0; i < 5; i++)
        oom |= !(p->pf[i] = strdup(pf[i]));
    p->job = strdup(first_nonempty(meta->job, rv_trace_str(t, t->job)));
    p->source_format = strdup(first_nonempty(
        meta->source_format, first_nonempty(rv_trace_str(t, t->source_format), "kineto")));
    p->writer_admin = meta->writer_admin;
    if (meta->writer && !(p->writer = strdup(meta->writer)))
        oom = 1;
    if (oom || !p->job || !p->source_format) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "ingest: out of memory");
        goto out;
    }
    p->platform = (rv_db_platform){.gpu_model = p->pf[0],
                                   .cpu_model = p->pf[1],
                                   .driver = p->pf[2],
                                   .runtime_version = p->pf[3],
                                   .framework = p->pf[4],
                                   .gpus_per_node = mp->gpus_per_node > 0 ? mp->gpus_per_node
                                                                          : (int)t->ndevices};
    rv_db_platform_key(&p->platform, p->platform_key);
    if (!modelled && (rc = kernel_effs(p, t, p->pf[0], err)) != 0)
        goto out;
    p->rank = meta->rank != RV_NONE ? meta->rank : t->rank;
    p->world_size =
        meta->world_size != RV_NONE && meta->world_size > 0 ? meta->world_size : t->world_size;
    if (p->rank >= 0 && p->world_size >= 1 && p->rank >= p->world_size) {
        rc = rv_error_field(err, RV_ERR_INVALID, "rank", "rank %d is not below world_size %d",
                            (int)p->rank, (int)p->world_size);
        goto out;
    }
    *out = p;
    p = NULL;
out:
    json_decref(summary);
    rv_db_ingest_prep_free(p);
    return rc;
}

int rv_db_ingest_prepare(const rv_trace *t, const void *orig, size_t len,
                         const rv_db_ingest_meta *meta, rv_db_ingest_prep **out, rv_error *err)
{
    char sha[65];
    *out = NULL;
    int rc = rv_db__ingest_validate(t, orig, len, meta, err);
    if (rc)
        return rc;
    rv_sha256_hex(orig, len, sha);
    return rv_db__ingest_prepare_hashed(t, orig, len, meta, sha, out, err);
}
