/* The what-if request document: parsing, validation, the order in which
 * models apply, and the energy of a simulated window. The models themselves
 * live in rv_models_*.c; docs/whatif.md is the user-facing contract. */
#include "rv_whatif.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rv_models.h"
#include "rv_retime.h"

#define RV_WHATIF_MAX_OPTS 256
#define RV_WHATIF_MAX_TEXT (16u * 1024u * 1024u)

/* Application stages, in order (docs/whatif.md "Order of application"). */
enum {
    STAGE_PRECISION = 0,
    STAGE_FUSION,
    STAGE_MEMORY,
    STAGE_GENERIC,
    STAGE_DISTRIBUTED,
    STAGE_ACCUMULATION,
    STAGE_POWER,
    STAGE_DATALOADER,
};

static const struct {
    const char *name;
    int stage;
    const char *fields[8]; /* allowed members besides "kind" */
} opt_specs[RV_OPT_COUNT] = {
    [RV_OPT_AMP] = {"amp", STAGE_PRECISION, {"dtype", "model", "cast_us"}},
    [RV_OPT_FUSED_OPTIMIZER] = {"fused_optimizer", STAGE_FUSION, {"traffic_ratio"}},
    [RV_OPT_KERNEL_FUSION] = {"kernel_fusion", STAGE_FUSION, {"select"}},
    [RV_OPT_RESTRUCTURE_BN] = {"restructure_batchnorm", STAGE_FUSION, {NULL}},
    [RV_OPT_VDNN] = {"vdnn", STAGE_MEMORY, {"select", "pcie_gbps"}},
    [RV_OPT_GIST] = {"gist", STAGE_MEMORY, {"select", "ratio"}},
    [RV_OPT_RECOMPUTE] = {"recompute", STAGE_MEMORY, {"select", "share"}},
    [RV_OPT_GRAD_ACCUM] = {"gradient_accumulation", STAGE_ACCUMULATION, {"steps"}},
    [RV_OPT_SCALE] = {"scale", STAGE_GENERIC, {"select", "factor"}},
    [RV_OPT_REMOVE] = {"remove", STAGE_GENERIC, {"select", "launches"}},
    [RV_OPT_INSERT] = {"insert", STAGE_GENERIC, {"after", "duration_us", "task"}},
    [RV_OPT_CPU_SPEED] = {"cpu_speed", STAGE_GENERIC, {"factor"}},
    [RV_OPT_DATALOADER] = {"dataloader",
                           STAGE_DATALOADER,
                           {"workers", "speedup", "contention", "ipc_us"}},
};

static const char *const dist_fields[] = {"workers",
                                          "gpus_per_node",
                                          "intra_node_gbps",
                                          "inter_node_gbps",
                                          "latency_us",
                                          "algorithm",
                                          "bucket_mb",
                                          "first_bucket_mb",
                                          "p3",
                                          "p3_slice_kb",
                                          "blueconnect",
                                          "dgc_density",
                                          "tensor_fusion_mb",
                                          "tensor_partition_mb",
                                          "efficiency",
                                          "interference",
                                          "gradient_mb",
                                          "ps_servers",
                                          "allreduce_table",
                                          NULL};

static const char *const top_fields[] = {"optimizations",  "distributed", "power_limit_w",
                                         "schedule",       "gpu",         "batch_size",
                                         "host_overheads", NULL};

static const char *const algo_names[] = {"ring", "tree", "hierarchical", "parameter_server"};

/* ---- field helpers ------------------------------------------------------ */

static int allowed(const char *key, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(key, *list) == 0)
            return 1;
    return 0;
}

/* Reads obj[key] as a number in [lo, hi]; absent or null keeps *out.
 * Returns 1 when present, 0 when absent, negative on error. */
static int get_num(const json_t *obj, const char *key, const char *prefix, double lo, double hi,
                   double *out, rv_error *err)
{
    char f[64];
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    snprintf(f, sizeof(f), "%s%s", prefix, key);
    if (!json_is_number(v))
        return rv_error_field(err, RV_ERR_INVALID, f, "%s must be a number", f);
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi)
        return rv_error_field(err, RV_ERR_INVALID, f, "%s = %g is out of range [%g, %g]", f, d, lo,
                              hi);
    *out = d;
    return 1;
}

