/* Every rule that reads a kernel's name; see rv_kname.h. */
#include "trace/rv_kname.h"

#include <ctype.h>
#include <string.h>

#include "trace/rv_coll.h"
#include "util/rv_names.h"

/* ------------------------------------------------------ communication */

int rv_kname_is_comm(const char *name)
{
    static const char *const marks[] = {
        "nccl",
        "rccl",
        "msccl",
        "nvshmem",
        "deep_ep",
        "multimem_",
        "symmetric_memory",
        "all_reduce",
        "allreduce",
        "all_gather",
        "allgather",
        "reduce_scatter",
        "reducescatter",
        "all_to_all",
        "alltoall",
        "one_shot_all",
        "two_shot_all",
    };
    if (!name)
        return 0;
    for (size_t k = 0; k < sizeof(marks) / sizeof(marks[0]); k++)
        if (strcasestr(name, marks[k]))
            return 1;
    return 0;
}

int rv_kname_is_p2p(const char *name)
{
    return name && (strstr(name, "SendRecv") || strstr(name, "_Send") || strstr(name, "_Recv") ||
                    strstr(name, "ncclSend") || strstr(name, "ncclRecv"));
}

int rv_kname_coll_op(const char *name, int *named)
{
    static const struct {
        const char *mark;
        int op;
    } marks[] = {
        /* Before "reduce" and "allreduce": a reduce-scatter names both. */
        {"reducescatter", RV_COLL_REDUCE_SCATTER},
        {"reduce_scatter", RV_COLL_REDUCE_SCATTER},
        {"allgather", RV_COLL_ALLGATHER},
        {"all_gather", RV_COLL_ALLGATHER},
        {"broadcast", RV_COLL_BROADCAST},
        {"alltoall", RV_COLL_ALLTOALL},
        {"all_to_all", RV_COLL_ALLTOALL},
        {"sendrecv", RV_COLL_ALLTOALL}, /* NCCL runs all-to-all as grouped send/recv */
        {"allreduce", RV_COLL_ALLREDUCE},
        {"all_reduce", RV_COLL_ALLREDUCE},
        /* DeepEP's expert-parallel exchange, and plain point-to-point. */
        {"dispatch", RV_COLL_ALLTOALL},
        {"combine", RV_COLL_ALLTOALL},
        {"send", RV_COLL_ALLTOALL},
        {"recv", RV_COLL_ALLTOALL},
        /* A reduce to one rank costs what a broadcast from it does. */
        {"reduce", RV_COLL_BROADCAST},
    };
    *named = 1;
    if (name)
        for (size_t k = 0; k < sizeof(marks) / sizeof(marks[0]); k++)
            if (strcasestr(name, marks[k].mark))
                return marks[k].op;
    *named = 0;
    return RV_COLL_ALLREDUCE;
}

/* ------------------------------------------------------- kernel class */

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

/* The LAMB optimizer, not the "lambda" of every ATen elementwise kernel
 * (which made ReLU, GELU and friends optimizer kernels). */
static int has_lamb(const char *s)
{
    for (const char *p = strstr(s, "lamb"); p; p = strstr(p + 4, "lamb"))
        if (strncmp(p, "lambda", 6) != 0)
            return 1;
    return 0;
}

static int is_gemm(const char *s)
{
    return has(s, "gemm") || has(s, "scudnn") || has(s, "hcudnn") || has(s, "conv") ||
           has(s, "xmma") || has(s, "hmma") || has(s, "h884") || has(s, "h1688") ||
           has(s, "s1688") || has(s, "s884") || has(s, "wgrad") || has(s, "dgrad") ||
           has(s, "fprop") || has(s, "winograd") || has(s, "flash") || has(s, "fmha") ||
           has(s, "matmul") || has(s, "cutlass") || has(s, "cublas") || has(s, "tensorop");
}

static int is_membound(const char *s)
{
    return has(s, "elementwise") || has(s, "bn_") || has(s, "norm") || has(s, "reduce") ||
           has(s, "pool") || has(s, "softmax") || has(s, "relu") || has(s, "threshold") ||
           has(s, "copy") || has(s, "cast") || has(s, "fill") || has(s, "index") || has(s, "cat") ||
           has(s, "scatter") || has(s, "gather") || has(s, "embedding") || has(s, "transpose") ||
           has(s, "nchwtonhwc") || has(s, "nhwctonchw") || has(s, "scan") || has(s, "sort") ||
           has(s, "dropout") || has(s, "gelu") || has(s, "pointwise") || has(s, "at::native");
}

