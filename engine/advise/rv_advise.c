/* Advise: a beam search over what-if plans (rv_advise.h, docs/advise.md).
 *
 * The space is a table of changes ("moves"), each one optimization or
 * top-level member of a what-if document, built from what the trace shows
 * (its GPU, its phases, its kernels, its critical path). A plan is a set of
 * moves, at most one per group; it is evaluated by running its document
 * through rv_run exactly as `reverie simulate --whatif` does. */
#include "advise/rv_advise.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "graph/rv_precision.h"
#include "hw/rv_hw.h"
#include "job/rv_job.h"
#include "models/rv_parallel.h"
#include "run/rv_run.h"
#include "simulate/rv_pardims.h"
#include "simulate/rv_report.h"
#include "trace/rv_shapes.h"
#include "util/rv_stop.h"
#include "whatif/rv_whatif.h"

/* Resources a move relieves (compared with the critical path's time on
 * them, for pruning). */
enum {
    RES_DATA = 1,
    RES_GPU = 2,
    RES_CPU = 4,
    RES_COMM = 8,
    RES_MEM = 16,
    RES_POWER = 32,
    RES_SCALE = 64 /* more GPUs: relieves no resource of the step, adds samples */
};
/* At most one move of a group per plan. */
enum {
    G_DATA,
    G_AMP,
    G_FUSED,
    G_BN,
    G_KFUSE,
    G_BATCH,
    G_ACCUM,
    G_MEM,
    G_POWER,
    G_DIST,
    G_NET,
    G_WORKERS,
    G_BUCKET,
    G_TFUSION,
    G_DGC,
    G_ZERO,
    G_TP,
    G_PP,
    G_EP
};

#define MAX_MOVES 64
/* A move acting on resources that hold less than this share of the
 * critical path cannot shorten the step by more than that share. */
#define BOUND_MIN_SHARE 0.02
/* A child must beat its parent by this much to be kept. */
#define MIN_GAIN 1e-3
/* A child with more GPUs than its parent must beat it by this much. */
#define SCALE_MIN_GAIN 0.02
/* Non-fitting plans listed after the fitting ones. */
#define MAX_UNFIT_LISTED 5

typedef struct move {
    int group;
    unsigned res;
    double factor;     /* samples per step relative to the trace's batch */
    int memory_only;   /* tried only once memory is the constraint */
    int needs_workers; /* a distributed knob on a one-GPU trace: only with a G_WORKERS move */
    int workers;       /* G_WORKERS, or a model-parallel move that re-splits the
                          trace's GPUs: the data-parallel replicas */
    int mp;            /* GPUs one replica spans: the tensor or pipeline degree, else 1 */
    json_t *opt;       /* an optimization object, or NULL */
    const char *key;   /* else a top-level member */
    json_t *val;
    char label[48];
    const char *relieves; /* "takes loading off the training process" */
} move;

/* The critical path's time on each resource, microseconds. */
typedef struct crit {
    double len, data, gpu, cpu, comm, wait;
} crit;

typedef struct plan {
    uint64_t mask;
    int parent; /* index in plans, -1: the baseline */
    int depth;
    double obj, predicted_us, energy_j, factor;
    int have_energy;
    int64_t mem_peak; /* -1 unknown */
    int gpus;         /* the job's GPUs */
    double cost_usd;  /* GPU-hours of one step x the price */
    int fits;
    crit cp;
    json_t *doc, *warnings;
} plan;

typedef struct search {
    const rv_graph *g; /* the trace, or a job's first rank (preconditions, memory) */
    const rv_sim *base;
    const rv_job *job; /* NULL: a single trace */
    rv_advise_opts o;
    rv_stop stop;
    move moves[MAX_MOVES];
    size_t nmoves;
    json_t *excluded; /* [{change, reason}] */
    plan *plans;
    size_t nplans;
    uint64_t seen[RV_ADVISE_MAX_EVALS];
    size_t nseen;
    plan base_plan;
    double base_us, base_energy;
    int64_t mem_limit;
    char mem_limit_src[96];
    int base_world; /* data-parallel ranks the trace stands for (1: one GPU) */
    int base_gpus;  /* the baseline job's GPUs */
    int base_ranks; /* the data-parallel ranks the baseline run's energy stands for */
    int gpus_avail; /* GPUs a plan may use: --gpus, else the baseline's */
    double price;   /* USD per GPU-hour */
    const char *price_src;
    size_t searched, pruned_bound, pruned_no_effect, pruned_dominated, failed;
    int memory_constrained;
    int stopped; /* 1: budget, 2: evaluation cap */
    char stop_msg[200];
} search;

int rv_advise_objective_parse(const char *s)
{
    if (!s)
        return -1;
    if (strcmp(s, "time") == 0)
        return RV_ADVISE_TIME;
    if (strcmp(s, "energy") == 0)
        return RV_ADVISE_ENERGY;
    if (strcmp(s, "cost") == 0)
        return RV_ADVISE_COST;
    return -1;
}

/* ---- the space ---------------------------------------------------------- */

static move *add_move(search *s, int group, unsigned res, const char *label, const char *relieves)
{
    if (s->nmoves >= MAX_MOVES)
        return NULL;
    move *m = &s->moves[s->nmoves++];
    memset(m, 0, sizeof(*m));
    m->group = group;
    m->res = res;
    m->factor = 1;
    m->mp = 1;
    m->relieves = relieves;
    snprintf(m->label, sizeof(m->label), "%s", label);
    return m;
}

static void exclude(search *s, const char *change, const char *reason)
{
    json_array_append_new(s->excluded, json_pack("{s:s,s:s}", "change", change, "reason", reason));
}

/* What the graph holds that the preconditions ask about. */
typedef struct facts {
    int loading, optimizer, fused_optimizer, batchnorm, backward, comm, moe;
    double crit_elementwise_us; /* elementwise kernels on the baseline's critical path */
} facts;

static int name_has(const char *name, const char *const *subs)
{
    for (; *subs; subs++)
        if (strcasestr(name, *subs))
            return 1;
    return 0;
}

static void read_facts(const search *s, const rv_run_result *r, facts *f)
{
    static const char *const fused[] = {"multi_tensor", "fused", NULL};
    static const char *const bn[] = {"bn_", "batch_norm", "batchnorm", NULL};
    static const char *const ew[] = {"elementwise", NULL};
    const rv_graph *g = s->g;
    uint8_t *marks = malloc(g->ntasks + 1);

    memset(f, 0, sizeof(*f));
    if (marks)
        rv_report_critical_tasks(g, s->base, &r->base_win, marks);
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        const char *name = rv_trace_str(g->trace, t->name);
        f->loading |= t->gap_dl_ns > 0;
        f->backward |= t->phase == RV_PHASE_BACKWARD;
        f->comm |= t->kind == RV_TASK_COMM || (t->flags & RV_TF_NCCL);
        /* The expert model re-times DeepEP's kernels, taken for collectives. */
        if ((t->kind == RV_TASK_GPU || t->kind == RV_TASK_COMM) && t->event >= 0)
            f->moe |= rv_pardims_is_moe_kernel(name);
        if (t->kind != RV_TASK_GPU)
            continue;
        if (t->phase == RV_PHASE_OPTIMIZER) {
            f->optimizer++;
            f->fused_optimizer |= name_has(name, fused);
        }
        f->batchnorm |= name_has(name, bn);
        if (marks && marks[i] && name_has(name, ew))
            f->crit_elementwise_us += (double)t->dur_ns / 1e3;
    }
    free(marks);
}