/* Same, exclusive of lo. */
static int get_pos(const json_t *obj, const char *key, const char *prefix, double hi, double *out,
                   rv_error *err)
{
    double d = 0;
    int rc = get_num(obj, key, prefix, 0, hi, &d, err);
    if (rc == 1 && d <= 0) {
        char f[64];
        snprintf(f, sizeof(f), "%s%s", prefix, key);
        return rv_error_field(err, RV_ERR_INVALID, f, "%s must be > 0", f);
    }
    if (rc == 1)
        *out = d;
    return rc;
}

static int get_int(const json_t *obj, const char *key, const char *prefix, long lo, long hi,
                   int *out, rv_error *err)
{
    char f[64];
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    snprintf(f, sizeof(f), "%s%s", prefix, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return rv_error_field(err, RV_ERR_INVALID, f, "%s must be an integer in [%ld, %ld]", f, lo,
                              hi);
    *out = (int)json_integer_value(v);
    return 1;
}

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

static int get_bool(const json_t *obj, const char *key, const char *prefix, int *out, rv_error *err)
{
    char f[64];
    json_t *v = json_object_get(obj, key);
    if (!v || json_is_null(v))
        return 0;
    snprintf(f, sizeof(f), "%s%s", prefix, key);
    if (!json_is_boolean(v))
        return rv_error_field(err, RV_ERR_INVALID, f, "%s must be true or false", f);
    *out = json_is_true(v);
    return 1;
}

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        int rc_ = (expr);                                                                          \
        if (rc_ < 0)                                                                               \
            return rc_;                                                                            \
    } while (0)

/* ---- parse -------------------------------------------------------------- */

