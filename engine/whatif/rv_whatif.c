/* The what-if request document: parsing and validation into typed
 * requests (rv_whatif_types.h). The models live in models/rv_models_*.c,
 * the order in which they apply and the energy of a simulated window in
 * models/rv_apply.c; docs/whatif.md is the user-facing contract. */
#include "whatif/rv_whatif.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "whatif/rv_whatif_types.h"
#include "whatif/rv_whatif_spec.h"

#define RV_WHATIF_MAX_OPTS 256
#define RV_WHATIF_MAX_TEXT ((size_t)16 * 1024 * 1024)

/* distributed.<key>: [[bytes, us], ...], 1..RV_COLL_TABLE_MAX points with
 * sizes and times > 0 and sizes increasing. Absent keeps *out empty. */
static int get_table(const json_t *d, const char *key, rv_coll_table *out, rv_error *err)
{
    char f[96];
    json_t *a = json_object_get(d, key);
    out->n = 0;
    if (!a || json_is_null(a))
        return 0;
    snprintf(f, sizeof(f), "distributed.%s", key);
    if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > RV_COLL_TABLE_MAX)
        return rv_error_field(err, RV_ERR_INVALID, f,
                              "%s must be an array of 1 to %d [bytes, us] pairs", f,
                              RV_COLL_TABLE_MAX);
    for (size_t i = 0; i < json_array_size(a); i++) {
        json_t *pt = json_array_get(a, i);
        snprintf(f, sizeof(f), "distributed.%s[%zu]", key, i);
        if (!json_is_array(pt) || json_array_size(pt) != 2 ||
            !json_is_number(json_array_get(pt, 0)) || !json_is_number(json_array_get(pt, 1)))
            return rv_error_field(err, RV_ERR_INVALID, f, "%s must be [bytes, us]", f);
        double b = json_number_value(json_array_get(pt, 0));
        double us = json_number_value(json_array_get(pt, 1));
        if (!isfinite(b) || !isfinite(us) || b <= 0 || us <= 0 || b > 1e15 || us > 1e12)
            return rv_error_field(err, RV_ERR_INVALID, f, "%s needs bytes and us > 0", f);
        if (i > 0 && b <= out->bytes[i - 1])
            return rv_error_field(err, RV_ERR_INVALID, f, "%s: sizes must increase", f);
        out->bytes[i] = b;
        out->seconds[i] = us * 1e-6;
        out->n = (int)i + 1;
    }
    return 0;
}

/* ---- parse: the spec tables (rv_whatif_spec.c) plus the rules that
 * span several fields -------------------------------------------------- */

/* "ranks": [r, ...] on an optimization: the job ranks it applies to. */
static int parse_ranks(const json_t *a, const char *prefix, rv_opt *out, rv_error *err)
{
    char f[64];
    snprintf(f, sizeof(f), "%sranks", prefix);
    out->nranks = 0;
    if (!a || json_is_null(a))
        return 0;
    if (!json_is_array(a) || json_array_size(a) == 0 || json_array_size(a) > RV_OPT_MAX_RANKS)
        return rv_error_field(err, RV_ERR_INVALID, f, "%s must be an array of 1 to %d ranks", f,
                              RV_OPT_MAX_RANKS);
    for (size_t i = 0; i < json_array_size(a); i++) {
        const json_t *v = json_array_get(a, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) >= (1 << 20))
            return rv_error_field(err, RV_ERR_INVALID, f, "%s[%zu] must be a rank in [0, %d)", f, i,
                                  1 << 20);
        out->ranks[out->nranks++] = (int32_t)json_integer_value(v);
    }
    return 0;
}