static void space_gpu(search *s, const facts *f, const rv_hw *hw)
{
    static const int dts[] = {RV_DT_FP16, RV_DT_BF16, RV_DT_FP8};
    for (size_t i = 0; i < sizeof(dts) / sizeof(dts[0]); i++) {
        char label[48];
        snprintf(label, sizeof(label), "amp %s", rv_dtype_name(dts[i]));
        /* The one rule of which GPU has which dtype (rv_precision.h);
         * a GPU it cannot tell is asked fp16 only (Daydream's ratios). */
        char why[160] = "";
        int has = rv_prec_gpu_has(hw, s->g->trace, dts[i], why, sizeof(why));
        if (has == 0 || (has < 0 && dts[i] != RV_DT_FP16)) {
            exclude(s, label, has == 0 ? why : "the GPU is unknown: only fp16 is asked");
            continue;
        }
        move *m = add_move(s, G_AMP, RES_GPU, label, "runs GPU kernels at lower precision");
        if (m)
            m->opt = json_pack("{s:s,s:s}", "kind", "amp", "dtype", rv_dtype_name(dts[i]));
    }
    if (!f->optimizer)
        exclude(s, "fused_optimizer", "the trace has no optimizer kernels");
    else if (f->fused_optimizer)
        exclude(s, "fused_optimizer", "the optimizer already runs fused (multi-tensor) kernels");
    else {
        move *m = add_move(s, G_FUSED, RES_GPU | RES_CPU, "fused_optimizer",
                           "fuses the optimizer's kernels and launches");
        if (m)
            m->opt = json_pack("{s:s}", "kind", "fused_optimizer");
    }
    if (!f->batchnorm)
        exclude(s, "restructure_batchnorm", "the trace has no batchnorm kernels");
    else {
        move *m = add_move(s, G_BN, RES_GPU | RES_CPU, "restructure_batchnorm",
                           "halves batchnorm and folds ReLU kernels away");
        if (m)
            m->opt = json_pack("{s:s}", "kind", "restructure_batchnorm");
    }
    if (f->crit_elementwise_us <= 0)
        exclude(s, "kernel_fusion elementwise",
                "the critical path crosses no chain of elementwise kernels");
    else {
        move *m = add_move(s, G_KFUSE, RES_GPU | RES_CPU, "kernel_fusion elementwise",
                           "fuses chains of elementwise kernels");
        if (m)
            m->opt = json_pack("{s:s,s:{s:s,s:s}}", "kind", "kernel_fusion", "select", "kind",
                               "kernel", "name", "elementwise");
    }
}

static void space_batch(search *s, const facts *f)
{
    static const double factors[] = {2, 4};
    for (size_t i = 0; i < sizeof(factors) / sizeof(factors[0]); i++) {
        char label[48];
        snprintf(label, sizeof(label), "batch x%.0f", factors[i]);
        move *m = add_move(s, G_BATCH, RES_GPU | RES_CPU, label,
                           "spreads per-step costs over more samples");
        if (!m)
            continue;
        m->factor = factors[i];
        m->opt = json_pack("{s:s,s:f}", "kind", "batch_size", "factor", factors[i]);
    }
    if (!f->backward) {
        exclude(s, "recompute", "the trace has no backward pass");
        exclude(s, "gradient_accumulation", "the trace has no backward pass");
        return;
    }
    move *m = add_move(s, G_MEM, RES_MEM, "recompute",
                       "recomputes activations in backward instead of keeping them");
    if (m) {
        m->memory_only = 1;
        m->opt = json_pack("{s:s}", "kind", "recompute");
    }
    static const int steps[] = {2, 4};
    for (size_t i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
        char label[48];
        snprintf(label, sizeof(label), "gradient_accumulation %d", steps[i]);
        m = add_move(s, G_ACCUM, RES_GPU | RES_CPU | RES_COMM, label,
                     "runs the optimizer once per several micro-batches at the trace's memory");
        if (!m)
            continue;
        m->memory_only = 1;
        m->opt = json_pack("{s:s,s:i}", "kind", "gradient_accumulation", "steps", steps[i]);
    }
}

/* A move setting members of the one `distributed` object (plan_doc adds
 * the workers). */
static move *add_dist(search *s, int group, const char *label, const char *relieves, json_t *val,
                      int needs_workers)
{
    move *m = add_move(s, group, RES_COMM, label, relieves);
    if (!m) {
        json_decref(val);
        return NULL;
    }
    m->key = "distributed";
    m->val = val;
    m->needs_workers = needs_workers;
    return m;
}

/* Data-parallel scale up to opts.gpus: the trace's world times 2, 4, ...
 * (the largest RV_ADVISE_MAX_SCALES kept), each a `distributed.workers`
 * what-if (inserted collectives on a one-GPU trace, re-timed ones on a
 * multi-rank trace). */
static int space_workers(search *s)
{
    int w[32], n = 0;
    for (long v = 2L * s->base_world; v <= s->o.gpus && n < 32; v *= 2)
        w[n++] = (int)v;
    if (s->o.gpus > 0 && n == 0)
        exclude(s, "distributed.workers", "--gpus is not above twice the trace's world size");
    for (int i = n > RV_ADVISE_MAX_SCALES ? n - RV_ADVISE_MAX_SCALES : 0; i < n; i++) {
        char label[48];
        snprintf(label, sizeof(label), "data parallel %d GPUs", w[i]);
        move *m = add_move(s, G_WORKERS, RES_SCALE, label,
                           "spreads the samples over more GPUs, paying for their collectives");
        if (!m)
            continue;
        m->workers = w[i];
        m->factor = (double)w[i] / s->base_world;
        m->key = "distributed";
        m->val = json_pack("{s:i}", "workers", w[i]);
    }
    return n;
}

/* ZeRO / FSDP sharding over the job's data-parallel ranks (the
 * `parallel` what-if): a memory saver of a multi-GPU job, tried once memory
 * is the constraint. */
static void space_zero(search *s)
{
    static const int stages[] = {1, 3};
    for (size_t i = 0; i < sizeof(stages) / sizeof(stages[0]); i++) {
        char label[48];
        snprintf(label, sizeof(label), "zero %d", stages[i]);
        move *m = add_move(s, G_ZERO, RES_MEM, label,
                           stages[i] == 1 ? "shards the optimizer states over the ranks"
                                          : "shards parameters, gradients and optimizer states "
                                            "over the ranks");
        if (!m)
            continue;
        m->memory_only = 1;
        m->key = "parallel";
        m->val = json_pack("{s:i}", "zero", stages[i]);
    }
}

/* Tensor and pipeline degrees split each data-parallel replica over d
 * GPUs; those must divide the GPUs to spend. A replica count that would
 * then need more GPUs than there are is brought down to fit (the trace's
 * GPUs re-split: fewer replicas, fewer samples per step). The model's own
 * preconditions (layer instances, heads, layers per stage) decide the
 * rest, its refusal the exclusion's reason. */