static int parse_opt(const json_t *o, size_t idx, rv_opt *out, rv_error *err)
{
    char p[48], f[64];
    snprintf(p, sizeof(p), "optimizations[%zu].", idx);
    memset(out, 0, sizeof(*out));
    out->index = (int)idx;
    out->workers = -1;
    if (!json_is_object(o)) {
        snprintf(f, sizeof(f), "optimizations[%zu]", idx);
        return rv_error_field(err, RV_ERR_INVALID, f, "%s must be an object", f);
    }
    const char *kind = json_string_value(json_object_get(o, "kind"));
    snprintf(f, sizeof(f), "%skind", p);
    if (!kind)
        return rv_error_field(err, RV_ERR_INVALID, f, "%s is required (a string)", f);
    out->kind = -1;
    for (int k = 0; k < RV_OPT_COUNT; k++)
        if (strcmp(kind, opt_specs[k].name) == 0)
            out->kind = k;
    if (out->kind < 0)
        return rv_error_field(err, RV_ERR_INVALID, f, "unknown optimization kind '%s'", kind);
    out->stage = opt_specs[out->kind].stage;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v)
    {
        if (strcmp(key, "kind") == 0 || allowed(key, opt_specs[out->kind].fields))
            continue;
        snprintf(f, sizeof(f), "%s%s", p, key);
        return rv_error_field(err, RV_ERR_INVALID, f, "unknown field %s for kind %s", f, kind);
    }
    const char *selkey = out->kind == RV_OPT_INSERT ? "after" : "select";
    json_t *sel = json_object_get(o, selkey);
    if (sel) {
        snprintf(f, sizeof(f), "%s%s", p, selkey);
        TRY(rv_select_parse(sel, f, &out->sel, err));
        out->has_sel = 1;
    }

    switch (out->kind) {
    case RV_OPT_AMP: {
        out->dtype = RV_DT_FP16;
        out->cast_us = 3.0;
        json_t *d = json_object_get(o, "dtype");
        if (d) {
            int dt = rv_dtype_parse(json_string_value(d));
            snprintf(f, sizeof(f), "%sdtype", p);
            if (dt != RV_DT_FP16 && dt != RV_DT_BF16 && dt != RV_DT_FP8)
                return rv_error_field(err, RV_ERR_INVALID, f, "%s must be fp16, bf16 or fp8", f);
            out->dtype = dt;
        }
        json_t *m = json_object_get(o, "model");
        if (m) {
            const char *s = json_string_value(m);
            snprintf(f, sizeof(f), "%smodel", p);
            if (!s || (strcmp(s, "roofline") != 0 && strcmp(s, "daydream") != 0))
                return rv_error_field(err, RV_ERR_INVALID, f, "%s must be roofline or daydream", f);
            out->amp_daydream = strcmp(s, "daydream") == 0;
        }
        TRY(get_num(o, "cast_us", p, 0, 1e6, &out->cast_us, err));
        break;
    }
    case RV_OPT_FUSED_OPTIMIZER:
        out->traffic_ratio = 0.5;
        TRY(get_pos(o, "traffic_ratio", p, 1.0, &out->traffic_ratio, err));
        break;
    case RV_OPT_KERNEL_FUSION:
        if (!out->has_sel) {
            snprintf(f, sizeof(f), "%sselect", p);
            return rv_error_field(err, RV_ERR_INVALID, f, "%s is required", f);
        }
        break;
    case RV_OPT_RESTRUCTURE_BN: break;
    case RV_OPT_VDNN: TRY(get_pos(o, "pcie_gbps", p, 1e5, &out->pcie_gbps, err)); break;
    case RV_OPT_GIST:
        out->ratio = 1.0;
        TRY(get_num(o, "ratio", p, 0, 100, &out->ratio, err));
        break;
    case RV_OPT_RECOMPUTE:
        out->share = 1.0;
        TRY(get_num(o, "share", p, 0, 1, &out->share, err));
        break;
    case RV_OPT_GRAD_ACCUM: {
        int r = get_int(o, "steps", p, 1, 1 << 20, &out->steps, err);
        TRY(r);
        if (r == 0) {
            snprintf(f, sizeof(f), "%ssteps", p);
            return rv_error_field(err, RV_ERR_INVALID, f, "%s is required", f);
        }
        break;
    }
    case RV_OPT_SCALE: {
        int r = get_num(o, "factor", p, 0, 1e4, &out->factor, err);
        TRY(r);
        if (r == 0) {
            snprintf(f, sizeof(f), "%sfactor", p);
            return rv_error_field(err, RV_ERR_INVALID, f, "%s is required", f);
        }
        break;
    }
    case RV_OPT_REMOVE:
        out->remove_launches = 1;
        if (!out->has_sel) {
            snprintf(f, sizeof(f), "%sselect", p);
            return rv_error_field(err, RV_ERR_INVALID, f, "%s is required", f);
        }
        TRY(get_bool(o, "launches", p, &out->remove_launches, err));
        break;
    case RV_OPT_INSERT: {
        if (!out->has_sel) {
            snprintf(f, sizeof(f), "%safter", p);
            return rv_error_field(err, RV_ERR_INVALID, f, "%s is required", f);
        }
        int r = get_pos(o, "duration_us", p, 1e9, &out->dur_us, err);
        TRY(r);
        if (r == 0) {
            snprintf(f, sizeof(f), "%sduration_us", p);
            return rv_error_field(err, RV_ERR_INVALID, f, "%s is required", f);
        }
        out->insert_kind = RV_SEL_KERNEL;
        json_t *t = json_object_get(o, "task");
        if (t) {
            const char *s = json_string_value(t);
            snprintf(f, sizeof(f), "%stask", p);
            if (s && strcmp(s, "kernel") == 0)
                out->insert_kind = RV_SEL_KERNEL;
            else if (s && strcmp(s, "cpu") == 0)
                out->insert_kind = RV_SEL_CPU;
            else if (s && strcmp(s, "memcpy") == 0)
                out->insert_kind = RV_SEL_MEMCPY;
            else
                return rv_error_field(err, RV_ERR_INVALID, f, "%s must be kernel, cpu or memcpy",
                                      f);
        }
        break;
    }
    case RV_OPT_CPU_SPEED: {
        int r = get_pos(o, "factor", p, 100, &out->factor, err);
        TRY(r);
        if (r == 0) {
            snprintf(f, sizeof(f), "%sfactor", p);
            return rv_error_field(err, RV_ERR_INVALID, f, "%s is required", f);
        }
        break;
    }
    case RV_OPT_DATALOADER: {
        /* No CPU contention by default: its size depends on the host's
         * cores, which a trace does not record (docs/models/dataloader.md). */
        out->contention = 0;
        out->ipc_us = 1000;
        int a = get_int(o, "workers", p, 0, 1024, &out->workers, err);
        TRY(a);
        int b = get_pos(o, "speedup", p, 1e4, &out->speedup, err);
        TRY(b);
        if (a == 0 && b == 0) {
            snprintf(f, sizeof(f), "%sworkers", p);
            return rv_error_field(err, RV_ERR_INVALID, f, "dataloader needs workers or speedup");
        }
        TRY(get_num(o, "contention", p, 0, 10, &out->contention, err));
        TRY(get_num(o, "ipc_us", p, 0, 1e7, &out->ipc_us, err));
        break;
    }
    default: break;
    }
    return 0;
}

