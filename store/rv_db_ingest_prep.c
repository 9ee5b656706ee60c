/* Ingest, the CPU half: everything an ingest computes before it takes a
 * database connection. What the engine knows of a trace (its checks,
 * snapshot, overhead samples, summary, kernel-model sums) comes from
 * engine/ingest (rv_ingest_facts_of); this file adds what storing needs:
 * the caps, the content hash, the gzip of the original, text checks and
 * the row's values as SQL literals. No libpq call in this file
 * (rv_db_ingest_prep.h). */
#include "rv_db_ingest_prep.h"
#include "rv_db_internal.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "cost/rv_flops.h"
#include "cost/rv_kmodel_acc.h"
#include "ingest/rv_ingest.h"
#include "util/rv_jsonw.h"
#include "util/rv_sha256.h"
#define TAGS_MAX (1u << 20)

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

/* The kernel-model sums (the engine's, from the trace's GPU) as the four
 * array literals of p->keff; none when it has none. */
static int kernel_effs(rv_db_ingest_prep *p, rv_error *err)
{
    const rv_kmodel_acc *a = p->f.kmodels;
    rv_buf b[4];
    int rc = 0;
    if (!a)
        return 0;
    for (int k = 0; k < 4; k++)
        rv_buf_init(&b[k], 1u << 20);
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
    for (int k = 0; k < 4; k++)
        rv_buf_free(&b[k]);
    return rc;
}

void rv_db_ingest_prep_free(rv_db_ingest_prep *p)
{
    if (!p)
        return;
    free(p->gz);
    rv_ingest_facts_free(&p->f);
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
    /* The engine's facts (and its refusals: nothing to simulate, what the
     * simulator would refuse). An execution trace alone was modelled, not
     * measured: its host overheads and kernel efficiencies are no
     * platform's. */
    int modelled = rv_trace_source_of_name(first_nonempty(
                       meta->source_format, rv_trace_str(t, t->source_format))) == RV_SOURCE_ET;
    const char *gpu = first_nonempty(meta->platform.gpu_model, rv_trace_str(t, t->platform_gpu));
    if ((rc = rv_ingest_facts_of(t, gpu, modelled, &p->f, err)) != 0)
        goto out;
    if (p->f.snap_len > RV_DB__HARD_MAX_STORED) {
        rc = rv_error_set(err, RV_ERR_LIMIT, -1, -1, "snapshot of %zu bytes is over the cap",
                          p->f.snap_len);
        goto out;
    }
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
    p->summary_txt = json_dumps(p->f.summary, JSON_COMPACT);
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
    if ((rc = kernel_effs(p, err)) != 0)
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