static void add_mp(search *s, int group, int d, int micro)
{
    int G = s->gpus_avail;
    char label[48], why[240];
    rv_par par = {.zero = -1};
    rv_error e;
    if (group == G_TP) {
        par.tensor = d;
        snprintf(label, sizeof(label), "tensor %d", d);
    } else {
        par.pipeline = d;
        par.microbatches = micro;
        snprintf(label, sizeof(label), "pipeline %d x %d micro-batches", d, micro);
    }
    if (G % d != 0) {
        snprintf(why, sizeof(why), "%d does not divide the %d GPUs to spend", d, G);
        exclude(s, label, why);
        return;
    }
    rv_error_clear(&e);
    if (rv_parallel_check(&par, s->g, &e) != 0) {
        exclude(s, label, e.message);
        return;
    }
    move *m =
        add_move(s, group, group == G_TP ? RES_GPU : RES_GPU | RES_CPU | RES_DATA | RES_COMM, label,
                 group == G_TP ? "splits each layer's GEMMs over the GPUs, paying two "
                                 "all-reduces per layer and pass"
                               : "splits the layers into stages over the GPUs, paying the "
                                 "pipeline's bubble and sends");
    if (!m)
        return;
    m->mp = d;
    if (s->base_world * d > G) {
        m->workers = G / d;
        m->factor = (double)m->workers / s->base_world;
        size_t n = strlen(m->label);
        snprintf(m->label + n, sizeof(m->label) - n, ", %d replica%s", m->workers,
                 m->workers == 1 ? "" : "s");
    }
    m->key = "parallel";
    m->val = group == G_TP ? json_pack("{s:i}", "tensor", d)
                           : json_pack("{s:i,s:i}", "pipeline", d, "microbatches", micro);
}

/* The expert degrees below the traced one (the model re-times the
 * expert all-to-all by its off-rank share; the GPUs stay). */
static void space_expert(search *s, const facts *f)
{
    if (!f->moe || s->base_world < 2) {
        exclude(s, "parallel.expert",
                !f->moe ? "the trace has no expert all-to-all kernels (DeepEP dispatch / combine) "
                          "to re-time"
                        : "the trace does not name a world size above 1 to change the expert "
                          "degree from");
        return;
    }
    for (int d = 2; d < s->base_world; d *= 2) {
        if (s->base_world % d != 0)
            continue;
        char label[48];
        snprintf(label, sizeof(label), "expert %d", d);
        move *m = add_move(s, G_EP, RES_COMM, label,
                           "keeps more of the tokens on their rank in the expert all-to-all");
        if (!m)
            return;
        m->key = "parallel";
        m->val = json_pack("{s:i}", "expert", d);
    }
}

/* Model-parallel degrees 2, 4, 8 (tensor parallelism stays inside a node
 * of 8 GPUs), when a multi-GPU trace or --gpus gives GPUs to split a
 * replica over. A pipeline runs 4 micro-batches per stage, at most the
 * trace's batch: the model prices no smaller-kernel cost of a
 * micro-batch, so more would always look better. */
static void space_mp(search *s, const facts *f)
{
    static const int degs[] = {2, 4, 8};
    s->gpus_avail = s->o.gpus > 0 ? s->o.gpus : s->base_gpus;
    space_expert(s, f);
    if (s->gpus_avail < 2) {
        exclude(s, "parallel.tensor, parallel.pipeline",
                "one GPU, and --gpus gives no more to split the model over");
        return;
    }
    const char *from = NULL;
    int64_t batch = s->g->trace ? rv_shapes_batch(s->g->trace, &from) : 0;
    for (size_t i = 0; i < sizeof(degs) / sizeof(degs[0]) && degs[i] <= s->gpus_avail; i++)
        add_mp(s, G_TP, degs[i], 0);
    for (size_t i = 0; i < sizeof(degs) / sizeof(degs[0]) && degs[i] <= s->gpus_avail; i++) {
        int64_t micro = 4LL * degs[i];
        add_mp(s, G_PP, degs[i], (int)(batch > 0 && batch < micro ? batch : micro));
    }
}

/* The distributed knobs: on a trace that communicates (its traced
 * collectives re-timed), or joined to a data-parallel scale on a one-GPU
 * trace (inserted collectives, where bucketing and fusion apply too). */
static void space_dist(search *s, const facts *f)
{
    int traced = f->comm && s->base_world > 1;
    if (traced)
        space_zero(s);
    else
        exclude(s, "parallel.zero", "a one-GPU trace: nothing to shard the model states over");
    int scales = space_workers(s);
    if (!traced && !scales) {
        exclude(s, "distributed",
                f->comm ? "the trace does not name its world size and --gpus asks for no more GPUs"
                        : "the trace does not communicate and --gpus asks for no more GPUs");
        return;
    }
    int nw = !traced;
    static const char *const algos[] = {"tree", "hierarchical"};
    for (size_t i = 0; i < sizeof(algos) / sizeof(algos[0]); i++) {
        char label[48];
        snprintf(label, sizeof(label), "allreduce %s", algos[i]);
        add_dist(s, G_DIST, label, "shortens the collectives",
                 json_pack("{s:s}", "algorithm", algos[i]), nw);
    }
    /* A faster network between nodes (the baseline's is 100 Gb/s between
     * 8-GPU nodes): only a job of more than one node crosses it. */
    if ((traced && s->base_world > 8) || s->o.gpus > 8)
        add_dist(s, G_NET, "network 400 Gb/s per node",
                 "speeds the collectives' transfers between nodes",
                 json_pack("{s:f}", "inter_node_gbps", 400.0), nw);
    add_dist(s, G_DGC, "gradient compression 1%",
             "sends 1% of the gradients (DGC), at a cost in convergence no model here judges",
             json_pack("{s:f}", "dgc_density", 0.01), nw);
    if (traced) {
        exclude(s, "bucket_mb, tensor_fusion_mb",
                "the traced collectives are the job's own buckets: re-bucketing changes nothing");
        return;
    }
    static const double buckets[] = {5, 100};
    for (size_t i = 0; i < sizeof(buckets) / sizeof(buckets[0]); i++) {
        char label[48];
        snprintf(label, sizeof(label), "bucket %.0f MB", buckets[i]);
        add_dist(s, G_BUCKET, label,
                 buckets[i] < 25 ? "starts the collectives earlier, overlapping the backward"
                                 : "sends fewer, larger collectives",
                 json_pack("{s:f}", "bucket_mb", buckets[i]), 1);
    }
    add_dist(s, G_TFUSION, "tensor fusion 64 MB", "fuses small gradients into fewer collectives",
             json_pack("{s:f}", "tensor_fusion_mb", 64.0), 1);
}