static int parse_opt(const json_t *o, size_t idx, rv_opt *out, rv_error *err)
{
    char p[48], f[64];
    snprintf(p, sizeof(p), "optimizations[%zu].", idx);
    memset(out, 0, sizeof(*out));
    out->index = (int)idx;
    out->workers = -1; /* dataloader: not given */
    /* Until a selector is given or defaulted, it selects everything. */
    rv_select_parse(NULL, "", &out->sel, NULL);
    if (!json_is_object(o)) {
        snprintf(f, sizeof(f), "optimizations[%zu]", idx);
        return rv_error_field(err, RV_ERR_INVALID, f, "%s must be an object", f);
    }
    const char *kind = json_string_value(json_object_get(o, "kind"));
    snprintf(f, sizeof(f), "%skind", p);
    if (!kind)
        return rv_error_field(err, RV_ERR_INVALID, f, "%s is required (a string)", f);
    const rv_kind_spec *ks = rv_spec_kind(kind);
    if (!ks) {
        const char *names[32];
        size_t nn = 0;
        char hint[200];
        for (size_t i = 0; i < rv_spec_nkinds && nn < sizeof(names) / sizeof(names[0]); i++)
            names[nn++] = rv_spec_kinds[i].kind;
        rv_spec_suggest(kind, names, nn, hint, sizeof(hint));
        return rv_error_field(err, RV_ERR_INVALID, f, "unknown optimization kind '%.40s'%s", kind,
                              hint);
    }
    out->kind = ks->id;
    out->stage = ks->stage;
    static const char *const kind_key[] = {"kind", "ranks", NULL};
    int rc = rv_spec_read(o, p, ks->fields, RV_SPEC_MAX_FIELDS, kind_key, out, err);
    if (rc != 0)
        return rc;
    if ((rc = parse_ranks(json_object_get(o, "ranks"), p, out, err)) != 0)
        return rc;
    if (out->kind == RV_OPT_DATALOADER && out->workers < 0 && out->speedup <= 0) {
        snprintf(f, sizeof(f), "%sworkers", p);
        return rv_error_field(err, RV_ERR_INVALID, f, "dataloader needs workers or speedup");
    }
    return 0;
}

static int parse_dist(const json_t *d, rv_dist *out, rv_error *err)
{
    memset(out, 0, sizeof(*out));
    if (!json_is_object(d))
        return rv_error_field(err, RV_ERR_INVALID, "distributed", "distributed must be an object");
    int rc = rv_spec_read(d, "distributed.", rv_spec_dist, rv_spec_ndist, NULL, out, err);
    if (rc == 0)
        rc = get_table(d, "allreduce_table", &out->allreduce, err);
    if (rc != 0)
        return rc;
    if (out->p3 && out->algorithm != RV_ALGO_PS && rv_spec_given(d, "algorithm"))
        return rv_error_field(err, RV_ERR_INVALID, "distributed.p3",
                              "distributed.p3 needs algorithm parameter_server (P3 is a PS "
                              "scheme)");
    if (out->p3)
        out->algorithm = RV_ALGO_PS;
    if (out->blueconnect && out->algorithm == RV_ALGO_PS)
        return rv_error_field(err, RV_ERR_INVALID, "distributed.blueconnect",
                              "distributed.blueconnect replaces all-reduce; not with a parameter "
                              "server");
    if (out->gpus_per_node == 0)
        out->gpus_per_node = out->workers < 8 ? out->workers : 8;
    return 0;
}

void rv_whatif_free(rv_whatif *w)
{
    if (!w)
        return;
    for (size_t i = 0; i < w->nopts && !w->shallow; i++)
        rv_select_clear(&w->opts[i].sel);
    free(w->opts);
    free(w);
}

/* The top-level "batch_size", the old name of samples_per_step: the same
 * range; both at once must agree. */
static int parse_batch_alias(const json_t *doc, rv_whatif *w, rv_error *err)
{
    const json_t *b = json_object_get(doc, "batch_size");
    if (!b || json_is_null(b))
        return 0;
    json_int_t v = json_is_integer(b) ? json_integer_value(b) : 0;
    if (v < 1 || v > (1 << 24))
        return rv_error_field(err, RV_ERR_INVALID, "batch_size",
                              "batch_size (the old name of samples_per_step) must be an integer "
                              "in [1, %d]",
                              1 << 24);
    if (w->batch_size > 0 && w->batch_size != (int)v)
        return rv_error_field(err, RV_ERR_INVALID, "batch_size",
                              "batch_size is the old name of samples_per_step: give one of them");
    w->batch_size = (int)v;
    return 0;
}