/* The class by the CUDA library and ATen markers. */
static int class_of_markers(const char *name)
{
    char s[256];
    if (rv_kname_is_comm(name))
        return RV_KC_COMM;
    lower_copy(name, s, sizeof(s));
    if (has(s, "memcpy") || has(s, "memset"))
        return RV_KC_MEMCPY;
    /* Optimizer updates before the generic elementwise rule. */
    if (has(s, "multi_tensor_apply") || has(s, "adam") || has(s, "sgd_") || has(s, "fusedsgd") ||
        has_lamb(s) || has(s, "_foreach"))
        return RV_KC_OPTIMIZER;
    /* Matrix-vector products are memory-bound. */
    if (has(s, "gemv") || has(s, "gemmsn"))
        return RV_KC_MEMBOUND;
    if (is_gemm(s))
        return RV_KC_GEMM;
    if (is_membound(s))
        return RV_KC_MEMBOUND;
    return RV_KC_OTHER;
}

static const char *ci_find(const char *s, const char *key);

int rv_kname_class(const char *name)
{
    if (!name || !*name)
        return RV_KC_OTHER;
    int c = class_of_markers(name);
    if (c != RV_KC_OTHER && c != RV_KC_MEMBOUND)
        return c;
    /* AMD Tensile GEMMs (Cijk_*) and Triton templates (inductor's
     * mm/bmm/addmm/conv and flex attention: "triton_tem_fused_..."). */
    if (strstr(name, "Cijk_") || ci_find(name, "triton_tem_"))
        return RV_KC_GEMM;
    return c;
}

const char *rv_kname_class_name(int kc)
{
    static const char *const n[RV_KC_COUNT] = {"other",     "gemm", "membound",
                                               "optimizer", "comm", "memcpy"};
    return kc >= 0 && kc < RV_KC_COUNT ? n[kc] : "other";
}

/* ------------------------------------------------------- element type */

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

int rv_kname_dtype(const char *s)
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

/* OpaqueType<N> (N bytes per element), then a float, then fp64 or integer
 * element types. */
int rv_kname_dtype_hint(const char *s)
{
    if (!s)
        return RV_PREC_UNKNOWN;
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

int rv_kname_kernel_dtype(const char *name, int op_type)
{
    int d = rv_kname_dtype(name);
    if (d != RV_PREC_UNKNOWN)
        return d;
    if (op_type != RV_PT_NONE)
        return rv_kname_type_dtype(op_type);
    return rv_kname_dtype_hint(name);
}

static int type_is(const char *s, size_t n, const char *lit)
{
    return strlen(lit) == n && memcmp(s, lit, n) == 0;
}

int rv_kname_type_code(const char *s, size_t n)
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
    static const rv_name nonfloat[] = {
        RV_NAME("long int", RV_PT_NONFLOAT),      RV_NAME("long", RV_PT_NONFLOAT),
        RV_NAME("int", RV_PT_NONFLOAT),           RV_NAME("bool", RV_PT_NONFLOAT),
        RV_NAME("unsigned char", RV_PT_NONFLOAT), RV_NAME("signed char", RV_PT_NONFLOAT),
        RV_NAME("short int", RV_PT_NONFLOAT),     RV_NAME("short", RV_PT_NONFLOAT),
        RV_NAME("unsigned int", RV_PT_NONFLOAT),  RV_NAME("qint8", RV_PT_NONFLOAT),
        RV_NAME("quint8", RV_PT_NONFLOAT),        RV_NAME("qint32", RV_PT_NONFLOAT),
        RV_NAME("int64_t", RV_PT_NONFLOAT),       RV_NAME("unsigned long", RV_PT_NONFLOAT),
        RV_NAME("long long int", RV_PT_NONFLOAT),
    };
    return rv_names_find(nonfloat, sizeof(nonfloat) / sizeof(nonfloat[0]), s, n, RV_PT_NONE);
}

int rv_kname_type_merge(int code, int next)
{
    if (code != RV_PT_NONE && code != RV_PT_NONFLOAT)
        return code; /* a floating tensor came first */
    if (next == RV_PT_NONE)
        return code;
    return next;
}

int rv_kname_type_dtype(int code)
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

int rv_kname_grid_in_threads(const char *name)
{
    return name && strstr(name, "Cijk_") != NULL;
}