static void space_host(search *s, const facts *f, const rv_hw *hw)
{
    static const int workers[] = {2, 4, 8, 16};
    if (!f->loading)
        exclude(s, "dataloader", "the trace shows no data loading in the training process");
    for (size_t i = 0; f->loading && i < sizeof(workers) / sizeof(workers[0]); i++) {
        char label[48];
        snprintf(label, sizeof(label), "dataloader workers %d", workers[i]);
        move *m = add_move(s, G_DATA, RES_DATA, label, "takes loading off the training process");
        if (m)
            m->opt = json_pack("{s:s,s:i}", "kind", "dataloader", "workers", workers[i]);
    }
    space_dist(s, f);
    space_mp(s, f);
    if (s->o.objective != RV_ADVISE_ENERGY)
        return;
    if (!hw) {
        exclude(s, "power_limit_frac", "the GPU is not in the hardware table");
        return;
    }
    static const double fracs[] = {0.6, 0.7, 0.8, 0.9};
    for (size_t i = 0; i < sizeof(fracs) / sizeof(fracs[0]); i++) {
        char label[48];
        snprintf(label, sizeof(label), "power cap %.0f%%", fracs[i] * 100);
        if (fracs[i] * hw->default_pl_w < hw->min_pl_w)
            continue;
        move *m = add_move(s, G_POWER, RES_POWER, label, "lowers the GPU's power cap");
        if (!m)
            continue;
        m->key = "power_limit_frac";
        m->val = json_real(fracs[i]);
    }
}

/* ---- one plan ----------------------------------------------------------- */

/* The plan's data-parallel workers (its G_WORKERS move, or a
 * model-parallel move that re-splits the GPUs), else 0. */
static int workers_of(const search *s, uint64_t mask)
{
    for (size_t i = 0; i < s->nmoves; i++)
        if ((mask & (1ull << i)) && s->moves[i].workers > 0)
            return s->moves[i].workers;
    return 0;
}

/* GPUs one data-parallel replica of the plan spans: its tensor times its
 * pipeline degree. */
static int mp_of(const search *s, uint64_t mask)
{
    int n = 1;
    for (size_t i = 0; i < s->nmoves; i++)
        if (mask & (1ull << i))
            n *= s->moves[i].mp;
    return n;
}

/* The plan's GPUs: its replicas (as traced unless it scales them) times
 * the GPUs each spans. */
static long gpus_of(const search *s, uint64_t mask)
{
    int w = workers_of(s, mask);
    return (long)(w > 0 ? w : s->base_world) * mp_of(s, mask);
}

static json_t *plan_doc(const search *s, uint64_t mask)
{
    json_t *doc = json_object(), *opts = json_array();
    if (!doc || !opts) {
        json_decref(doc);
        json_decref(opts);
        return NULL;
    }
    for (size_t i = 0; i < s->nmoves; i++) {
        const move *m = &s->moves[i];
        if (!(mask & (1ull << i)))
            continue;
        if (m->opt)
            json_array_append_new(opts, json_deep_copy(m->opt));
        else if (m->key && json_is_object(json_object_get(doc, m->key)))
            json_object_update(json_object_get(doc, m->key), m->val); /* one distributed */
        else if (m->key)
            json_object_set_new(doc, m->key, json_deep_copy(m->val));
    }
    /* The knobs keep the trace's scale unless the plan changes it (its
     * workers, or a model-parallel degree that re-splits the GPUs). */
    int wk = workers_of(s, mask);
    json_t *dist = json_object_get(doc, "distributed");
    if (!dist && wk > 0) {
        dist = json_object();
        json_object_set_new(doc, "distributed", dist);
    }
    if (dist)
        json_object_set_new(dist, "workers", json_integer(wk > 0 ? wk : s->base_world));
    if (json_array_size(opts))
        json_object_set_new(doc, "optimizations", opts);
    else
        json_decref(opts);
    return doc;
}

static double num_at(const json_t *o, const char *key)
{
    return json_number_value(json_object_get(o, key));
}

static void read_crit(const json_t *cp, crit *c)
{
    c->len = num_at(cp, "length_us");
    c->data = num_at(cp, "data_us");
    c->gpu = num_at(cp, "gpu_us");
    c->cpu = num_at(cp, "cpu_us") + num_at(cp, "cpu_gap_us");
    c->comm = num_at(cp, "comm_us");
    c->wait = num_at(cp, "wait_us");
}

/* The peak the answer predicts: the memory savers' and batch's
 * prediction, else the trace's estimate, else its measured peak. */
static int64_t mem_peak_of(const rv_run_result *r)
{
    const json_t *m = json_object_get(r->metrics, "memory");
    static const char *const keys[] = {"predicted_peak_bytes", "estimated_peak_bytes",
                                       "peak_bytes"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        const json_t *v = json_object_get(m, keys[i]);
        if (json_is_integer(v))
            return (int64_t)json_integer_value(v);
    }
    return -1;
}

static double factor_of(const search *s, uint64_t mask)
{
    double f = 1;
    for (size_t i = 0; i < s->nmoves; i++)
        if (mask & (1ull << i))
            f *= s->moves[i].factor;
    return f;
}

/* p->cost_usd and p->obj from its figures; energy_scale turns its energy
 * into the job's. */
static void set_objective(const search *s, plan *p, double energy_scale)
{
    p->cost_usd = p->predicted_us / 3.6e9 * p->gpus * s->price;
    double per_step = p->predicted_us;
    if (s->o.objective == RV_ADVISE_ENERGY && p->have_energy)
        per_step = p->energy_j * energy_scale;
    else if (s->o.objective == RV_ADVISE_COST)
        per_step = p->cost_usd;
    p->obj = per_step / (p->factor > 0 ? p->factor : 1);
}

/* The objective per sample of the trace's batch: the step's time, the
 * job's energy or its GPU-hours' price, over the samples a step takes
 * (batch and data-parallel factors). */
static void fill_plan(search *s, plan *p, const rv_run_result *r)
{
    p->predicted_us = r->sum.predicted_us;
    p->have_energy = r->sum.have_energy;
    p->energy_j = r->sum.energy_j;
    p->mem_peak = mem_peak_of(r);
    p->fits = p->mem_peak < 0 || s->mem_limit <= 0 || p->mem_peak <= s->mem_limit;
    read_crit(r->critical_path, &p->cp);
    /* The run's figures, as simulate prints them: energy_j the GPUs the
     * trace's work runs on (every GPU of a model-parallel replica), gpus
     * the job's (job.gpus). */
    p->gpus = r->pred_energy.job_gpus > 0 ? r->pred_energy.job_gpus : (int)gpus_of(s, p->mask);
    /* The job's energy, in the baseline's replicas. */
    int ranks = r->pred_energy.ranks > 0 ? r->pred_energy.ranks : 1;
    set_objective(s, p, (double)ranks / (s->base_ranks > 0 ? s->base_ranks : 1));
}

/* A model that changed nothing on this graph: the plan is the same as
 * one without it. */
static int has_no_effect(const rv_run_result *r)
{
    for (size_t i = 0; i < r->nwarnings; i++)
        if (!strcmp(r->warnings[i].code, "no_match") || !strcmp(r->warnings[i].code, "no_effect"))
            return 1;
    return 0;
}

static int json_no_effect(const json_t *warnings)
{
    size_t i;
    json_t *w;
    json_array_foreach(warnings, i, w)
    {
        const char *c = json_string_value(json_object_get(w, "code"));
        if (c && (!strcmp(c, "no_match") || !strcmp(c, "no_effect")))
            return 1;
    }
    return 0;
}

