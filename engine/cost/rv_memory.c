/* A training step's memory from its op shapes, and the peak the memory
 * what-ifs predict from it; see rv_memory.h and docs/models/memory.md. */
#include "cost/rv_memory.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "util/rv_error.h"
#include "trace/rv_shapes.h"

/* Arguments (bit i: argument i) that are parameters and that the op saves
 * for its backward pass. MASK: the op saves a 1-byte mask of argument 0
 * (dropout); OUT0: it also saves an output the size of argument 0
 * (attention). */
enum { MASK = 1, OUT0 = 2 };

/* Embedding tables a step's output layer may be tied to. */
#define RV_MEMORY_TIED 8

typedef struct op_kind {
    const char *name; /* without "aten::" */
    uint8_t params, saved, flags;
} op_kind;

/* Ops whose backward reads their result rather than their input (relu,
 * sigmoid, tanh) are left out: the next op saves that same tensor. */
static const op_kind kinds[] = {
    {"conv1d", 0x6, 0x1, 0},
    {"conv2d", 0x6, 0x1, 0},
    {"conv3d", 0x6, 0x1, 0},
    {"conv_transpose1d", 0x6, 0x1, 0},
    {"conv_transpose2d", 0x6, 0x1, 0},
    {"conv_transpose3d", 0x6, 0x1, 0},
    {"convolution", 0x6, 0x1, 0},
    {"_convolution", 0x6, 0x1, 0},
    {"cudnn_convolution", 0x2, 0x1, 0},
    {"linear", 0x6, 0x1, 0},
    {"addmm", 0x5, 0x2, 0},
    {"batch_norm", 0x6, 0x1, 0},
    {"_batch_norm_impl_index", 0x6, 0x1, 0},
    {"native_batch_norm", 0x6, 0x1, 0},
    {"cudnn_batch_norm", 0x6, 0x1, 0},
    {"instance_norm", 0x6, 0x1, 0},
    {"layer_norm", 0xc, 0x1, 0},
    {"native_layer_norm", 0xc, 0x1, 0},
    {"group_norm", 0xc, 0x1, 0},
    {"native_group_norm", 0x6, 0x1, 0},
    {"rms_norm", 0x4, 0x1, 0},
    {"embedding", 0x1, 0x2, 0},
    {"embedding_bag", 0x1, 0x2, 0},
    {"gelu", 0, 0x1, 0},
    {"silu", 0, 0x1, 0},
    {"leaky_relu", 0, 0x1, 0},
    {"hardswish", 0, 0x1, 0},
    {"mish", 0, 0x1, 0},
    {"softmax", 0, 0x1, 0},
    {"_softmax", 0, 0x1, 0},
    {"log_softmax", 0, 0x1, 0},
    {"_log_softmax", 0, 0x1, 0},
    {"max_pool1d", 0, 0x1, 0},
    {"max_pool2d", 0, 0x1, 0},
    {"max_pool3d", 0, 0x1, 0},
    {"max_pool2d_with_indices", 0, 0x1, 0},
    {"avg_pool1d", 0, 0x1, 0},
    {"avg_pool2d", 0, 0x1, 0},
    {"avg_pool3d", 0, 0x1, 0},
    {"adaptive_avg_pool2d", 0, 0x1, 0},
    {"adaptive_max_pool2d", 0, 0x1, 0},
    {"dropout", 0, 0, MASK},
    {"native_dropout", 0, 0, MASK},
    {"feature_dropout", 0, 0, MASK},
    {"matmul", 0, 0x3, 0},
    {"mm", 0, 0x3, 0},
    {"bmm", 0, 0x3, 0},
    {"baddbmm", 0, 0x6, 0},
    {"scaled_dot_product_attention", 0, 0x7, OUT0},
    {"_scaled_dot_product_flash_attention", 0, 0x7, OUT0},
    {"_scaled_dot_product_efficient_attention", 0, 0x7, OUT0},
    {"_scaled_dot_product_cudnn_attention", 0, 0x7, OUT0},
};
#define NKINDS (sizeof(kinds) / sizeof(kinds[0]))

