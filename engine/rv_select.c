#include "rv_select.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "rv_hw.h"

static const char *const sel_kind_names[] = {"kernel", "cpu", "memcpy", "comm", "data"};

/* Longest pattern we compile; regcomp on hostile input is the caller's
 * risk otherwise. */
#define RV_SELECT_MAX_PATTERN 512

static int compile(const json_t *v, const char *field, const char *member, regex_t *re,
                   rv_error *err)
{
    char f[64];
    snprintf(f, sizeof(f), "%s.%s", field, member);
    if (!json_is_string(v))
        return rv_error_field(err, RV_ERR_INVALID, f, "%s must be a string (a regex)", f);
    const char *pat = json_string_value(v);
    if (strlen(pat) > RV_SELECT_MAX_PATTERN)
        return rv_error_field(err, RV_ERR_INVALID, f, "%s is longer than %d characters", f,
                              RV_SELECT_MAX_PATTERN);
    int rc = regcomp(re, pat, REG_EXTENDED | REG_NOSUB);
    if (rc != 0) {
        char msg[128];
        regerror(rc, re, msg, sizeof(msg));
        return rv_error_field(err, RV_ERR_INVALID, f, "%s: bad regular expression: %s", f, msg);
    }
    return 0;
}

int rv_select_parse(const json_t *obj, const char *field, rv_select *out, rv_error *err)
{
    char f[64];
    int rc;
    memset(out, 0, sizeof(*out));
    out->kind = RV_SEL_ANY;
    out->phase = -1;
    out->stream = -1;
    if (!obj || json_is_null(obj))
        return 0;
    if (!json_is_object(obj))
        return rv_error_field(err, RV_ERR_INVALID, field, "%s must be an object", field);
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)obj, key, v)
    {
        snprintf(f, sizeof(f), "%s.%s", field, key);
        if (strcmp(key, "kind") == 0) {
            const char *s = json_string_value(v);
            out->kind = -2;
            for (int k = 0; s && k < (int)(sizeof(sel_kind_names) / sizeof(*sel_kind_names)); k++)
                if (strcmp(s, sel_kind_names[k]) == 0)
                    out->kind = k;
            if (out->kind == -2) {
                rc = rv_error_field(err, RV_ERR_INVALID, f,
                                    "%s must be kernel, cpu, memcpy, comm or data", f);
                goto fail;
            }
        } else if (strcmp(key, "name") == 0) {
            if ((rc = compile(v, field, key, &out->name_re, err)) != 0)
                goto fail;
            out->has_name = 1;
        } else if (strcmp(key, "layer") == 0) {
            if ((rc = compile(v, field, key, &out->layer_re, err)) != 0)
                goto fail;
            out->has_layer = 1;
        } else if (strcmp(key, "phase") == 0) {
            const char *s = json_string_value(v);
            out->phase = -2;
            for (int p = 0; s && p < RV_PHASE_COUNT; p++)
                if (strcmp(s, rv_phase_name(p)) == 0)
                    out->phase = p;
            if (out->phase < 0) {
                rc = rv_error_field(err, RV_ERR_INVALID, f,
                                    "%s must be forward, backward, optimizer, dataloader or "
                                    "unknown",
                                    f);
                goto fail;
            }
        } else if (strcmp(key, "stream") == 0) {
            if (!json_is_integer(v) || json_integer_value(v) < 0 ||
                json_integer_value(v) > INT32_MAX) {
                rc = rv_error_field(err, RV_ERR_INVALID, f, "%s must be a stream id >= 0", f);
                goto fail;
            }
            out->stream = json_integer_value(v);
        } else {
            rc = rv_error_field(err, RV_ERR_INVALID, f, "unknown selector field %s", f);
            goto fail;
        }
    }
    return 0;
fail:
    rv_select_clear(out);
    return rc;
}

void rv_select_clear(rv_select *s)
{
    if (!s)
        return;
    if (s->has_name)
        regfree(&s->name_re);
    if (s->has_layer)
        regfree(&s->layer_re);
    s->has_name = s->has_layer = 0;
}

const char *rv_task_name(const rv_graph *g, size_t i)
{
    return g->trace ? rv_trace_str(g->trace, g->tasks[i].name) : "";
}

static int task_sel_kind(const rv_graph *g, const rv_task *t)
{
    if (t->kind == RV_TASK_COMM || (t->flags & RV_TF_NCCL))
        return RV_SEL_COMM;
    if (t->kind == RV_TASK_CPU)
        return RV_SEL_CPU;
    if (t->kind == RV_TASK_DATA)
        return RV_SEL_DATA;
    if (t->cat == RV_CAT_MEMCPY || t->cat == RV_CAT_MEMSET)
        return RV_SEL_MEMCPY;
    return RV_SEL_KERNEL;
}