/* Whether the plan changes what the memory model sees (the batch, the
 * savers): a job's plan then runs its first rank alone for the peak. */
static int changes_memory(const search *s, uint64_t mask)
{
    for (size_t i = 0; i < s->nmoves; i++) {
        int g = s->moves[i].group;
        if ((mask & (1ull << i)) &&
            (g == G_BATCH || g == G_MEM || g == G_ACCUM || g == G_ZERO || g == G_TP || g == G_PP))
            return 1;
    }
    return 0;
}

static rv_run_opts run_opts(const search *s)
{
    return (rv_run_opts){.iteration = RV_ITER_MEDIAN,
                         .top_kernels = 1,
                         .critical_max = 1,
                         .budget_ms = s->o.run_budget_ms,
                         .deadline_ms = s->stop.deadline_ms,
                         .cancel = s->stop.cancel,
                         .cancel_fn = s->stop.cancel_fn,
                         .cancel_arg = s->stop.cancel_arg};
}

/* The first rank's memory peak under w (a job's plan); -1 unknown. */
static int rank_mem_peak(const search *s, const rv_whatif *w, int64_t *peak, rv_error *e)
{
    rv_run_result *r = NULL;
    rv_run_opts ro = run_opts(s);
    int rc = rv_run(s->g, s->base, w, &ro, &r, e);
    *peak = rc == 0 ? mem_peak_of(r) : -1;
    rv_run_result_free(r);
    return rc;
}

/* Runs w on the job (the job what-if path, as `reverie simulate RANK0
 * RANK1 ... --whatif` and POST /v1/training-jobs/{id}/whatif). p's mask
 * and factor are set; fills its figures. The job's critical path is not
 * split by resource: its plans are not pruned by the bound. */
