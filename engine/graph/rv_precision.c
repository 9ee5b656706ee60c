/* Kernel precision from names and op input types; GPU precision support.
 * The rules are in rv_precision.h and docs/models/amp.md. */
#include "graph/rv_precision.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph/rv_select.h"

/* First place key (lowercase) occurs in s, ignoring case; NULL if none. */
static const char *ci_find(const char *s, const char *key)
{
    size_t k = strlen(key);
    for (; *s; s++) {
        size_t j = 0;
        while (j < k && s[j] && tolower((unsigned char)s[j]) == key[j])
            j++;
        if (j == k)
            return s;
    }
    return NULL;
}

static int ci_has(const char *s, const char *key)
{
    return ci_find(s, key) != NULL;
}

static int ident_char(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* key (lowercase) as a whole word: no identifier character on either side
 * ("float" in "<float>" or "float const*", not in "bfloat16" or "float4"). */
static int has_word(const char *s, const char *key)
{
    size_t k = strlen(key);
    for (const char *p = ci_find(s, key); p; p = ci_find(p + 1, key))
        if ((p == s || !ident_char(p[-1])) && !ident_char(p[k]))
            return 1;
    return 0;
}

/* "f16" not preceded by a letter: cuBLAS/cuDNN "f16f16", CUTLASS "_f16_",
 * xformers "fmha_cutlassF_f16_" (never the "f16" of "bf16"). */
static int has_f16(const char *s)
{
    for (const char *p = ci_find(s, "f16"); p; p = ci_find(p + 1, "f16"))
        if (p == s || !isalpha((unsigned char)p[-1]))
            return 1;
    return 0;
}

/* AMD Tensile / hipBLASLt kernels: Cijk_<A indices>_<B indices>_<types>_...
 * The types token starts with the input type: S fp32, H fp16, B bf16,
 * F8/B8 fp8 (e4m3/e5m2), X xf32 (tf32), D/C/Z fp64 and complex, I int8.
 * (Tensile's ProblemType naming: "SB" is fp32 with beta, "HHS" fp16 in and
 * out with fp32 compute, "BBS" the same in bf16.) */
static int tensile_dtype(const char *s)
{
    const char *p = strstr(s, "Cijk_");
    if (!p)
        return RV_PREC_UNKNOWN;
    p += 5;
    for (int k = 0; k < 2; k++) {
        if (*p != (k == 0 ? 'A' : 'B'))
            return RV_PREC_UNKNOWN;
        p = strchr(p, '_');
        if (!p)
            return RV_PREC_UNKNOWN;
        p++;
    }
    switch (p[0]) {
    case 'S': return RV_DT_FP32;
    case 'H': return RV_DT_FP16;
    case 'B': return p[1] == '8' ? RV_DT_FP8 : RV_DT_BF16;
    case 'F': return p[1] == '8' ? RV_DT_FP8 : RV_PREC_UNKNOWN;
    case 'X': return RV_DT_TF32;
    case 'D':
    case 'C':
    case 'Z':
    case 'I':
    case '4': return RV_PREC_NONFLOAT;
    default: return RV_PREC_UNKNOWN;
    }
}

int rv_prec_of_name(const char *s)
{
    if (!s || !*s)
        return RV_PREC_UNKNOWN;
    int t = tensile_dtype(s);
    if (t != RV_PREC_UNKNOWN)
        return t;
    /* fp8 first: its GEMMs also name their fp16/bf16/fp32 outputs. */
    if (ci_has(s, "e4m3") || ci_has(s, "e5m2") || ci_has(s, "fp8") || ci_has(s, "float8"))
        return RV_DT_FP8;
    /* bf16 before fp16 and fp32: "sm90_xmma_gemm_bf16bf16_bf16f32_f32",
     * "vectorized_layer_norm_kernel<c10::BFloat16, float>". */
    if (ci_has(s, "bf16") || ci_has(s, "bfloat16"))
        return RV_DT_BF16;
    /* tf32 before fp16's "hmma": "xmma_new::Ampere_hmma_tf32_traits". */
    if (ci_has(s, "tf32") || ci_has(s, "xf32"))
        return RV_DT_TF32;
    if (ci_has(s, "h884") || ci_has(s, "h1688") || ci_has(s, "h16816") || ci_has(s, "hmma") ||
        ci_has(s, "hgemm") || ci_has(s, "hcudnn") || ci_has(s, "fp16") || ci_has(s, "half") ||
        has_f16(s))
        return RV_DT_FP16;
    /* Single-precision tensor-core shapes without a type: tf32 (Ampere);
     * after fp16, which names them too ("turing_fp16_s1688gemm_fp16"). */
    if (ci_has(s, "s1688") || ci_has(s, "s16816"))
        return RV_DT_TF32;
    if (ci_has(s, "sgemm") || ci_has(s, "scudnn") || ci_has(s, "sgemv") || ci_has(s, "f32f32") ||
        ci_has(s, "fp32"))
        return RV_DT_FP32;
    if (ci_has(s, "dgemm") || ci_has(s, "igemm") || ci_has(s, "i8i8") || ci_has(s, "int8"))
        return RV_PREC_NONFLOAT;
    return RV_PREC_UNKNOWN;
}

/* Weak hints from ATen template arguments, used when the launching op's
 * input type is not known: OpaqueType<N> (N bytes per element), then a
 * float, then fp64 or integer element types. */
static int name_hint(const char *s)
{
    const char *p = ci_find(s, "opaquetype<");
    if (p) {
        switch (p[11]) {
        case '2': return RV_DT_FP16; /* 16-bit: fp16 or bf16 alike here */
        case '4': return RV_DT_FP32;
        case '1':
        case '8': return RV_PREC_NONFLOAT;
        default: break;
        }
    }
    if (has_word(s, "float"))
        return RV_DT_FP32;
    if (has_word(s, "double") || has_word(s, "long") || has_word(s, "bool") || has_word(s, "int") ||
        has_word(s, "short") || has_word(s, "char") || has_word(s, "int64_t") ||
        has_word(s, "uint8_t"))
        return RV_PREC_NONFLOAT;
    return RV_PREC_UNKNOWN;
}

static int type_is(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

int rv_prec_type_code(const char *s, size_t n)
{
    if (!s)
        return RV_PT_NONE;
    if (n > 5 && memcmp(s, "c10::", 5) == 0) {
        s += 5;
        n -= 5;
    }
    if (type_is(s, n, "float") || type_is(s, n, "Float"))
        return RV_PT_FP32;
    if (type_is(s, n, "Half") || type_is(s, n, "half") || type_is(s, n, "__half"))
        return RV_PT_FP16;
    if (type_is(s, n, "BFloat16") || type_is(s, n, "__nv_bfloat16"))
        return RV_PT_BF16;
    if (n >= 7 && memcmp(s, "Float8_", 7) == 0)
        return RV_PT_FP8;
    /* Lowercase C++ names are tensors; "Int", "Double" and "Bool" (old
     * Kineto) are scalars and say nothing about the data. */
    if (type_is(s, n, "double") || type_is(s, n, "complex<float>") ||
        type_is(s, n, "complex<double>") || type_is(s, n, "ComplexFloat") ||
        type_is(s, n, "ComplexDouble"))
        return RV_PT_FP64;
    static const char *const nonfloat[] = {
        "long int",    "long",      "int",     "bool",          "unsigned char",
        "signed char", "short int", "short",   "unsigned int",  "qint8",
        "quint8",      "qint32",    "int64_t", "unsigned long", "long long int"};
    for (size_t i = 0; i < sizeof(nonfloat) / sizeof(nonfloat[0]); i++)
        if (type_is(s, n, nonfloat[i]))
            return RV_PT_NONFLOAT;
    return RV_PT_NONE;
}

int rv_prec_type_merge(int code, int next)
{
    if (code != RV_PT_NONE && code != RV_PT_NONFLOAT)
        return code; /* a floating tensor came first */
    if (next == RV_PT_NONE)
        return code;
    return next;
}

int rv_prec_of_type(int code)
{
    switch (code) {
    case RV_PT_FP32: return RV_DT_FP32;
    case RV_PT_FP16: return RV_DT_FP16;
    case RV_PT_BF16: return RV_DT_BF16;
    case RV_PT_FP8: return RV_DT_FP8;
    case RV_PT_FP64:
    case RV_PT_NONFLOAT: return RV_PREC_NONFLOAT;
    default: return RV_PREC_UNKNOWN;
    }
}

int rv_prec_kernel_dtype(const char *name, int op_type)
{
    int d = rv_prec_of_name(name);
    if (d != RV_PREC_UNKNOWN)
        return d;
    if (op_type != RV_PT_NONE)
        return rv_prec_of_type(op_type);
    return name ? name_hint(name) : RV_PREC_UNKNOWN;
}

/* rv_kclass_of_name's optimizer marker "lamb" also matches the "lambda" of
 * ATen kernel names (threshold_kernel_impl ... {lambda(float)#1}: ReLU),
 * so those are classed again with "lambda" spelled out of reach. */
static int kclass_without_lambda(const char *name)
{
    char buf[512];
    size_t n = strlen(name);
    if (n >= sizeof(buf))
        n = sizeof(buf) - 1;
    memcpy(buf, name, n);
    buf[n] = '\0';
    for (char *p = buf; (p = (char *)ci_find(p, "lambda")) != NULL; p += 6)
        memcpy(p, "closur", 6);
    return rv_kclass_of_name(buf);
}

int rv_prec_kclass(const char *name)
{
    int c = rv_kclass_of_name(name);
    if (c == RV_KC_OPTIMIZER && name && ci_has(name, "lambda"))
        c = kclass_without_lambda(name);
    if (c != RV_KC_OTHER && c != RV_KC_MEMBOUND)
        return c;
    /* Tensile GEMMs; Triton templates (inductor's mm/bmm/addmm/conv and
     * flex attention: "triton_tem_fused_..."). */
    if (name && (strstr(name, "Cijk_") || ci_has(name, "triton_tem_")))
        return RV_KC_GEMM;
    return c;
}

static int cmp_op(const void *a, const void *b)
{
    const rv_prec_op *x = a, *y = b;
    if (x->pid != y->pid)
        return x->pid < y->pid ? -1 : 1;
    if (x->tid != y->tid)
        return x->tid < y->tid ? -1 : 1;
    if (x->start != y->start)
        return x->start < y->start ? -1 : 1;
    return (x->end < y->end) - (x->end > y->end); /* the enclosing one first */
}

int rv_prec_ctx_init(rv_prec_ctx *c, const rv_graph *g)
{
    const rv_trace *tr = g->trace;
    size_t n = tr ? tr->nevents : 0, k = 0;
    memset(c, 0, sizeof(*c));
    c->g = g;
    rv_map_init(&c->op_type, n + 1);
    rv_map_init(&c->by_name, g->ntasks + 1);
    for (size_t i = 0; i < n; i++)
        k += tr->events[i].cat == RV_CAT_CPU_OP && tr->events[i].in_type != RV_PT_NONE;
    if (k == 0)
        return 0;
    c->ops = malloc(k * sizeof(*c->ops));
    if (!c->ops)
        goto nomem;
    for (size_t i = 0; i < n; i++) {
        const rv_event *e = &tr->events[i];
        if (e->cat != RV_CAT_CPU_OP || e->in_type == RV_PT_NONE)
            continue;
        c->ops[c->nops++] =
            (rv_prec_op){e->pid, e->tid, e->ts_ns, e->ts_ns + e->dur_ns, -1, e->in_type};
        if (e->external_id >= 0 &&
            rv_map_put(&c->op_type, (uint64_t)e->external_id, e->in_type) < 0)
            goto nomem;
    }
    qsort(c->ops, c->nops, sizeof(*c->ops), cmp_op);
    /* Parents with a stack walk: ops on one thread nest. */
    for (size_t i = 1; i < c->nops; i++) {
        rv_prec_op *o = &c->ops[i];
        int32_t p = (int32_t)i - 1;
        if (o[-1].pid != o->pid || o[-1].tid != o->tid)
            continue;
        while (p >= 0 && c->ops[p].end < o->end)
            p = c->ops[p].parent;
        o->parent = p;
    }
    return 0;
nomem:
    rv_prec_ctx_free(c);
    return RV_ERR_NOMEM;
}

void rv_prec_ctx_free(rv_prec_ctx *c)
{
    free(c->ops);
    c->ops = NULL;
    c->nops = 0;
    rv_map_free(&c->op_type);
    rv_map_free(&c->by_name);
}

/* The type of the innermost typed op on (pid, tid) that is running at ts;
 * RV_PT_NONE when none. */
static int op_at(const rv_prec_ctx *c, uint32_t pid, uint32_t tid, int64_t ts)
{
    size_t lo = 0, hi = c->nops; /* first op after (pid, tid, ts) */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const rv_prec_op *o = &c->ops[mid];
        int after = o->pid != pid ? o->pid > pid : o->tid != tid ? o->tid > tid : o->start > ts;
        if (after)
            hi = mid;
        else
            lo = mid + 1;
    }
    if (lo == 0)
        return RV_PT_NONE;
    int32_t j = (int32_t)lo - 1;
    if (c->ops[j].pid != pid || c->ops[j].tid != tid)
        return RV_PT_NONE;
    while (j >= 0 && c->ops[j].end < ts)
        j = c->ops[j].parent;
    return j >= 0 ? c->ops[j].type : RV_PT_NONE;
}

/* The launching op's type code of kernel task t. */
static int op_type_of(const rv_prec_ctx *c, const rv_task *t)
{
    const rv_graph *g = c->g;
    const rv_trace *tr = g->trace;
    uint32_t code;
    if (!tr)
        return RV_PT_NONE;
    if (t->launch >= 0 && (size_t)t->launch < g->ntasks) {
        int32_t le = g->tasks[t->launch].event;
        if (le >= 0 && (size_t)le < tr->nevents) {
            const rv_event *e = &tr->events[le];
            return op_at(c, e->pid, e->tid, e->ts_ns);
        }
    }
    if (t->event >= 0 && (size_t)t->event < tr->nevents && tr->events[t->event].external_id >= 0 &&
        rv_map_get(&c->op_type, (uint64_t)tr->events[t->event].external_id, &code))
        return (int)code;
    return RV_PT_NONE;
}

int rv_prec_of_task(rv_prec_ctx *c, size_t i, int *src)
{
    const rv_graph *g = c->g;
    const rv_task *t = &g->tasks[i];
    int dummy;
    if (!src)
        src = &dummy;
    /* Name rules: classified with the graph, else cached per name here:
     * (strong + 8) | (hint + 8) << 8. */
    uint32_t v;
    if (t->name < g->nname_info && g->name_info[t->name]) {
        v = g->name_info[t->name] >> 8;
    } else if (!rv_map_get(&c->by_name, t->name, &v)) {
        const char *name = rv_task_name(g, i);
        int strong = rv_prec_of_name(name);
        int hint = strong == RV_PREC_UNKNOWN ? name_hint(name) : RV_PREC_UNKNOWN;
        v = (uint32_t)(strong + 8) | (uint32_t)(hint + 8) << 8;
        (void)rv_map_put(&c->by_name, t->name, v); /* a full cache only costs time */
    }
    int strong = (int)(v & 0xff) - 8, hint = (int)(v >> 8) - 8;
    if (strong != RV_PREC_UNKNOWN) {
        *src = RV_PS_NAME;
        return strong;
    }
    int code = op_type_of(c, t);
    if (code != RV_PT_NONE) {
        *src = RV_PS_INPUT_TYPE;
        return rv_prec_of_type(code);
    }
    if (hint != RV_PREC_UNKNOWN) {
        *src = RV_PS_HINT;
        return hint;
    }
    *src = RV_PS_ASSUMED;
    return RV_PREC_UNKNOWN;
}

/* AMD boards report gfx versions as "compute capability": only NVIDIA's
 * numbers map to precisions. */
static int looks_amd(const char *name)
{
    return ci_has(name, "amd") || ci_has(name, "radeon") || ci_has(name, "instinct") ||
           ci_has(name, "gfx");
}

int rv_prec_gpu_has(const rv_hw *hw, const rv_trace *tr, int dtype, char *why, size_t cap)
{
    /* What each dtype needs: NVIDIA compute capability x10, and in words. */
    static const int min_cc[RV_DT_COUNT] = {0, 80, 53, 80, 89};
    static const char *const needs[RV_DT_COUNT] = {
        "", "NVIDIA Ampere or later, AMD MI300", "NVIDIA P100, Volta or later, AMD MI50 or later",
        "NVIDIA Ampere or later, AMD MI100 or later", "NVIDIA Ada, Hopper or later, AMD MI300"};
    if (dtype < 0 || dtype >= RV_DT_COUNT)
        return -1;
    if (dtype == RV_DT_FP32)
        return 1;
    const char *dn = rv_dtype_name(dtype);
    if (hw) {
        if (hw->tflops[dtype] > 0)
            return 1;
        snprintf(why, cap, "%s has no %s: %s needs %s", hw->name, dn, dn, needs[dtype]);
        return 0;
    }
    if (!tr)
        return -1;
    const char *name = rv_trace_str(tr, tr->platform_gpu);
    int major = 0, minor = 0;
    for (size_t i = 0; i < tr->ndevices; i++) {
        if (tr->devices[i].compute_major <= 0)
            continue;
        major = tr->devices[i].compute_major;
        minor = tr->devices[i].compute_minor;
        if (!*name)
            name = rv_trace_str(tr, tr->devices[i].name);
        break;
    }
    if (major <= 0 || !*name || looks_amd(name))
        return -1;
    if (major * 10 + minor >= min_cc[dtype])
        return 1;
    snprintf(why, cap,
             "%s (compute capability %d.%d) has no %s: %s needs compute capability %d.%d "
             "or later (%s)",
             name, major, minor, dn, dn, min_cc[dtype] / 10, min_cc[dtype] % 10, needs[dtype]);
    return 0;
}

int rv_graph_classify(rv_graph *g)
{
    const rv_trace *tr = g->trace;
    size_t n = tr ? tr->strings.count : 0;

    if (g->owns_name_info)
        free(g->name_info);
    g->name_info = NULL;
    g->nname_info = 0;
    g->owns_name_info = 0;
    if (n == 0)
        return 0;
    uint32_t *info = calloc(n, sizeof(*info));
    if (!info)
        return RV_ERR_NOMEM;
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind != RV_TASK_GPU || t->name >= n || info[t->name])
            continue;
        const char *name = rv_trace_str(tr, t->name);
        int kc = rv_kclass_of_name(name);
        int strong = rv_prec_of_name(name);
        int hint = strong == RV_PREC_UNKNOWN ? name_hint(name) : RV_PREC_UNKNOWN;
        info[t->name] =
            (uint32_t)(kc + 1) | (uint32_t)(strong + 8) << 8 | (uint32_t)(hint + 8) << 16;
    }
    g->name_info = info;
    g->nname_info = n;
    g->owns_name_info = 1;
    return 0;
}