int rv_select_match(const rv_select *s, const rv_graph *g, size_t i)
{
    const rv_task *t = &g->tasks[i];
    if (s->kind != RV_SEL_ANY && task_sel_kind(g, t) != s->kind)
        return 0;
    if (s->phase >= 0 && t->phase != s->phase)
        return 0;
    if (s->stream >= 0) {
        const rv_thread *th = &g->threads[t->thread];
        if (th->kind != RV_THREAD_GPU || th->stream != s->stream)
            return 0;
    }
    if (s->has_name && regexec(&s->name_re, rv_task_name(g, i), 0, NULL, 0) != 0)
        return 0;
    if (s->has_layer) {
        const char *l = g->trace ? rv_trace_str(g->trace, t->layer) : "";
        if (regexec(&s->layer_re, l, 0, NULL, 0) != 0)
            return 0;
    }
    return 1;
}

/* Case-insensitive substring test on a lowercased copy. */
static int has(const char *lower, const char *key)
{
    return strstr(lower, key) != NULL;
}

static void lower_copy(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (; *s && n + 1 < cap; s++)
        out[n++] = (char)tolower((unsigned char)*s);
    out[n] = '\0';
}

int rv_kclass_of_name(const char *name)
{
    char s[256];
    if (!name || !*name)
        return RV_KC_OTHER;
    lower_copy(name, s, sizeof(s));
    if (has(s, "nccl") || has(s, "rccl"))
        return RV_KC_COMM;
    if (has(s, "memcpy") || has(s, "memset"))
        return RV_KC_MEMCPY;
    /* Optimizer updates before the generic elementwise rule. */
    if (has(s, "multi_tensor_apply") || has(s, "adam") || has(s, "sgd_") || has(s, "fusedsgd") ||
        has(s, "lamb") || has(s, "_foreach"))
        return RV_KC_OPTIMIZER;
    /* Matrix-vector products are memory-bound. */
    if (has(s, "gemv") || has(s, "gemmsn"))
        return RV_KC_MEMBOUND;
    if (has(s, "gemm") || has(s, "scudnn") || has(s, "hcudnn") || has(s, "conv") ||
        has(s, "xmma") || has(s, "hmma") || has(s, "h884") || has(s, "h1688") || has(s, "s1688") ||
        has(s, "s884") || has(s, "wgrad") || has(s, "dgrad") || has(s, "fprop") ||
        has(s, "winograd") || has(s, "flash") || has(s, "fmha") || has(s, "matmul") ||
        has(s, "cutlass") || has(s, "cublas") || has(s, "tensorop"))
        return RV_KC_GEMM;
    if (has(s, "elementwise") || has(s, "bn_") || has(s, "norm") || has(s, "reduce") ||
        has(s, "pool") || has(s, "softmax") || has(s, "relu") || has(s, "threshold") ||
        has(s, "copy") || has(s, "cast") || has(s, "fill") || has(s, "index") || has(s, "cat") ||
        has(s, "scatter") || has(s, "gather") || has(s, "embedding") || has(s, "transpose") ||
        has(s, "nchwtonhwc") || has(s, "nhwctonchw") || has(s, "scan") || has(s, "sort") ||
        has(s, "dropout") || has(s, "gelu") || has(s, "pointwise") || has(s, "at::native"))
        return RV_KC_MEMBOUND;
    return RV_KC_OTHER;
}

int rv_kclass_of_task(const rv_graph *g, size_t i)
{
    const rv_task *t = &g->tasks[i];
    if (t->kind == RV_TASK_COMM || (t->flags & RV_TF_NCCL))
        return RV_KC_COMM;
    if (t->kind != RV_TASK_GPU)
        return RV_KC_OTHER;
    if (t->cat == RV_CAT_MEMCPY || t->cat == RV_CAT_MEMSET)
        return RV_KC_MEMCPY;
    return rv_kclass_of_name(rv_task_name(g, i));
}

const char *rv_kclass_name(int kc)
{
    static const char *const n[RV_KC_COUNT] = {"other",     "gemm", "membound",
                                               "optimizer", "comm", "memcpy"};
    return kc >= 0 && kc < RV_KC_COUNT ? n[kc] : "other";
}

int rv_kernel_dtype(const char *name)
{
    char s[256];
    if (!name)
        return -1;
    lower_copy(name, s, sizeof(s));
    if (has(s, "e4m3") || has(s, "e5m2") || has(s, "fp8"))
        return RV_DT_FP8;
    if (has(s, "bf16") || has(s, "bfloat16"))
        return RV_DT_BF16;
    if (has(s, "h884") || has(s, "h1688") || has(s, "h16816") || has(s, "hmma") || has(s, "half") ||
        has(s, "fp16") || has(s, "f16f16") || has(s, "hcudnn") || has(s, "hgemm"))
        return RV_DT_FP16;
    if (has(s, "tf32") || has(s, "s1688") || has(s, "s16816"))
        return RV_DT_TF32;
    return -1;
}