static int run_job_plan(search *s, const rv_whatif *w, plan *p, int *no_effect, rv_error *e)
{
    rv_job_result *jr = NULL;
    json_t *ans = NULL;
    rv_run_opts ro = run_opts(s);
    int rc = rv_job_run(s->job, w, &ro, &jr, e);
    if (rc != 0)
        goto out;
    ans = rv_job_render(jr, NULL);
    if (!ans) {
        rc = rv_error_set(e, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    *no_effect = json_no_effect(json_object_get(ans, "warnings"));
    p->predicted_us = rv_job_result_summary(jr)->predicted_us;
    const json_t *en = json_object_get(ans, "energy_j");
    p->have_energy = json_is_object(en);
    p->energy_j = num_at(en, "predicted");
    p->warnings = json_incref(json_object_get(ans, "warnings"));
    p->mem_peak = s->base_plan.mem_peak;
    if (changes_memory(s, p->mask) && (rc = rank_mem_peak(s, w, &p->mem_peak, e)) != 0)
        goto out;
    p->fits = p->mem_peak < 0 || s->mem_limit <= 0 || p->mem_peak <= s->mem_limit;
    /* The job answer's GPUs, as its energy counts them. */
    p->gpus = (int)num_at(json_object_get(ans, "gpus"), "predicted");
    set_objective(s, p, 1);
out:
    json_decref(ans);
    rv_job_result_free(jr);
    return rc;
}

/* Runs w on the trace (rv_run, the path of `simulate --whatif`). */
static int run_trace_plan(search *s, const rv_whatif *w, plan *p, int *no_effect, rv_error *e)
{
    rv_run_result *r = NULL;
    rv_run_opts ro = run_opts(s);
    int rc = rv_run(s->g, s->base, w, &ro, &r, e);
    if (rc == 0) {
        *no_effect = has_no_effect(r);
        fill_plan(s, p, r);
        p->warnings = rv_run_warnings_json(r);
    }
    rv_run_result_free(r);
    return rc;
}

/* Runs plan mask. 0: *out filled; 1: pruned or failed (counted); -1:
 * the search must stop (budget, cancel); negative rv_err: OOM. */
static int evaluate(search *s, uint64_t mask, int parent, plan *out, rv_error *err)
{
    rv_whatif *w = NULL;
    rv_error e;
    int no_effect = 0;
    memset(out, 0, sizeof(*out));
    out->doc = plan_doc(s, mask);
    if (!out->doc)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    out->mask = mask;
    out->parent = parent;
    out->factor = factor_of(s, mask);
    rv_error_clear(&e);
    s->searched++;
    int rc = rv_whatif_parse(out->doc, &w, &e);
    if (rc == 0)
        rc = s->job ? run_job_plan(s, w, out, &no_effect, &e)
                    : run_trace_plan(s, w, out, &no_effect, &e);
    rv_whatif_free(w);
    if (rc == RV_ERR_BUDGET && rv_stop_check(&s->stop, NULL) != 0) {
        s->searched--; /* not finished: not searched */
        s->stopped = 1;
        snprintf(s->stop_msg, sizeof(s->stop_msg),
                 "the search stopped at its budget of %.2f s (or was cancelled): %.120s",
                 (double)s->stop.budget_ms / 1e3, e.message);
        rc = -1;
    } else if (rc == RV_ERR_NOMEM) {
        *err = e;
    } else if (rc != 0) {
        s->failed++;
        rc = 1;
    } else if (no_effect) {
        s->pruned_no_effect++;
        rc = 1;
    }
    if (rc != 0) {
        json_decref(out->doc);
        json_decref(out->warnings);
        out->doc = out->warnings = NULL;
    }
    return rc;
}

/* ---- the search --------------------------------------------------------- */

static int seen(search *s, uint64_t mask)
{
    for (size_t i = 0; i < s->nseen; i++)
        if (s->seen[i] == mask)
            return 1;
    return 0;
}

static const plan *plan_at(const search *s, int i)
{
    return i < 0 ? &s->base_plan : &s->plans[i];
}

/* The critical path's time on a move's resources (relative). */
static double bound_share(const crit *c, unsigned res)
{
    double t = 0;
    if (c->len <= 0)
        return 1;
    if (res & (RES_MEM | RES_POWER | RES_SCALE))
        return 1;
    t += res & RES_DATA ? c->data : 0;
    t += res & RES_GPU ? c->gpu : 0;
    t += res & RES_CPU ? c->cpu : 0;
    t += res & RES_COMM ? c->comm : 0;
    return t / c->len;
}

/* Whether move i may join parent p; counts the pruned. */
static int may_add(search *s, const plan *p, size_t i)
{
    const move *m = &s->moves[i];
    if (p->mask & (1ull << i))
        return 0;
    if (m->needs_workers && !workers_of(s, p->mask))
        return 0;
    for (size_t k = 0; k < s->nmoves; k++) {
        int og = s->moves[k].group;
        /* One replica count per plan: a scale, or a re-split. */
        int clash = og == m->group || (og == G_BATCH && m->group == G_ACCUM) ||
                    (og == G_ACCUM && m->group == G_BATCH) ||
                    (s->moves[k].workers > 0 && m->workers > 0);
        if ((p->mask & (1ull << k)) && clash)
            return 0;
    }
    if ((m->mp > 1 || m->workers > 0) && gpus_of(s, p->mask | (1ull << i)) > s->gpus_avail)
        return 0;
    /* An over-budget plan only gets what frees memory (a model-parallel
     * degree shards the model states too). */
    if (!p->fits)
        return (m->res & RES_MEM) != 0 || m->group == G_ACCUM || m->mp > 1;
    if (m->memory_only && !s->memory_constrained)
        return 0;
    if (m->res & RES_MEM)
        return 0;
    if (s->o.objective == RV_ADVISE_TIME && !s->job &&
        bound_share(&p->cp, m->res) < BOUND_MIN_SHARE) {
        s->pruned_bound++;
        return 0;
    }
    return 1;
}

/* Whether child c earns its place over its parent p. More GPUs must
 * earn SCALE_MIN_GAIN: a gain within the models' error does not justify
 * buying them (on the cost objective they would otherwise win ties). */
static int worth_keeping(const plan *c, const plan *p)
{
    if (c->fits && !p->fits)
        return 1;
    if (!c->fits && !p->fits)
        return c->mem_peak >= 0 && p->mem_peak >= 0 && c->mem_peak < p->mem_peak;
    double gain = c->gpus > p->gpus ? SCALE_MIN_GAIN : MIN_GAIN;
    return c->obj < p->obj * (1 - gain);
}

static int cmp_plan(const plan *a, const plan *b)
{
    if (a->fits != b->fits)
        return b->fits - a->fits;
    if (a->obj != b->obj)
        return (a->obj > b->obj) - (a->obj < b->obj);
    /* Ties: the fewer changes, then the earlier ones in the table (fewer
     * loader workers, the cheaper setting). */
    int na = __builtin_popcountll(a->mask), nb = __builtin_popcountll(b->mask);
    if (na != nb)
        return na - nb;
    return (a->mask > b->mask) - (a->mask < b->mask);
}

/* Same figures: two plans the models cannot tell apart (e.g. loader
 * workers 2 and 4 once loading is off the path). */
static int same_figures(const plan *a, const plan *b)
{
    return a->fits == b->fits && a->mem_peak == b->mem_peak &&
           fabs(a->predicted_us - b->predicted_us) <= 1e-9 * fabs(a->predicted_us) &&
           fabs(a->energy_j - b->energy_j) <= 1e-9 * fabs(a->energy_j) && a->factor == b->factor;
}

/* Evaluates the children of parent pi; appends kept ones. -1: stop. */
static int expand(search *s, int pi, rv_error *err)
{
    for (size_t i = 0; i < s->nmoves; i++) {
        const plan *p = plan_at(s, pi);
        if (!may_add(s, p, i))
            continue;
        uint64_t mask = p->mask | (1ull << i);
        if (seen(s, mask))
            continue;
        if (s->nseen >= RV_ADVISE_MAX_EVALS) {
            s->stopped = 2;
            snprintf(s->stop_msg, sizeof(s->stop_msg), "evaluated the cap of %d plans",
                     RV_ADVISE_MAX_EVALS);
            return -1;
        }
        s->seen[s->nseen++] = mask;
        plan c;
        int rc = evaluate(s, mask, pi, &c, err);
        if (rc < 0)
            return rc;
        if (rc > 0)
            continue;
        c.depth = p->depth + 1;
        if (!c.fits)
            s->memory_constrained = 1;
        if (!worth_keeping(&c, plan_at(s, pi))) {
            s->pruned_dominated++;
            json_decref(c.doc);
            json_decref(c.warnings);
            continue;
        }
        s->plans[s->nplans++] = c;
    }
    return 0;
}

/* The beam of the plans kept at [from, to): the best `width` that fit and
 * the best `width` that do not (they may still be fixed by a saver, when
 * faster than every fitting one), one of each group of equal figures. */
static size_t pick_beam(const search *s, size_t from, size_t to, int *beam, size_t width)
{
    size_t n = 0, nfit = 0, nunfit = 0;
    double best_fit = INFINITY;
    int used[RV_ADVISE_MAX_EVALS] = {0};
    for (size_t i = from; i < to; i++)
        if (s->plans[i].fits && s->plans[i].obj < best_fit)
            best_fit = s->plans[i].obj;
    for (;;) {
        int best = -1;
        for (size_t i = from; i < to; i++) {
            const plan *p = &s->plans[i];
            if (used[i] || (p->fits ? nfit >= width : nunfit >= width))
                continue;
            if (!p->fits && p->obj >= best_fit)
                continue;
            if (best < 0 || cmp_plan(p, &s->plans[best]) < 0)
                best = (int)i;
        }
        if (best < 0)
            return n;
        used[best] = 1;
        beam[n++] = best;
        /* Plans the models cannot tell apart would fill the beam with
         * one state: keep the first (the cheaper setting) only. */
        for (size_t i = from; i < to; i++)
            if (!used[i] && same_figures(&s->plans[i], &s->plans[best]))
                used[i] = 1;
        if (s->plans[best].fits)
            nfit++;
        else
            nunfit++;
    }
}

static int run_search(search *s, rv_error *err)
{
    size_t width = (size_t)(s->o.beam_width > 0 ? s->o.beam_width : RV_ADVISE_BEAM);
    int depth = s->o.max_depth > 0 ? s->o.max_depth : RV_ADVISE_DEPTH;
    int beam[2 * RV_ADVISE_MAX_EVALS];
    size_t nbeam = 0;
    size_t level_start = s->nplans;

    width = width > 16 ? 16 : width;
    int rc = expand(s, -1, err);
    for (int d = 2; rc == 0 && d <= depth; d++) {
        nbeam = pick_beam(s, level_start, s->nplans, beam, width);
        if (nbeam == 0)
            break;
        level_start = s->nplans;
        for (size_t b = 0; rc == 0 && b < nbeam; b++)
            rc = expand(s, beam[b], err);
    }
    return rc < 0 && s->stopped ? 0 : rc;
}

/* ---- the answer --------------------------------------------------------- */

static void append(char *buf, size_t cap, const char *text)
{
    size_t n = strlen(buf);
    if (n + 1 < cap)
        snprintf(buf + n, cap - n, "%s", text);
}

/* What bounds the baseline, as a phrase: "data loading (40% of the
 * critical path; GPU kernels 0%, CPU 60%)". */
static void bound_phrase(const crit *c, char *out, size_t cap)
{
    const char *names[] = {"data loading", "GPU kernels", "CPU work", "communication", "waits"};
    double v[] = {c->data, c->gpu, c->cpu, c->comm, c->wait};
    size_t top = 0;
    double len = c->len > 0 ? c->len : 1;
    for (size_t i = 1; i < 5; i++)
        if (v[i] > v[top])
            top = i;
    snprintf(out, cap,
             "%s (%.0f%% of its critical path; data loading %.0f%%, GPU %.0f%%, CPU %.0f%%, "
             "communication %.0f%%)",
             names[top], 100 * v[top] / len, 100 * c->data / len, 100 * c->gpu / len,
             100 * c->cpu / len, 100 * c->comm / len);
}

static json_t *why_of(const search *s, const plan *p)
{
    char bound[200], buf[900];
    bound_phrase(&s->base_plan.cp, bound, sizeof(bound));
    snprintf(buf, sizeof(buf), "The baseline step (%.1f ms) is bound by %s; ", s->base_us / 1e3,
             bound);
    int k = 0, n = __builtin_popcountll(p->mask);
    for (size_t i = 0; i < s->nmoves; i++) {
        if (!(p->mask & (1ull << i)))
            continue;
        k++;
        append(buf, sizeof(buf), k == 1 ? "" : k == n ? ", and " : ", ");
        append(buf, sizeof(buf), s->moves[i].label);
        append(buf, sizeof(buf), " ");
        append(buf, sizeof(buf), s->moves[i].relieves);
    }
    char tail[200];
    if (s->o.objective == RV_ADVISE_ENERGY && p->have_energy)
        snprintf(tail, sizeof(tail), ": %.2f -> %.2f J per sample-equivalent step.", s->base_energy,
                 p->obj);
    else if (s->o.objective == RV_ADVISE_COST)
        snprintf(tail, sizeof(tail),
                 ": $%.3g -> $%.3g per sample-equivalent step on %d GPU%s at $%.2f per GPU-hour.",
                 s->base_plan.obj, p->obj, p->gpus, p->gpus == 1 ? "" : "s", s->price);
    else
        snprintf(tail, sizeof(tail), ": %.1f -> %.1f ms per step%s.", s->base_us / 1e3,
                 p->predicted_us / 1e3, p->factor != 1 ? " (at the new batch)" : "");
    append(buf, sizeof(buf), tail);
    return json_string(buf);
}

static json_t *changes_of(const search *s, uint64_t mask)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < s->nmoves; i++)
        if (mask & (1ull << i))
            json_array_append_new(a, json_string(s->moves[i].label));
    return a;
}