static int parse_dist(const json_t *d, rv_dist *out, rv_error *err)
{
    const char *p = "distributed.";
    char f[64];
    memset(out, 0, sizeof(*out));
    out->workers = 1;
    out->inter_gbps = 100;
    out->latency_us = 5;
    out->algorithm = RV_ALGO_RING;
    out->bucket_mb = 25;
    out->first_bucket_mb = 1;
    out->p3_slice_kb = 200;
    out->efficiency = 0.8;
    out->interference = 0.15;
    if (!json_is_object(d))
        return rv_error_field(err, RV_ERR_INVALID, "distributed", "distributed must be an object");
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)d, key, v)
    {
        if (!allowed(key, dist_fields)) {
            snprintf(f, sizeof(f), "%s%s", p, key);
            return rv_error_field(err, RV_ERR_INVALID, f, "unknown field %s", f);
        }
    }
    int r = get_int(d, "workers", p, 1, 1 << 20, &out->workers, err);
    TRY(r);
    if (r == 0)
        return rv_error_field(err, RV_ERR_INVALID, "distributed.workers",
                              "distributed.workers is required");
    TRY(get_int(d, "gpus_per_node", p, 1, 1024, &out->gpus_per_node, err));
    TRY(get_pos(d, "intra_node_gbps", p, 1e6, &out->intra_gbps, err));
    TRY(get_pos(d, "inter_node_gbps", p, 1e6, &out->inter_gbps, err));
    TRY(get_num(d, "latency_us", p, 0, 1e6, &out->latency_us, err));
    json_t *a = json_object_get(d, "algorithm");
    if (a) {
        const char *s = json_string_value(a);
        out->algorithm = -1;
        for (int k = 0; s && k < 4; k++)
            if (strcmp(s, algo_names[k]) == 0)
                out->algorithm = k;
        if (out->algorithm < 0)
            return rv_error_field(err, RV_ERR_INVALID, "distributed.algorithm",
                                  "distributed.algorithm must be ring, tree, hierarchical or "
                                  "parameter_server");
    }
    TRY(get_pos(d, "bucket_mb", p, 65536, &out->bucket_mb, err));
    TRY(get_num(d, "first_bucket_mb", p, 0, 65536, &out->first_bucket_mb, err));
    TRY(get_bool(d, "p3", p, &out->p3, err));
    TRY(get_pos(d, "p3_slice_kb", p, 1 << 20, &out->p3_slice_kb, err));
    TRY(get_bool(d, "blueconnect", p, &out->blueconnect, err));
    TRY(get_pos(d, "dgc_density", p, 1.0, &out->dgc_density, err));
    TRY(get_pos(d, "tensor_fusion_mb", p, 65536, &out->tensor_fusion_mb, err));
    TRY(get_pos(d, "tensor_partition_mb", p, 65536, &out->tensor_partition_mb, err));
    TRY(get_pos(d, "efficiency", p, 1.0, &out->efficiency, err));
    TRY(get_num(d, "interference", p, 0, 4, &out->interference, err));
    TRY(get_pos(d, "gradient_mb", p, 1e7, &out->gradient_mb, err));
    TRY(get_int(d, "ps_servers", p, 0, 1 << 20, &out->ps_servers, err));
    TRY(get_table(d, "allreduce_table", &out->allreduce, err));
    if (out->p3 && out->algorithm != RV_ALGO_PS && json_object_get(d, "algorithm"))
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
    for (size_t i = 0; i < w->nopts; i++)
        rv_select_clear(&w->opts[i].sel);
    free(w->opts);
    free(w);
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
    w->schedule = RV_SCHED_EARLIEST_START;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)doc, key, v)
    {
        if (!allowed(key, top_fields)) {
            rc = rv_error_field(err, RV_ERR_INVALID, key, "unknown field %s", key);
            goto out;
        }
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
    if ((rc = get_pos(doc, "power_limit_w", "", 5000, &w->power_limit_w, err)) < 0)
        goto out;
    rc = 0;
    json_t *s = json_object_get(doc, "schedule");
    if (s && !json_is_null(s)) {
        int pol = json_is_string(s) ? rv_schedule_parse(json_string_value(s)) : -1;
        if (pol < 0) {
            rc = rv_error_field(err, RV_ERR_INVALID, "schedule",
                                "schedule must be earliest_start, fifo or priority");
            goto out;
        }
        w->schedule = pol;
        w->has_schedule = pol != RV_SCHED_EARLIEST_START;
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
    int bs = 0;
    if ((rc = get_int(doc, "batch_size", "", 1, 1 << 24, &bs, err)) < 0)
        goto out;
    rc = 0;
    w->batch_size = bs;
    json_t *ho = json_object_get(doc, "host_overheads");
    if (ho) {
        const char *how = json_string_value(ho);
        if (!how || (strcmp(how, "trace") != 0 && strcmp(how, "platform") != 0)) {
            rc = rv_error_field(err, RV_ERR_INVALID, "host_overheads",
                                "host_overheads must be trace or platform");
            goto out;
        }
        w->platform_overheads = strcmp(how, "platform") == 0;
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
        if (strlen(text) > RV_WHATIF_MAX_TEXT)
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
    return !w || (w->nopts == 0 && !w->has_dist && w->power_limit_w <= 0 && !w->has_schedule &&
                  !w->platform_overheads);
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

/* ---- shared helpers for the models -------------------------------------- */

const rv_hw *rv_models__hw(const rv_whatif *w, const rv_graph *g)
{
    if (w && w->gpu[0])
        return rv_hw_lookup(w->gpu);
    const rv_trace *tr = g->trace;
    if (!tr)
        return NULL;
    const rv_hw *hw = rv_hw_lookup(rv_trace_str(tr, tr->platform_gpu));
    if (!hw && tr->ndevices > 0)
        hw = rv_hw_lookup(rv_trace_str(tr, tr->devices[0].name));
    return hw;
}

int32_t *rv_models__thread_next(const rv_graph *g)
{
    int32_t *next = malloc((g->ntasks + 1) * sizeof(int32_t));
    if (!next)
        return NULL;
    for (size_t i = 0; i < g->ntasks; i++)
        next[i] = -1;
    for (size_t e = 0; e < g->nedges; e++) {
        const rv_edge *ed = &g->edges[e];
        if (ed->kind == RV_EDGE_THREAD && ed->src >= 0 && (size_t)ed->src < g->ntasks &&
            g->tasks[ed->src].thread == g->tasks[ed->dst].thread)
            next[ed->src] = ed->dst;
    }
    return next;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int64_t rv_models__launch_ns(const rv_graph *g)
{
    size_t n = 0;
    int64_t *v = malloc((g->ntasks + 1) * sizeof(int64_t));
    if (!v)
        return 5000;
    for (size_t i = 0; i < g->ntasks; i++)
        if ((g->tasks[i].flags & RV_TF_LAUNCH) && !(g->tasks[i].flags & RV_TF_REMOVED))
            v[n++] = g->tasks[i].dur_ns;
    int64_t r = 5000;
    if (n > 0) {
        qsort(v, n, sizeof(*v), cmp_i64);
        r = v[n / 2];
    }
    free(v);
    return r;
}

void rv_models__remove(rv_graph *g, int32_t i, int keep_gap)
{
    int64_t gap = g->tasks[i].gap_ns, dl = g->tasks[i].gap_dl_ns;
    rv_graph_remove_task(g, i);
    if (keep_gap) {
        g->tasks[i].gap_ns = gap;
        g->tasks[i].gap_dl_ns = dl;
    }
}

/* ---- apply -------------------------------------------------------------- */

static int run_opt(const rv_whatif *w, const rv_opt *o, rv_graph *g, json_t *applied, rv_error *err)
{
    switch (o->kind) {
    case RV_OPT_AMP: return rv_models__amp(w, o, g, applied, err);
    case RV_OPT_FUSED_OPTIMIZER: return rv_models__fused_optimizer(w, o, g, applied, err);
    case RV_OPT_KERNEL_FUSION: return rv_models__kernel_fusion(w, o, g, applied, err);
    case RV_OPT_RESTRUCTURE_BN: return rv_models__restructure_bn(w, o, g, applied, err);
    case RV_OPT_VDNN:
    case RV_OPT_GIST:
    case RV_OPT_RECOMPUTE:
    case RV_OPT_GRAD_ACCUM: return rv_models__memory_saver(w, o, g, applied, err);
    case RV_OPT_DATALOADER: return rv_models__dataloader(w, o, g, applied, err);
    default: return rv_models__generic(w, o, g, applied, err);
    }
}

int rv_whatif_apply(const rv_whatif *w, rv_graph *g, json_t **applied, rv_error *err)
{
    int rc = 0;
    json_t *arr = json_array();
    if (applied)
        *applied = NULL;
    if (!arr)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    if (!w)
        goto done;
    if (w->platform_overheads) {
        /* First, so that every model works on the platform's host times. */
        json_t *o = NULL;
        if (!w->overheads) {
            rc = rv_error_field(err, RV_ERR_UNSUPPORTED, "host_overheads",
                                "host_overheads is platform but no platform statistics were "
                                "given (the service supplies its platform's; the CLI takes "
                                "--overheads-from TRACE)");
            goto fail;
        }
        if ((rc = rv_retime_overheads(g, w->overheads, &o, err)) != 0)
            goto fail;
        json_array_append_new(arr, o);
    }
    for (int stage = STAGE_PRECISION; stage <= STAGE_DATALOADER; stage++) {
        if (stage == STAGE_DISTRIBUTED && w->has_dist) {
            if ((rc = rv_models__distributed(w, g, arr, err)) != 0)
                goto fail;
        }
        if (stage == STAGE_POWER && w->power_limit_w > 0) {
            if ((rc = rv_models__power(w, g, arr, err)) != 0)
                goto fail;
        }
        for (size_t i = 0; i < w->nopts; i++) {
            if (w->opts[i].stage != stage)
                continue;
            if ((rc = run_opt(w, &w->opts[i], g, arr, err)) != 0)
                goto fail;
        }
    }
    if (w->has_schedule || rv_whatif_schedule(w) != RV_SCHED_EARLIEST_START) {
        json_t *o = json_pack("{s:s, s:s}", "model", "schedule", "policy",
                              rv_schedule_name(rv_whatif_schedule(w)));
        if (o)
            json_array_append_new(arr, o);
    }
done:
    if (applied)
        *applied = arr;
    else
        json_decref(arr);
    return 0;
fail:
    json_decref(arr);
    return rc;
}

/* ---- energy ------------------------------------------------------------- */

typedef struct pw_ev {
    int64_t t;
    double w; /* power of the interval */
    int32_t dev;
    int8_t open; /* 1 start, 0 end */
} pw_ev;

static int cmp_pw(const void *a, const void *b)
{
    const pw_ev *x = a, *y = b;
    if (x->dev != y->dev)
        return x->dev < y->dev ? -1 : 1;
    if (x->t != y->t)
        return x->t < y->t ? -1 : 1;
    return x->open - y->open; /* ends before starts at equal times */
}

/* Orders events as cmp_pw does, in linear time: stable counting passes on
 * the least significant key first (open, then 16-bit digits of the time,
 * then the device). Falls back to qsort when memory is short. */
static void sort_pw(pw_ev *ev, size_t n, int32_t maxdev)
{
    if (n < 2)
        return;
    pw_ev *tmp = malloc(n * sizeof(*tmp));
    size_t *count = malloc(65537 * sizeof(*count));
    if (!tmp || !count || maxdev > 65535) {
        free(tmp);
        free(count);
        qsort(ev, n, sizeof(*ev), cmp_pw);
        return;
    }
    int64_t lo = ev[0].t, hi = ev[0].t;
    for (size_t i = 1; i < n; i++) {
        if (ev[i].t < lo)
            lo = ev[i].t;
        if (ev[i].t > hi)
            hi = ev[i].t;
    }
    uint64_t range = (uint64_t)hi - (uint64_t)lo;
    pw_ev *src = ev, *dst = tmp;
    /* Key 0: open (ends first); keys 1..: time digits; last: device. */
    for (int pass = 0;; pass++) {
        int shift = (pass - 1) * 16;
        int is_open = pass == 0, is_dev = 0;
        if (!is_open && (shift >= 64 || (range >> shift) == 0))
            is_dev = 1;
        memset(count, 0, 65537 * sizeof(*count));
#define PW_KEY(e)                                                                                  \
    (is_open  ? (size_t)(e).open                                                                   \
     : is_dev ? (size_t)(e).dev                                                                    \
              : (size_t)((((uint64_t)(e).t - (uint64_t)lo) >> shift) & 0xffff))
        for (size_t i = 0; i < n; i++)
            count[PW_KEY(src[i]) + 1]++;
        for (size_t d = 1; d <= 65536; d++)
            count[d] += count[d - 1];
        for (size_t i = 0; i < n; i++)
            dst[count[PW_KEY(src[i])]++] = src[i];
#undef PW_KEY
        pw_ev *t = src;
        src = dst;
        dst = t;
        if (is_dev)
            break;
    }
    if (src != ev)
        memcpy(ev, src, n * sizeof(*ev));
    free(tmp);
    free(count);
}

/* Ranks the prediction stands for: the workers of a data-parallel what-if,
 * else the world size of a multi-rank trace (one rank's graph stands for
 * every rank), else 1. Energy covers the whole job. */
static int dist_multiplier(const rv_whatif *w, const rv_graph *g)
{
    if (w && w->has_dist)
        return w->dist.workers;
    if (g->trace && g->trace->world_size > 1)
        return g->trace->world_size;
    return 1;
}

int rv_whatif_energy(const rv_whatif *w, const rv_graph *g, const rv_sim *s, int64_t t0_ns,
                     int64_t t1_ns, rv_energy *out)
{
    memset(out, 0, sizeof(*out));
    if (!g || !s || t1_ns <= t0_ns)
        return RV_ERR_INVALID;
    const rv_hw *hw = rv_models__hw(w, g);
    rv_power_model pm;
    rv_power_init(&pm, hw);
    double cap = w && w->power_limit_w > 0 ? w->power_limit_w : rv_whatif_trace_cap(w, g);
    if (cap <= 0)
        cap = pm.tdp_w;
    out->power_limit_w = cap;

    /* Per device: a sweep over task starts and ends charging the highest
     * power among the tasks running (overlap is not additive) and idle
     * power when none is. */
    size_t n = 0;
    pw_ev *ev = malloc((2 * g->ntasks + 1) * sizeof(*ev));
    /* The class of a kernel follows from its name, and its power from the
     * class: both are worked out once per distinct name. */
    uint32_t nstr = g->trace->strings.count;
    int8_t *cls_of_name = malloc((size_t)nstr + 1);
    double pw_of_class[RV_KC_COUNT];
    if (!ev || !cls_of_name) {
        free(ev);
        free(cls_of_name);
        return RV_ERR_NOMEM;
    }
    memset(cls_of_name, -1, (size_t)nstr + 1);
    for (int c = 0; c < RV_KC_COUNT; c++)
        pw_of_class[c] = rv_power_kernel_w(&pm, c, cap);
    int32_t maxdev = -1;
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind == RV_TASK_CPU || t->kind == RV_TASK_DATA || (t->flags & RV_TF_REMOVED))
            continue;
        int64_t a = s->start_ns[i], b = s->end_ns[i];
        if (b <= t0_ns || a >= t1_ns || b <= a)
            continue;
        a = a < t0_ns ? t0_ns : a;
        b = b > t1_ns ? t1_ns : b;
        int32_t dev = g->threads[t->thread].device;
        if (dev < 0)
            dev = 0;
        if (dev > maxdev)
            maxdev = dev;
        int cls;
        if (t->kind == RV_TASK_GPU && t->cat == RV_CAT_KERNEL && !(t->flags & RV_TF_NCCL) &&
            t->name < nstr) {
            if (cls_of_name[t->name] < 0)
                cls_of_name[t->name] = (int8_t)rv_kclass_of_task(g, i);
            cls = cls_of_name[t->name];
        } else {
            cls = rv_kclass_of_task(g, i);
        }
        double pw = pw_of_class[cls];
        ev[n++] = (pw_ev){a, pw, dev, 1};
        ev[n++] = (pw_ev){b, pw, dev, 0};
    }
    sort_pw(ev, n, maxdev);
    double e_j = 0;
    int ndev = 0;
    size_t i = 0;
    while (i < n) {
        int32_t dev = ev[i].dev;
        ndev++;
        /* Active powers for this device: a small multiset (streams run few
         * tasks at once), kept as counts per distinct value. */
        double vals[64];
        int cnt[64];
        int nv = 0;
        int64_t prev = t0_ns, busy = 0;
        for (; i < n && ev[i].dev == dev; i++) {
            double cur = 0;
            for (int k = 0; k < nv; k++)
                if (cnt[k] > 0 && vals[k] > cur)
                    cur = vals[k];
            if (nv > 0 && cur > 0) {
                e_j += cur * (double)(ev[i].t - prev) * 1e-9;
                busy += ev[i].t - prev;
            }
            prev = ev[i].t;
            int k;
            for (k = 0; k < nv; k++)
                if (vals[k] == ev[i].w)
                    break;
            if (k == nv && nv < 64) {
                vals[nv] = ev[i].w;
                cnt[nv++] = 0;
            }
            if (k < nv)
                cnt[k] += ev[i].open ? 1 : -1;
            /* Drop values with no active task so the scan stays short. */
            int any = 0;
            for (int q = 0; q < nv; q++)
                any |= cnt[q] > 0;
            if (!any)
                nv = 0;
        }
        e_j += pm.idle_w * (double)((t1_ns - t0_ns) - busy) * 1e-9;
    }
    free(ev);
    free(cls_of_name);
    if (ndev == 0) {
        ndev = 1;
        e_j = pm.idle_w * (double)(t1_ns - t0_ns) * 1e-9;
    }
    int mult = dist_multiplier(w, g);
    out->ngpus = ndev * mult;
    out->energy_per_gpu_j = e_j / ndev;
    out->energy_j = e_j * mult;
    out->avg_power_w = out->energy_j / ((double)(t1_ns - t0_ns) * 1e-9);
    out->avg_power_per_gpu_w = out->avg_power_w / out->ngpus;
    if (w && w->batch_size > 0 && out->energy_j > 0)
        out->samples_per_j = (double)w->batch_size * mult / out->energy_j;
    (void)maxdev;
    return 0;
}

double rv_whatif_trace_cap(const rv_whatif *w, const rv_graph *g)
{
    if (g->trace && g->trace->power_limit_w > 0)
        return g->trace->power_limit_w;
    const rv_hw *hw = rv_models__hw(w, g);
    return hw ? hw->default_pl_w : 0;
}