int rv_whatif_parse(const json_t *doc, rv_whatif **out, rv_error *err)
{
    int rc = 0;
    rv_whatif *w = NULL;
    *out = NULL;
    if (!json_is_object(doc))
        return rv_error_field(err, RV_ERR_INVALID, "", "the what-if document must be an object");
    w = calloc(1, sizeof(*w));
    if (!w)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    static const char *const structural[] = {"optimizations", "distributed", "parallel",
                                             "job",           "batch_size",  NULL};
    if ((rc = rv_spec_read(doc, "", rv_spec_top, rv_spec_ntop, structural, w, err)) != 0)
        goto out;
    if ((rc = parse_batch_alias(doc, w, err)) != 0)
        goto out;
    w->has_schedule = w->schedule != RV_SCHED_EARLIEST_START;
    if (w->power_limit_w > 0 && w->power_limit_frac > 0) {
        rc = rv_error_field(err, RV_ERR_INVALID, "power_limit_frac",
                            "give power_limit_w or power_limit_frac, not both");
        goto out;
    }
    json_t *opts = json_object_get(doc, "optimizations");
    if (opts && !json_is_null(opts)) {
        if (!json_is_array(opts)) {
            rc = rv_error_field(err, RV_ERR_INVALID, "optimizations",
                                "optimizations must be an array");
            goto out;
        }
        size_t n = json_array_size(opts);
        if (n > RV_WHATIF_MAX_OPTS) {
            rc = rv_error_field(err, RV_ERR_INVALID, "optimizations", "at most %d optimizations",
                                RV_WHATIF_MAX_OPTS);
            goto out;
        }
        w->opts = calloc(n ? n : 1, sizeof(rv_opt));
        if (!w->opts) {
            rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
            goto out;
        }
        for (size_t i = 0; i < n; i++) {
            rc = parse_opt(json_array_get(opts, i), i, &w->opts[i], err);
            if (rc) {
                /* A selection may be compiled before a later field fails. */
                rv_select_clear(&w->opts[i].sel);
                goto out;
            }
            w->nopts++;
        }
    }
    json_t *d = json_object_get(doc, "distributed");
    if (d && !json_is_null(d)) {
        if ((rc = parse_dist(d, &w->dist, err)) != 0)
            goto out;
        w->has_dist = 1;
    }
    json_t *par = json_object_get(doc, "parallel");
    if (par && !json_is_null(par)) {
        if (!json_is_object(par)) {
            rc = rv_error_field(err, RV_ERR_INVALID, "parallel", "parallel must be an object");
            goto out;
        }
        w->par.zero = -1;
        rc =
            rv_spec_read(par, "parallel.", rv_spec_parallel, rv_spec_nparallel, NULL, &w->par, err);
        if (rc != 0)
            goto out;
        w->has_par = 1;
    }
    json_t *job = json_object_get(doc, "job");
    if (job && !json_is_null(job)) {
        if (!json_is_object(job)) {
            rc = rv_error_field(err, RV_ERR_INVALID, "job", "job must be an object");
            goto out;
        }
        if ((rc = rv_spec_read(job, "job.", rv_spec_job, rv_spec_njob, NULL, &w->job, err)) != 0)
            goto out;
        w->has_job = 1;
    }
    json_t *gpu = json_object_get(doc, "gpu");
    if (gpu && !json_is_null(gpu)) {
        if (!json_is_string(gpu) || !rv_hw_lookup(json_string_value(gpu))) {
            rc = rv_error_field(err, RV_ERR_INVALID, "gpu",
                                "gpu must name a GPU in the hardware table (e.g. A100-SXM4-80GB)");
            goto out;
        }
        snprintf(w->gpu, sizeof(w->gpu), "%s", json_string_value(gpu));
    }
    *out = w;
    w = NULL;
out:
    rv_whatif_free(w);
    return rc;
}