/* Per-event class, filled on demand. */
enum {
    C_UNSEEN = 0,
    C_OTHER,
    C_BACKWARD, /* an autograd node or backward op */
    C_OPTSTEP,  /* an Optimizer.step annotation */
    C_OPT_MUL,  /* mul_ / lerp_: a state update */
    C_OPT_ADDCMUL,
    C_OPT_ADDCDIV,
    C_FE_MUL, /* the _foreach_ forms */
    C_FE_ADDCMUL,
    C_FE_ADDCDIV,
    C_FUSED_ADAM,
    C_FUSED_SGD,
    C_KIND /* + index into kinds[] */
};

static int starts_with(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static int classify(const char *n)
{
    static const struct {
        const char *name;
        int c;
    } opt[] = {{"mul_", C_OPT_MUL},
               {"lerp_", C_OPT_MUL},
               {"addcmul_", C_OPT_ADDCMUL},
               {"addcdiv_", C_OPT_ADDCDIV},
               {"_foreach_mul_", C_FE_MUL},
               {"_foreach_lerp_", C_FE_MUL},
               {"_foreach_addcmul_", C_FE_ADDCMUL},
               {"_foreach_addcdiv_", C_FE_ADDCDIV},
               {"_fused_adam_", C_FUSED_ADAM},
               {"_fused_adamw_", C_FUSED_ADAM},
               {"_fused_sgd_", C_FUSED_SGD}};
    if (starts_with(n, "Optimizer.step#"))
        return C_OPTSTEP;
    if (strstr(n, "Backward") || strstr(n, "backward") || starts_with(n, "autograd::engine"))
        return C_BACKWARD;
    if (!starts_with(n, "aten::"))
        return C_OTHER;
    n += 6;
    for (size_t k = 0; k < NKINDS; k++)
        if (!strcmp(n, kinds[k].name))
            return C_KIND + (int)k;
    for (size_t k = 0; k < sizeof(opt) / sizeof(opt[0]); k++)
        if (!strcmp(n, opt[k].name))
            return opt[k].c;
    return C_OTHER;
}

static int class_of(const rv_trace *t, uint8_t *cls, int32_t e)
{
    if (!cls[e])
        cls[e] = (uint8_t)classify(rv_trace_str(t, t->events[e].name));
    return cls[e];
}

static int64_t arg_bytes(const rv_trace *t, const rv_shape_arg *a, int itemsize)
{
    const int64_t *d = rv_shapes_dims(t, a);
    if (!d || a->ndims < 1 || itemsize <= 0)
        return 0;
    int64_t n = 1;
    for (int32_t k = 0; k < a->ndims; k++) {
        if (d[k] < 0 || (d[k] > 0 && n > INT64_MAX / 4 / d[k]))
            return 0;
        n *= d[k];
    }
    return n * itemsize;
}

/* Whether a 2-D parameter has the shape of an embedding table. */
static int is_tied(const rv_trace *t, const rv_shape_arg *a, int64_t (*tied)[2], size_t n)
{
    const int64_t *d = rv_shapes_dims(t, a);
    if (!d || a->ndims != 2)
        return 0;
    for (size_t k = 0; k < n; k++)
        if ((d[0] == tied[k][0] && d[1] == tied[k][1]) ||
            (d[0] == tied[k][1] && d[1] == tied[k][0]))
            return 1;
    return 0;
}

/* Where an op sits: bit 0 under a backward node, bit 1 under another op of
 * kinds[], bit 2 under an Optimizer.step annotation. */
static int ancestry(const rv_trace *t, const int32_t *parent, uint8_t *cls, int32_t e)
{
    int a = 0;
    for (int32_t p = parent[e], depth = 0; p >= 0 && depth < 256; p = parent[p], depth++) {
        int c = class_of(t, cls, p);
        a |= c == C_BACKWARD ? 1 : c >= C_KIND ? 2 : c == C_OPTSTEP ? 4 : 0;
    }
    return a;
}

/* Optimizer state tensors per parameter from the update ops counted over
 * one step (cnt indexed by class): Adam keeps two (exp_avg, exp_avg_sq,
 * each updated by mul_/lerp_ or addcmul_), SGD with momentum one (mul_),
 * plain SGD none. A division (addcdiv_) marks an adaptive optimizer; without
 * one at most one state tensor is kept. -1 when no update op is seen. */
static int32_t state_per_param(const size_t *cnt, int32_t nparams, int optstep)
{
    if (cnt[C_FUSED_ADAM])
        return 2;
    if (cnt[C_FUSED_SGD])
        return 1;
    double m, c;
    size_t d;
    if (cnt[C_FE_MUL] + cnt[C_FE_ADDCMUL] + cnt[C_FE_ADDCDIV]) {
        /* One call per parameter group: a group is one addcdiv_. */
        double groups = cnt[C_FE_ADDCDIV] ? (double)cnt[C_FE_ADDCDIV] : 1;
        m = (double)cnt[C_FE_MUL] / groups;
        c = (double)cnt[C_FE_ADDCMUL] / groups;
        d = cnt[C_FE_ADDCDIV];
    } else if (nparams > 0 && (cnt[C_OPT_MUL] + cnt[C_OPT_ADDCMUL] + cnt[C_OPT_ADDCDIV])) {
        m = (double)cnt[C_OPT_MUL] / nparams;
        c = (double)cnt[C_OPT_ADDCMUL] / nparams;
        d = cnt[C_OPT_ADDCDIV];
    } else {
        return optstep ? 0 : -1;
    }
    double s = fmax(floor(m + 0.5), floor(c + 0.5));
    s = fmin(s, d ? 2 : 1);
    return (int32_t)s;
}

int rv_memory_from_shapes(const rv_trace *t, const int32_t *op_tree, int64_t t0, int64_t t1,
                          rv_memory_shapes *b)
{
    size_t cnt[C_KIND] = {0};
    int optstep = 0, rc = 0;
    memset(b, 0, sizeof(*b));
    b->optimizer_state = RV_NONE;
    b->state_per_param = -1;
    int32_t *own = op_tree ? NULL : malloc((t->nevents + 1) * sizeof(*own));
    const int32_t *parent = op_tree ? op_tree : own;
    uint8_t *cls = calloc(t->nevents + 1, 1);
    if (!parent || !cls || (own && rv_shapes_op_tree(t, own) < 0)) {
        rc = RV_ERR_NOMEM;
        goto out;
    }
    /* Training: the step has backward nodes; an Optimizer.step annotation
     * bounds the optimizer's ops when there is one. */
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if (e->cat != RV_CAT_CPU_OP && e->cat != RV_CAT_USER_ANNOTATION)
            continue;
        if (e->ts_ns < t0 || e->ts_ns >= t1)
            continue;
        int c = class_of(t, cls, (int32_t)i);
        b->training |= c == C_BACKWARD;
        optstep |= c == C_OPTSTEP;
    }
    /* Embedding tables, so that an output layer tied to one (a linear
     * weight of the same [V, H], either way round) counts once. */
    int64_t tied[RV_MEMORY_TIED][2];
    size_t ntied = 0;
    for (size_t i = 0; i < t->nevents && ntied < RV_MEMORY_TIED; i++) {
        const rv_event *e = &t->events[i];
        if (e->cat != RV_CAT_CPU_OP || e->ts_ns < t0 || e->ts_ns >= t1)
            continue;
        int c = class_of(t, cls, (int32_t)i);
        const rv_op_shape *s =
            c >= C_KIND && kinds[c - C_KIND].params == 0x1 ? rv_shapes_of(t, (int32_t)i) : NULL;
        if (!s || s->nargs < 1 || t->shape_args[s->first].ndims != 2)
            continue;
        /* A vocabulary (rows well above the width), not a position table
         * as wide as the model's hidden layers. */
        const int64_t *d = rv_shapes_dims(t, &t->shape_args[s->first]);
        if (!d || d[0] < 2 * d[1])
            continue;
        tied[ntied][0] = d[0];
        tied[ntied][1] = d[1];
        ntied++;
    }
    int64_t saved = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if (e->cat != RV_CAT_CPU_OP || e->ts_ns < t0 || e->ts_ns >= t1)
            continue;
        int c = class_of(t, cls, (int32_t)i);
        if (c == C_OTHER || c == C_BACKWARD || c == C_OPTSTEP)
            continue;
        int a = ancestry(t, parent, cls, (int32_t)i);
        if (a & 1)
            continue;
        if (c < C_KIND) {
            if (!optstep || (a & 4))
                cnt[c]++;
            continue;
        }
        const rv_op_shape *s = rv_shapes_of(t, (int32_t)i);
        if (!s || (a & 2))
            continue;
        const op_kind *k = &kinds[c - C_KIND];
        b->nsaving += k->saved || k->flags;
        for (uint32_t j = 0; j < s->nargs && j < 8; j++) {
            const rv_shape_arg *x = &t->shape_args[s->first + j];
            int64_t by = arg_bytes(t, x, x->itemsize);
            if (by > b->largest_input)
                b->largest_input = by;
            if (k->params & (1u << j) && by > 0 && k->params != 0x1 && is_tied(t, x, tied, ntied))
                continue;
            if (k->params & (1u << j) && by > 0) {
                b->weights += by;
                b->nparams++;
            }
            if (k->saved & (1u << j))
                saved += by;
            if (j == 0 && (k->flags & MASK))
                saved += arg_bytes(t, x, 1);
            if (j == 0 && (k->flags & OUT0))
                saved += by;
        }
    }
    b->gradients = b->training ? b->weights : 0;
    b->activations = b->training ? saved : 0;
    b->state_per_param = b->training ? state_per_param(cnt, b->nparams, optstep) : 0;
    if (b->state_per_param >= 0)
        b->optimizer_state = b->state_per_param * b->weights;