static json_t *fits_reason(const search *s, const plan *p)
{
    char buf[200];
    if (p->mem_peak < 0)
        return json_string("the trace gives no memory peak: assumed to fit");
    if (s->mem_limit <= 0)
        return json_string("the GPU's memory is unknown: assumed to fit");
    if (p->fits)
        return json_null();
    snprintf(buf, sizeof(buf), "predicted peak %.2f GB exceeds %s (%.2f GB)",
             (double)p->mem_peak / 1e9, s->mem_limit_src, (double)s->mem_limit / 1e9);
    return json_string(buf);
}

static json_t *candidate_json(const search *s, const plan *p)
{
    double base_obj = s->base_plan.obj;
    json_t *c = json_object();
    if (!c)
        return NULL;
    json_object_set(c, "whatif", p->doc);
    json_object_set_new(c, "changes", changes_of(s, p->mask));
    json_object_set_new(c, "predicted_us", json_real(p->predicted_us));
    /* Per sample: a larger batch does more work per step. */
    json_object_set_new(
        c, "speedup",
        json_real(p->predicted_us > 0 ? s->base_us * p->factor / p->predicted_us : 0));
    json_object_set_new(c, "samples_factor", json_real(p->factor));
    json_object_set_new(c, "objective_value", json_real(p->obj));
    json_object_set_new(c, "objective_gain", json_real(p->obj > 0 ? base_obj / p->obj : 0));
    json_object_set_new(c, "energy_j", p->have_energy ? json_real(p->energy_j) : json_null());
    json_object_set_new(c, "gpus", json_integer(p->gpus));
    json_object_set_new(c, "cost_usd", json_real(p->cost_usd));
    json_object_set_new(c, "memory_peak_bytes",
                        p->mem_peak >= 0 ? json_integer((json_int_t)p->mem_peak) : json_null());
    json_object_set_new(c, "fits", json_boolean(p->fits));
    json_object_set_new(c, "fits_reason", fits_reason(s, p));
    json_t *warn = json_deep_copy(p->warnings);
    for (size_t i = 0; warn && i < s->nmoves; i++) {
        int g = s->moves[i].group;
        if ((p->mask & (1ull << i)) && (g == G_BATCH || g == G_ACCUM))
            json_array_append_new(
                warn, json_pack("{s:s,s:s}", "code", "training_changed", "message",
                                "the plan changes the samples per optimizer step (batch size or "
                                "gradient accumulation): the learning rate and convergence may "
                                "need retuning, which no model here judges"));
    }
    json_object_set_new(c, "warnings", warn ? warn : json_array());
    json_object_set_new(c, "why", why_of(s, p));
    json_object_set_new(c, "depth", json_integer(p->depth));
    return c;
}

static int cmp_plan_q(const void *a, const void *b)
{
    return cmp_plan(a, b);
}

static json_t *baseline_json(const search *s)
{
    const plan *p = &s->base_plan;
    char bound[200];
    bound_phrase(&p->cp, bound, sizeof(bound));
    json_t *b = json_pack(
        "{s:f,s:o,s:o,s:s,s:{s:f,s:f,s:f,s:f,s:f,s:f}}", "predicted_us", p->predicted_us,
        "energy_j", p->have_energy ? json_real(p->energy_j) : json_null(), "memory_peak_bytes",
        p->mem_peak >= 0 ? json_integer((json_int_t)p->mem_peak) : json_null(), "bound", bound,
        "critical_path_us", "length", p->cp.len, "data", p->cp.data, "gpu", p->cp.gpu, "cpu",
        p->cp.cpu, "comm", p->cp.comm, "wait", p->cp.wait);
    if (b) {
        json_object_set(b, "warnings", p->warnings);
        json_object_set_new(b, "gpus", json_integer(p->gpus));
        json_object_set_new(b, "cost_usd", json_real(p->cost_usd));
    }
    return b;
}

static const char *objective_name(int o)
{
    return o == RV_ADVISE_ENERGY ? "energy" : o == RV_ADVISE_COST ? "cost" : "time";
}

static json_t *render(search *s, double seconds)
{
    size_t cap = (size_t)(s->o.max_candidates > 0 ? s->o.max_candidates : RV_ADVISE_CANDIDATES);
    json_t *cands = json_array();
    qsort(s->plans, s->nplans, sizeof(plan), cmp_plan_q);
    size_t nfit = 0, nunfit = 0, nlisted = 0;
    const plan **listed = calloc(cap + MAX_UNFIT_LISTED, sizeof(const plan *));
    for (size_t i = 0; cands && listed && i < s->nplans; i++) {
        const plan *p = &s->plans[i];
        size_t k = 0;
        while (k < nlisted && !same_figures(listed[k], p))
            k++;
        if (k < nlisted) {
            /* Listed once, with the equivalent plans named under it. */
            json_t *c = json_array_get(cands, k), *eq = json_object_get(c, "equivalent");
            if (json_array_size(eq) < 3)
                json_array_append_new(eq, changes_of(s, p->mask));
            continue;
        }
        if (p->fits ? nfit++ >= cap : nunfit++ >= MAX_UNFIT_LISTED)
            continue;
        json_t *c = candidate_json(s, p);
        if (c)
            json_object_set_new(c, "equivalent", json_array());
        json_array_append_new(cands, c);
        listed[nlisted++] = p;
    }
    free(listed);
    json_t *space = json_array();
    for (size_t i = 0; space && i < s->nmoves; i++)
        json_array_append_new(space, json_string(s->moves[i].label));
    size_t pruned = s->pruned_bound + s->pruned_no_effect + s->pruned_dominated + s->failed;
    json_t *o = json_pack(
        "{s:s,s:o,s:o,s:I,s:I,s:{s:I,s:I,s:I,s:I},s:f,s:b,s:o,s:o,s:O,s:o,s:o}", "objective",
        objective_name(s->o.objective), "baseline", baseline_json(s), "candidates", cands,
        "searched", (json_int_t)s->searched, "pruned", (json_int_t)pruned, "pruned_by", "bound",
        (json_int_t)s->pruned_bound, "no_effect", (json_int_t)s->pruned_no_effect, "dominated",
        (json_int_t)s->pruned_dominated, "failed", (json_int_t)s->failed, "seconds", seconds,
        "complete", !s->stopped, "stopped", s->stopped ? json_string(s->stop_msg) : json_null(),
        "space", space, "excluded", s->excluded, "memory_limit_bytes",
        s->mem_limit > 0 ? json_integer((json_int_t)s->mem_limit) : json_null(),
        "memory_limit_source", json_string(s->mem_limit_src));
    if (o)
        json_object_set_new(
            o, "price",
            json_pack("{s:f,s:s}", "usd_per_gpu_hour", s->price, "source", s->price_src));
    return o;
}