void rv_whatif_set_overheads(rv_whatif *w, const struct rv_oh_table *tab)
{
    if (w)
        w->overheads = tab;
}

int rv_whatif_uses_platform_overheads(const rv_whatif *w)
{
    return w && w->platform_overheads;
}

void rv_whatif_drop_gpu(rv_whatif *w)
{
    if (w)
        w->gpu[0] = '\0';
}

void rv_whatif_set_kmodel(rv_whatif *w, const struct rv_kmodel *m, const struct rv_kmodel *target)
{
    if (w) {
        w->kmodel_platform = m;
        w->kmodel_target = target;
    }
}

int rv_whatif_uses_platform_kmodels(const rv_whatif *w)
{
    return w && w->platform_kmodels;
}

int rv_whatif_parse_text(const char *text, rv_whatif **out, rv_error *err)
{
    json_error_t je;
    json_t *doc;
    *out = NULL;
    if (!text)
        return rv_error_field(err, RV_ERR_INVALID, "", "no what-if document");
    if (text[0] == '@') {
        FILE *f = fopen(text + 1, "rb");
        if (!f)
            return rv_error_set(err, RV_ERR_IO, -1, -1, "cannot open %s: %s", text + 1,
                                strerror(errno));
        doc = json_loadf(f, JSON_REJECT_DUPLICATES, &je);
        fclose(f);
    } else {
        if (strlen(text) > (size_t)RV_WHATIF_MAX_TEXT)
            return rv_error_field(err, RV_ERR_LIMIT, "", "what-if document too large");
        doc = json_loads(text, JSON_REJECT_DUPLICATES, &je);
    }
    if (!doc)
        return rv_error_set(err, RV_ERR_PARSE, je.position, -1, "what-if JSON: %s (line %d)",
                            je.text, je.line);
    int rc = rv_whatif_parse(doc, out, err);
    json_decref(doc);
    return rc;
}

int rv_whatif_is_empty(const rv_whatif *w)
{
    return !w || (w->nopts == 0 && !w->has_dist && !w->has_par && w->power_limit_w <= 0 &&
                  w->power_limit_frac <= 0 && !w->has_schedule && !w->platform_overheads &&
                  !w->platform_kmodels && !w->has_job && !w->gpu[0]);
}

const rv_job_whatif *rv_whatif_job(const rv_whatif *w)
{
    return w && w->has_job ? &w->job : NULL;
}

static int opt_for_rank(const rv_opt *o, int rank)
{
    if (o->nranks == 0)
        return 1;
    for (int i = 0; i < o->nranks; i++)
        if (o->ranks[i] == rank)
            return 1;
    return 0;
}

int rv_whatif_for_rank(const rv_whatif *w, int rank, rv_whatif **out, rv_error *err)
{
    rv_whatif *c = calloc(1, sizeof(*c));
    *out = NULL;
    if (!c)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    if (w)
        *c = *w;
    c->opts = NULL;
    c->nopts = 0;
    c->has_job = 0;
    c->shallow = 1;
    if (w && w->nopts) {
        c->opts = calloc(w->nopts, sizeof(rv_opt));
        if (!c->opts) {
            free(c);
            return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        }
        for (size_t i = 0; i < w->nopts; i++)
            if (opt_for_rank(&w->opts[i], rank))
                c->opts[c->nopts++] = w->opts[i];
    }
    *out = c;
    return 0;
}

int rv_whatif_schedule(const rv_whatif *w)
{
    if (!w)
        return RV_SCHED_EARLIEST_START;
    /* P3 needs the priority queue on the link (Daydream section 5.1). */
    if (w->has_dist && w->dist.p3 && !w->has_schedule)
        return RV_SCHED_PRIORITY;
    return w->schedule;
}

const char *rv_whatif_gpu_override(const rv_whatif *w)
{
    return w && w->gpu[0] ? w->gpu : NULL;
}