out:
    free(own);
    free(cls);
    return rc;
}

/* ---- Predictions ---- */

static double getnum(const json_t *o, const char *k, double dflt)
{
    const json_t *v = json_object_get(o, k);
    return json_is_number(v) ? json_number_value(v) : dflt;
}

static void set_null(json_t *mem, const char *reason)
{
    json_object_set_new(mem, "predicted_peak_bytes", json_null());
    json_object_set_new(mem, "predicted_breakdown", json_null());
    json_object_set_new(mem, "predicted_reason", json_string(reason));
}

int rv_memory_predict(json_t *mem, const json_t *applied)
{
    double scale = 1, offload = 0, encoded = 0, share = 0;
    int any = 0, savers = 0;
    size_t i;
    json_t *a;
    if (!json_is_object(mem))
        return 0;
    json_array_foreach(applied, i, a)
    {
        const char *m = json_string_value(json_object_get(a, "model"));
        if (!m)
            continue;
        if (!strcmp(m, "batch_size")) {
            scale *= getnum(a, "factor", 1);
            any |= getnum(a, "factor", 1) != 1;
        } else if (!strcmp(m, "gradient_accumulation")) {
            /* Its time model runs each micro-batch at the trace's batch
             * (the optimizer once per k of them), so a micro-batch holds
             * the trace's activations: the peak stays. */
            any = 1;
        } else if (!strcmp(m, "vdnn")) {
            /* All but the prefetch window stays on the host. */
            double n = getnum(a, "offloaded_layers", 0), by = getnum(a, "offloaded_bytes", 0);
            if (n > 0)
                offload += by * fmax(0, 1 - RV_VDNN_PREFETCH_LAYERS / n);
            any = savers = 1;
        } else if (!strcmp(m, "gist")) {
            encoded += getnum(a, "encoded_bytes", 0) * (1 - 1 / RV_GIST_ENCODING);
            any = savers = 1;
        } else if (!strcmp(m, "recompute")) {
            share = fmin(1, share + getnum(a, "share", 1));
            any = savers = 1;
        }
    }
    if (!any)
        return 0;
    json_t *b = json_object_get(mem, "breakdown");
    const json_t *ao = json_object_get(b, "activations_and_other");
    double base = getnum(mem, "peak_bytes", -1);
    if (!json_is_integer(json_object_get(mem, "peak_bytes")) ||
        !json_is_string(json_object_get(mem, "source")) ||
        strcmp(json_string_value(json_object_get(mem, "source")), "allocator_totals") != 0)
        base = getnum(mem, "estimated_peak_bytes", -1);
    if (!json_is_object(b) || base <= 0 || !json_is_integer(ao)) {
        set_null(mem, "the prediction needs the breakdown of the peak into weights, gradients, "
                      "optimizer state and activations");
        return 0;
    }
    /* Activations and the rest scale with the (micro-)batch; the savers
     * free part of the saved activations, never more than there are. */
    double other = (double)json_integer_value(ao);
    double act = getnum(b, "activations", other);
    act = fmin(act, other);
    double known = base - other;
    double other2 = other * scale, act2 = act * scale;
    double freed = 0;
    if (savers) {
        /* Recomputation keeps checkpoints: with L saving layers cut into
         * sqrt(L) segments, sqrt(L) checkpoints plus one segment's
         * activations stay, 2/sqrt(L) of them (Chen et al. 2016). */
        double layers = getnum(b, "activation_layers", 0);
        double keep = layers >= 4 ? 2 / sqrt(layers) : 1;
        freed = share * act2 * (1 - keep);
        freed += fmin(offload * scale, act2 - freed);
        freed += fmin(encoded * scale, act2 - freed);
        freed = fmax(0, fmin(freed, act2));
    }
    json_int_t peak = (json_int_t)llround(known + other2 - freed);
    json_t *pb = json_object();
    json_object_set(pb, "weights", json_object_get(b, "weights"));
    json_object_set(pb, "gradients", json_object_get(b, "gradients"));
    json_object_set(pb, "optimizer_state", json_object_get(b, "optimizer_state"));
    json_object_set_new(pb, "activations", json_integer((json_int_t)llround(act2 - freed)));
    json_object_set_new(pb, "activations_and_other",
                        json_integer((json_int_t)llround(other2 - freed)));
    json_object_set_new(pb, "freed_activations", json_integer((json_int_t)llround(freed)));
    json_object_set_new(pb, "activation_scale", json_real(scale));
    json_object_set_new(mem, "predicted_peak_bytes", json_integer(peak));
    json_object_set_new(mem, "predicted_breakdown", pb);
    return savers;
}

const char *rv_memory_optimizer_named(const char *op, int *len, double *state)
{
    static const struct {
        const char *key;
        double state;
    } tab[] = {{"#AdamW.", 2},    {"#Adam.", 2},    {"#LAMB.", 2},    {"#Lamb.", 2},
               {"#Adadelta.", 2}, {"#Adagrad.", 1}, {"#RMSprop.", 1}, {"#SGD.", 1}};
    if (strncmp(op, "Optimizer.", 10) != 0 || !strchr(op, '#'))
        return NULL;
    for (size_t k = 0; k < sizeof(tab) / sizeof(tab[0]); k++)
        if (strstr(op, tab[k].key)) {
            *state = tab[k].state;
            *len = (int)strcspn(tab[k].key + 1, ".");
            return tab[k].key + 1;
        }
    return NULL;
}