/* ---- entry -------------------------------------------------------------- */

static void memory_limit(search *s)
{
    const rv_trace *tr = s->g->trace;
    if (s->o.max_memory > 0) {
        s->mem_limit = s->o.max_memory;
        snprintf(s->mem_limit_src, sizeof(s->mem_limit_src), "the memory limit asked for");
        return;
    }
    for (size_t i = 0; tr && i < tr->ndevices; i++)
        if (tr->devices[i].total_mem > 0) {
            s->mem_limit = tr->devices[i].total_mem;
            snprintf(s->mem_limit_src, sizeof(s->mem_limit_src), "the GPU's memory");
            return;
        }
    snprintf(s->mem_limit_src, sizeof(s->mem_limit_src), "unknown");
}

/* A job's baseline: the job as traced (its step, energy and warnings);
 * the first rank's run gave the memory peak and the bound phrase. */
static int job_baseline(search *s, rv_error *err)
{
    plan *b = &s->base_plan;
    int w = rv_job_world_size(s->job);
    int no_effect = 0;
    s->base_world = w > 1 ? w : (int)rv_job_nranks(s->job);
    s->base_gpus = s->base_world;
    json_decref(b->warnings);
    b->warnings = NULL;
    int rc = run_job_plan(s, NULL, b, &no_effect, err);
    if (rc == 0)
        s->base_us = b->predicted_us;
    return rc;
}

static int run_baseline(search *s, rv_error *err)
{
    rv_run_result *r = NULL;
    rv_run_opts ro = {.iteration = RV_ITER_MEDIAN,
                      .top_kernels = 1,
                      .deadline_ms = s->stop.deadline_ms,
                      .cancel = s->stop.cancel,
                      .cancel_fn = s->stop.cancel_fn,
                      .cancel_arg = s->stop.cancel_arg};
    int rc = rv_run(s->g, s->base, NULL, &ro, &r, err);
    if (rc != 0)
        return rc;
    plan *b = &s->base_plan;
    b->parent = -1;
    b->factor = 1;
    const rv_trace *tr = s->g->trace;
    s->base_world = tr && tr->world_size > 1 ? tr->world_size : 1;
    s->base_gpus = r->base_energy.job_gpus > 0 ? r->base_energy.job_gpus : s->base_world;
    s->base_ranks = r->base_energy.ranks;
    fill_plan(s, b, r);
    b->warnings = rv_run_warnings_json(r);
    if (s->job && (rc = job_baseline(s, err)) != 0)
        goto out;
    s->base_us = b->predicted_us;
    s->base_energy = b->energy_j;
    facts f;
    read_facts(s, r, &f);
    const rv_hw *hw = tr ? rv_hw_lookup(rv_trace_str(tr, tr->platform_gpu)) : NULL;
    space_host(s, &f, hw);
    space_gpu(s, &f, hw);
    space_batch(s, &f);
    /* The trace ran on its GPU: a baseline estimated above the GPU's
     * memory says the estimate is high, not that nothing fits. A limit
     * the caller asked for binds the baseline too. */
    if (!b->fits && s->o.max_memory <= 0)
        b->fits = 1;
    s->memory_constrained = !b->fits;
out:
    rv_run_result_free(r);
    return rc;
}

static void search_free(search *s)
{
    for (size_t i = 0; i < s->nmoves; i++) {
        json_decref(s->moves[i].opt);
        json_decref(s->moves[i].val);
    }
    for (size_t i = 0; s->plans && i < s->nplans; i++) {
        json_decref(s->plans[i].doc);
        json_decref(s->plans[i].warnings);
    }
    free(s->plans);
    json_decref(s->base_plan.doc);
    json_decref(s->base_plan.warnings);
    json_decref(s->excluded);
    free(s);
}

static int advise(const rv_graph *g, const rv_sim *base, const rv_job *job,
                  const rv_advise_opts *opts, json_t **out, rv_error *err)
{
    int64_t t0 = rv_stop_now_ms();
    search *s = calloc(1, sizeof(*s));
    int rc;

    *out = NULL;
    if (!s)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    s->g = g;
    s->base = base;
    s->job = job;
    s->o = opts ? *opts : (rv_advise_opts){0};
    double budget = s->o.budget_s > 0 ? s->o.budget_s : RV_ADVISE_BUDGET_S;
    int64_t deadline = t0 + (int64_t)llround(budget * 1000);
    s->stop = (rv_stop){.deadline_ms = s->o.deadline_ms > 0 && s->o.deadline_ms < deadline
                                           ? s->o.deadline_ms
                                           : deadline,
                        .budget_ms = (unsigned)llround(budget * 1000),
                        .cancel = s->o.cancel,
                        .cancel_fn = s->o.cancel_fn,
                        .cancel_arg = s->o.cancel_arg};
    s->plans = calloc(RV_ADVISE_MAX_EVALS, sizeof(plan));
    s->excluded = json_array();
    if (!s->plans || !s->excluded) {
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    memory_limit(s);
    /* The hardware table has no prices: the caller's, else the default. */
    s->price = s->o.price_per_gpu_hour > 0 ? s->o.price_per_gpu_hour : RV_ADVISE_PRICE_DEFAULT;
    s->price_src = s->o.price_per_gpu_hour > 0 ? "asked" : "default";
    if ((rc = run_baseline(s, err)) != 0)
        goto out;
    if ((rc = run_search(s, err)) != 0)
        goto out;
    *out = render(s, (double)(rv_stop_now_ms() - t0) / 1e3);
    if (!*out)
        rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory writing the answer");
out:
    search_free(s);
    return rc;
}

int rv_advise(const rv_graph *g, const rv_sim *base, const rv_advise_opts *opts, json_t **out,
              rv_error *err)
{
    return advise(g, base, NULL, opts, out, err);
}

int rv_advise_job(const rv_job *job, const rv_graph *g, const rv_sim *base,
                  const rv_advise_opts *opts, json_t **out, rv_error *err)
{
    return advise(g, base, job, opts, out, err);
}
