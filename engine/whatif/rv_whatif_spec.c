/* The what-if request spec (rv_whatif_spec.h): the tables, the reader
 * the parser uses, and the catalogue GET /v1/whatif/kinds renders from the
 * same tables, so the parser, the catalogue and docs/whatif.md (checked by
 * tests/engine/test_whatif_kinds.c) cannot drift apart. */
#include "whatif/rv_whatif_spec.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "hw/rv_hw.h"
#include "whatif/rv_whatif_types.h"
#include "simulate/rv_sim.h"

#define O(m) offsetof(rv_opt, m)
#define D(m) offsetof(rv_dist, m)
#define W(m) offsetof(struct rv_whatif, m)
#define NONE RV_SPEC_NONE
/* The most names an object's "unknown field" hint weighs. */
#define RV_SPEC_NAMES_MAX 32

/* Field constructors: name, destination, range or values, default, doc. */
#define NUM(n, o, lo, hi, excl, d, req, text)                                                      \
    {                                                                                              \
        .name = (n), .type = RV_F_NUM, .min = (lo), .max = (hi), .min_exclusive = (excl),          \
        .dflt = (d), .required = (req), .doc = (text), .off = (o), .flag_off = NONE                \
    }
#define INT(n, o, lo, hi, d, req, text)                                                            \
    {                                                                                              \
        .name = (n), .type = RV_F_INT, .min = (lo), .max = (hi), .dflt = (d), .required = (req),   \
        .doc = (text), .off = (o), .flag_off = NONE                                                \
    }
#define BOOL(n, o, d, text)                                                                        \
    {                                                                                              \
        .name = (n), .type = RV_F_BOOL, .dflt = (d), .doc = (text), .off = (o), .flag_off = NONE   \
    }
#define ENUM(n, o, vals, cds, d, text)                                                             \
    {                                                                                              \
        .name = (n), .type = RV_F_ENUM, .dflt = (d), .values = (vals), .codes = (cds),             \
        .doc = (text), .off = (o), .flag_off = NONE                                                \
    }
#define SELECT(n, req, d, text)                                                                    \
    {                                                                                              \
        .name = (n), .type = RV_F_SELECT, .dflt = (d), .required = (req), .doc = (text),           \
        .off = O(sel), .flag_off = O(has_sel)                                                      \
    }
/* Checked by the caller, documented here. */
#define OTHER(n, t, text)                                                                          \
    {                                                                                              \
        .name = (n), .type = (t), .doc = (text), .off = NONE, .flag_off = NONE                     \
    }

static const int dtype_codes[] = {RV_DT_FP16, RV_DT_BF16, RV_DT_FP8};
static const int task_codes[] = {RV_SEL_KERNEL, RV_SEL_CPU, RV_SEL_MEMCPY};
static const int algo_codes[] = {RV_ALGO_RING, RV_ALGO_TREE, RV_ALGO_HIERARCHICAL, RV_ALGO_PS};
static const int sched_codes[] = {RV_SCHED_EARLIEST_START, RV_SCHED_FIFO, RV_SCHED_PRIORITY};

#define SEL_DOC(what)                                                                              \
    "tasks to " what ": {kind: kernel|cpu|memcpy|comm, name: regex, layer, phase, stream}"

/* Stages, in order (docs/whatif.md "Order of application"). */
const rv_kind_spec rv_spec_kinds[] = {
    {"amp",
     "Mixed precision (AMP)",
     RV_OPT_AMP,
     RV_STAGE_PRECISION,
     1,
     "Mixed precision: roofline with the GPU's peaks per dtype (or Daydream's /3 and /2 rule), "
     "cast kernels added.",
     "{\"kind\":\"amp\"}",
     {ENUM("dtype", O(dtype), "fp16,bf16,fp8", dtype_codes, "\"fp16\"", "precision to switch to"),
      ENUM("model", O(amp_daydream), "roofline,daydream", NULL, "\"roofline\"", "which model"),
      NUM("cast_us", O(cast_us), 0, 1e6, 0, "3", 0, "duration of one inserted cast kernel")}},
    {"fused_optimizer",
     "Fused optimizer",
     RV_OPT_FUSED_OPTIMIZER,
     RV_STAGE_FUSION,
     2,
     "Fused optimizer: optimizer-phase kernels and launches replaced by one fused kernel per "
     "pass with their memory traffic.",
     "{\"kind\":\"fused_optimizer\"}",
     {NUM("traffic_ratio", O(traffic_ratio), 0, 1, 1, "0.5", 0,
          "fused traffic as a share of the unfused kernels' traffic")}},
    {"kernel_fusion",
     "Kernel fusion",
     RV_OPT_KERNEL_FUSION,
     RV_STAGE_FUSION,
     2,
     "Fuse the selected memory-bound kernels: their launches go, the bytes that must move stay.",
     "{\"kind\":\"kernel_fusion\",\"select\":{\"kind\":\"kernel\",\"name\":\"elementwise\"}}",
     {SELECT("select", 1, NULL, SEL_DOC("fuse"))}},
    {"restructure_batchnorm",
     "Restructured batchnorm",
     RV_OPT_RESTRUCTURE_BN,
     RV_STAGE_FUSION,
     2,
     "Daydream's restructured batchnorm: batchnorm and the elementwise kernels around it fused.",
     "{\"kind\":\"restructure_batchnorm\"}",
     {{NULL}}},
    {"vdnn",
     "vDNN offload",
     RV_OPT_VDNN,
     RV_STAGE_MEMORY,
     3,
     "vDNN: offload activations to host memory in forward, prefetch them in backward, at PCIe "
     "bandwidth.",
     "{\"kind\":\"vdnn\"}",
     {SELECT("select", 0, NULL, SEL_DOC("offload after") " (default: forward kernels)"),
      NUM("pcie_gbps", O(pcie_gbps), 0, 1e5, 1, NULL, 0, "PCIe bandwidth (default: the GPU's)")}},
    {"gist",
     "Gist encoding",
     RV_OPT_GIST,
     RV_STAGE_MEMORY,
     3,
     "Gist: encode activations after forward and decode them before backward.",
     "{\"kind\":\"gist\"}",
     {SELECT("select", 0, NULL, SEL_DOC("encode after") " (default: forward kernels)"),
      NUM("ratio", O(ratio), 0, 100, 0, "1", 0, "encode/decode cost as a share of the kernel")}},
    {"recompute",
     "Recomputation",
     RV_OPT_RECOMPUTE,
     RV_STAGE_MEMORY,
     3,
     "Activation recomputation: forward kernels run again in backward.",
     "{\"kind\":\"recompute\"}",
     {SELECT("select", 0, NULL, SEL_DOC("recompute") " (default: forward kernels)"),
      NUM("share", O(share), 0, 1, 0, "1", 0, "share of forward work recomputed")}},
    {"scale",
     "Scale selected tasks",
     RV_OPT_SCALE,
     RV_STAGE_GENERIC,
     4,
     "Scale the duration of the selected tasks.",
     "{\"kind\":\"scale\",\"factor\":0.5}",
     {SELECT("select", 0, "{}", SEL_DOC("scale") " (default: every task)"),
      NUM("factor", O(factor), 0, 1e4, 0, NULL, 1, "duration multiplier")}},
    {"remove",
     "Remove selected tasks",
     RV_OPT_REMOVE,
     RV_STAGE_GENERIC,
     4,
     "Remove the selected tasks (and, for GPU tasks, their launch calls).",
     "{\"kind\":\"remove\",\"select\":{\"kind\":\"memcpy\"}}",
     {SELECT("select", 1, NULL, SEL_DOC("remove")),
      BOOL("launches", O(remove_launches), "true", "also remove their launch calls")}},
    {"insert",
     "Insert work",
     RV_OPT_INSERT,
     RV_STAGE_GENERIC,
     4,
     "Insert a task after each selected task.",
     "{\"kind\":\"insert\",\"after\":{\"kind\":\"kernel\"},\"duration_us\":10}",
     {SELECT("after", 1, NULL, "tasks to insert after"),
      NUM("duration_us", O(dur_us), 0, 1e9, 1, NULL, 1, "duration of each inserted task"),
      ENUM("task", O(insert_kind), "kernel,cpu,memcpy", task_codes, "\"kernel\"", "kind of task")}},
    {"cpu_speed",
     "CPU speed",
     RV_OPT_CPU_SPEED,
     RV_STAGE_GENERIC,
     4,
     "A faster (> 1) or slower (< 1) CPU: CPU calls and gaps divide by the factor.",
     "{\"kind\":\"cpu_speed\",\"factor\":1.5}",
     /* At least 1/100: a slower CPU than that is no what-if, and
      * dividing by less made durations overflow (found by fuzzing). */
     {NUM("factor", O(factor), 0.01, 100, 0, NULL, 1, "single-thread speed ratio")}},
    {"gradient_accumulation",
     "Gradient accumulation",
     RV_OPT_GRAD_ACCUM,
     RV_STAGE_ACCUMULATION,
     6,
     "Accumulate gradients over several micro-batches before one optimizer step.",
     "{\"kind\":\"gradient_accumulation\",\"steps\":4}",
     {INT("steps", O(steps), 1, 1 << 20, NULL, 1, "micro-batches per optimizer step")}},
    {"dataloader",
     "Data loader",
     RV_OPT_DATALOADER,
     RV_STAGE_DATALOADER,
     8,
     "A faster data loader or more DataLoader worker processes.",
     "{\"kind\":\"dataloader\",\"workers\":4}",
     {INT("workers", O(workers), 0, 1024, NULL, 0,
          "DataLoader num_workers (workers or speedup is required)"),
      NUM("speedup", O(speedup), 0, 1e4, 1, NULL, 0, "loading speedup"),
      /* No CPU contention by default: its size depends on the host's cores,
       * which a trace does not record (docs/models/dataloader.md). */
      NUM("contention", O(contention), 0, 10, 0, "0", 0,
          "main-process CPU slowdown per busy loader core (host-specific)"),
      NUM("ipc_us", O(ipc_us), 0, 1e7, 0, "1000", 0, "hand-over cost per batch")}},
    /* Last so that the catalogue's earlier kinds keep their order; it
     * applies in the precision stage, before amp. */
    {"batch_size",
     "Batch size",
     RV_OPT_BATCH_SIZE,
     RV_STAGE_PRECISION,
     1,
     "Another batch size: kernels with op shapes take the kernel models' time at the scaled "
     "FLOPs and bytes, others scale linearly; optimizer and collective kernels and CPU work "
     "stay; data loading scales.",
     "{\"kind\":\"batch_size\",\"factor\":2}",
     {NUM("factor", O(factor), 0, 1024, 1, NULL, 0,
          "new batch over the trace's (factor or to is required)"),
      INT("to", O(batch_to), 1, 1 << 24, NULL, 0,
          "the new batch size (the trace's must be known)")}},
};
const size_t rv_spec_nkinds = sizeof(rv_spec_kinds) / sizeof(rv_spec_kinds[0]);

/* The task selector used by "select" and "after" (engine/rv_select.c):
 * documented here, parsed there. */
const rv_field_spec rv_spec_select[] = {
    ENUM("kind", NONE, "kernel,cpu,memcpy,comm,data", NULL, NULL, "kind of task"),
    OTHER("name", RV_F_STRING, "POSIX extended regex on the task name"),
    OTHER("layer", RV_F_STRING, "POSIX extended regex on the layer (op)"),
    ENUM("phase", NONE, "forward,backward,optimizer,dataloader,unknown", NULL, NULL,
         "training phase"),
    INT("stream", NONE, 0, INT32_MAX, NULL, 0, "GPU stream id"),
    INT("layer_instance", NONE, 0, INT32_MAX, NULL, 0,
        "layer index (decoder layer 17: 17), from the trace's module annotations"),
};
const size_t rv_spec_nselect = sizeof(rv_spec_select) / sizeof(rv_spec_select[0]);

const rv_field_spec rv_spec_dist[] = {
    INT("workers", D(workers), 1, 1 << 20, NULL, 1, "data-parallel workers (GPUs)"),
    INT("gpus_per_node", D(gpus_per_node), 1, 1024, NULL, 0,
        "GPUs per node (default min(workers, 8))"),
    NUM("intra_node_gbps", D(intra_gbps), 0, 1e6, 1, NULL, 0,
        "intra-node link, Gb/s (default: the GPU's NVLink, else PCIe)"),
    NUM("inter_node_gbps", D(inter_gbps), 0, 1e6, 1, "100", 0, "network per node, Gb/s"),
    NUM("latency_us", D(latency_us), 0, 1e6, 0, "5", 0, "per-message latency"),
    ENUM("algorithm", D(algorithm), "ring,tree,hierarchical,parameter_server", algo_codes,
         "\"ring\"", "collective algorithm"),
    NUM("bucket_mb", D(bucket_mb), 0, 65536, 1, "25", 0, "DDP bucket cap"),
    NUM("first_bucket_mb", D(first_bucket_mb), 0, 65536, 0, "1", 0, "DDP first bucket cap"),
    BOOL("p3", D(p3), "false", "P3 slicing and priority (parameter server)"),
    NUM("p3_slice_kb", D(p3_slice_kb), 0, 1 << 20, 1, "200", 0, "P3 slice size"),
    BOOL("blueconnect", D(blueconnect), "false", "BlueConnect hierarchical all-reduce"),
    NUM("dgc_density", D(dgc_density), 0, 1, 1, NULL, 0, "DGC gradient density (e.g. 0.001)"),
    NUM("tensor_fusion_mb", D(tensor_fusion_mb), 0, 65536, 1, NULL, 0,
        "fuse tensors up to this size"),
    NUM("tensor_partition_mb", D(tensor_partition_mb), 0, 65536, 1, NULL, 0,
        "partition tensors to this size"),
    NUM("efficiency", D(efficiency), 0, 1, 1, "0.8", 0, "achieved share of link bandwidth"),
    NUM("interference", D(interference), 0, 4, 0, "0.15", 0,
        "slowdown of compute overlapped by communication"),
    NUM("gradient_mb", D(gradient_mb), 0, 1e7, 1, NULL, 0,
        "gradient size (default: from the trace)"),
    INT("ps_servers", D(ps_servers), 0, 1 << 20, "0", 0, "parameter servers (0 = workers)"),
    OTHER(
        "allreduce_table", RV_F_TABLE,
        "measured all-reduce times at this worker count: [[bytes, us], ...] with sizes increasing "
        "(replaces the alpha-beta model; log-log interpolation)"),
};
const size_t rv_spec_ndist = sizeof(rv_spec_dist) / sizeof(rv_spec_dist[0]);

const rv_field_spec rv_spec_top[] = {
    NUM("power_limit_w", W(power_limit_w), 0, 5000, 1, NULL, 0, "GPU power limit to model"),
    NUM("power_limit_frac", W(power_limit_frac), 0, 1.5, 1, NULL, 0,
        "GPU power limit as a share of the GPU's default limit (not with power_limit_w)"),
    ENUM("schedule", W(schedule), "earliest_start,fifo,priority", sched_codes, "\"earliest_start\"",
         "simulator schedule policy"),
    OTHER("gpu", RV_F_STRING,
          "hardware override, a name from GET /v1/hardware (default: the trace's GPU)"),
    INT("samples_per_step", W(batch_size), 1, 1 << 24, NULL, 0,
        "samples one step of this trace processes (one rank), for throughput and samples per "
        "joule; relabels "
        "the step, changes no time (batch_size is its old name; the batch_size optimization "
        "changes the batch)"),
    ENUM("host_overheads", W(platform_overheads), "trace,platform", NULL, "\"trace\"",
         "host overheads from the trace itself, or the platform's shared statistics"),
    ENUM("kernel_models", W(platform_kmodels), "trace,platform", NULL, "\"trace\"",
         "kernel efficiencies fitted on the trace alone, or completed by the platform's "
         "(fitted on its stored traces) where the trace has none of a size"),
};
const size_t rv_spec_ntop = sizeof(rv_spec_top) / sizeof(rv_spec_top[0]);

#define J(m) offsetof(rv_job_whatif, m)
const rv_field_spec rv_spec_job[] = {
    BOOL("remove_straggler", J(remove_straggler), "false",
         "make the straggler as fast as the median rank (its kernels and CPU work)"),
    INT("straggler_rank", J(straggler_rank), -1, 1 << 20, "-1", 0,
        "the rank remove_straggler speeds up (-1: the predicted run's first straggler)"),
    NUM("bandwidth_gbps", J(bandwidth_gbps), 0, 1e6, 0, "0", 0,
        "network link per GPU, Gb/s per direction, for every collective at its own size (0: "
        "as traced)"),
    NUM("network_latency_us", J(latency_us), -1, 1e6, 0, "-1", 0,
        "per-step collective latency alpha (-1: as traced)"),
    INT("world_size", J(world_size), 0, 1 << 20, "0", 0,
        "data-parallel ranks to simulate (0: as traced); fewer drop the last ranks, more repeat "
        "the traced ones"),
};
const size_t rv_spec_njob = sizeof(rv_spec_job) / sizeof(rv_spec_job[0]);

#define P(m) offsetof(rv_par, m)
const rv_field_spec rv_spec_parallel[] = {
    INT("data", P(data), 1, 1 << 20, NULL, 0, "data-parallel ranks (default: as traced)"),
    INT("zero", P(zero), 0, 3, NULL, 0,
        "ZeRO / FSDP stage: 0 DDP, 1 optimizer state, 2 + gradients, 3 + parameters sharded"),
    INT("tensor", P(tensor), 1, 1024, NULL, 0, "tensor-parallel degree (default: as traced, 1)"),
    INT("pipeline", P(pipeline), 1, 1024, NULL, 0, "pipeline stages (default: as traced, 1)"),
    INT("microbatches", P(microbatches), 1, 1 << 16, NULL, 0,
        "micro-batches per step of a pipeline (default 1)"),
    INT("expert", P(expert), 1, 1 << 16, NULL, 0, "expert-parallel degree (default: as traced)"),
};
const size_t rv_spec_nparallel = sizeof(rv_spec_parallel) / sizeof(rv_spec_parallel[0]);

const rv_kind_spec *rv_spec_kind(const char *kind)
{
    for (size_t i = 0; kind && i < rv_spec_nkinds; i++)
        if (strcmp(kind, rv_spec_kinds[i].kind) == 0)
            return &rv_spec_kinds[i];
    return NULL;
}

/* ---- the reader ---------------------------------------------------------- */

int rv_spec_given(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return v && !json_is_null(v);
}

static int in_list(const char *key, const char *const *list)
{
    for (; list && *list; list++)
        if (strcmp(key, *list) == 0)
            return 1;
    return 0;
}

/* Levenshtein distance of a and b, each cut at 63 bytes. */
static size_t distance(const char *a, const char *b)
{
    size_t la = strnlen(a, 63), lb = strnlen(b, 63), row[64];
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];
        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best)
                best = up + 1;
            if (row[j - 1] + 1 < best)
                best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

void rv_spec_suggest(const char *got, const char *const *names, size_t n, char *out, size_t cap)
{
    const char *best = NULL;
    size_t best_d = (size_t)-1, used = 0;
    size_t close = strlen(got) / 3 > 2 ? strlen(got) / 3 : 2;
    if (cap == 0)
        return;
    out[0] = '\0';
    for (size_t i = 0; i < n && names[i]; i++) {
        size_t d = distance(got, names[i]);
        if (d < best_d) {
            best_d = d;
            best = names[i];
        }
    }
    if (best && best_d <= close)
        used = (size_t)snprintf(out, cap, "; did you mean '%s'?", best);
    if (used < cap)
        used += (size_t)snprintf(out + used, cap - used, " valid:");
    for (size_t i = 0; i < n && names[i] && used < cap; i++) {
        /* Room for this name and a closing "..." that may follow it. */
        if (used + strlen(names[i]) + 2 + 5 >= cap) {
            snprintf(out + used, cap - used, " ...");
            return;
        }
        used += (size_t)snprintf(out + used, cap - used, "%s %s", i ? "," : "", names[i]);
    }
}

/* The i-th comma-separated value of list equals s. */
static int enum_index(const char *list, const char *s)
{
    int i = 0;
    size_t n = strlen(s);
    while (*list) {
        const char *c = strchr(list, ',');
        size_t len = c ? (size_t)(c - list) : strlen(list);
        if (len == n && strncmp(list, s, n) == 0)
            return i;
        list += len + (c ? 1 : 0);
        i++;
    }
    return -1;
}

/* Reads v (borrowed, not null) as field f into dst. */
static int read_one(const rv_field_spec *f, const json_t *v, const char *path, char *dst,
                    rv_error *err)
{
    switch (f->type) {
    case RV_F_NUM:
    case RV_F_INT: {
        int is_int = f->type == RV_F_INT;
        if (is_int ? !json_is_integer(v) : !json_is_number(v))
            return rv_error_field(err, RV_ERR_INVALID, path, "%s must be %s in [%g, %g]", path,
                                  is_int ? "an integer" : "a number", f->min, f->max);
        double d = json_number_value(v);
        if (!isfinite(d) || d < f->min || d > f->max || (f->min_exclusive && d <= f->min))
            return rv_error_field(err, RV_ERR_INVALID, path, "%s = %g is out of range %s%g, %g]",
                                  path, d, f->min_exclusive ? "(" : "[", f->min, f->max);
        if (f->off == RV_SPEC_NONE)
            return 0;
        if (is_int)
            *(int *)(dst + f->off) = (int)json_integer_value(v);
        else
            *(double *)(dst + f->off) = d;
        return 0;
    }
    case RV_F_BOOL:
        if (!json_is_boolean(v))
            return rv_error_field(err, RV_ERR_INVALID, path, "%s must be true or false", path);
        if (f->off != RV_SPEC_NONE)
            *(int *)(dst + f->off) = json_is_true(v);
        return 0;
    case RV_F_ENUM: {
        int i = json_is_string(v) ? enum_index(f->values, json_string_value(v)) : -1;
        if (i < 0)
            return rv_error_field(err, RV_ERR_INVALID, path, "%s must be one of %s", path,
                                  f->values);
        if (f->off != RV_SPEC_NONE)
            *(int *)(dst + f->off) = f->codes ? f->codes[i] : i;
        return 0;
    }
    case RV_F_SELECT: {
        rv_select *s = (rv_select *)(dst + f->off);
        rv_select_clear(s);
        int rc = rv_select_parse(v, path, s, err);
        if (rc == 0 && f->flag_off != RV_SPEC_NONE)
            *(int *)(dst + f->flag_off) = 1;
        return rc;
    }
    case RV_F_STRING:
    case RV_F_TABLE: return 0; /* the caller checks these */
    }
    return rv_error_field(err, RV_ERR_INTERNAL, path, "bad field type");
}

int rv_spec_read(const json_t *obj, const char *prefix, const rv_field_spec *spec, size_t n,
                 const char *const *extra, void *dst, rv_error *err)
{
    char path[96];
    const char *key;
    json_t *v;

    json_object_foreach((json_t *)obj, key, v)
    {
        size_t i = 0;
        while (i < n && spec[i].name && strcmp(spec[i].name, key) != 0)
            i++;
        if ((i < n && spec[i].name) || in_list(key, extra))
            continue;
        /* The names this object takes, for the hint. */
        const char *names[RV_SPEC_NAMES_MAX];
        size_t nn = 0;
        char hint[160];
        for (size_t j = 0; j < n && spec[j].name && nn < RV_SPEC_NAMES_MAX; j++)
            names[nn++] = spec[j].name;
        for (size_t j = 0; extra && extra[j] && nn < RV_SPEC_NAMES_MAX; j++)
            names[nn++] = extra[j];
        snprintf(path, sizeof(path), "%s%s", prefix, key);
        rv_spec_suggest(key, names, nn, hint, sizeof(hint));
        return rv_error_field(err, RV_ERR_INVALID, path, "unknown field %.80s%s", path, hint);
    }
    for (size_t i = 0; i < n && spec[i].name; i++) {
        const rv_field_spec *f = &spec[i];
        int rc;
        snprintf(path, sizeof(path), "%s%s", prefix, f->name);
        if (rv_spec_given(obj, f->name)) {
            rc = read_one(f, json_object_get(obj, f->name), path, dst, err);
        } else if (f->required) {
            rc = rv_error_field(err, RV_ERR_INVALID, path, "%s is required", path);
        } else if (f->dflt) {
            /* The documented default goes through the same reader as a given
             * value, so the two cannot mean different things. */
            json_t *d = json_loads(f->dflt, JSON_DECODE_ANY, NULL);
            rc = d ? read_one(f, d, path, dst, err)
                   : rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
            json_decref(d);
        } else {
            rc = 0;
        }
        if (rc != 0)
            return rc;
    }
    return 0;
}

/* ---- the catalogue ------------------------------------------------------- */

static const char *type_name(rv_ftype t)
{
    static const char *const n[] = {"number", "integer", "boolean", "enum",
                                    "select", "string",  "table"};
    return n[t];
}

static json_t *field_json(const rv_field_spec *f)
{
    json_t *o = json_pack("{s:s, s:s, s:b, s:s}", "name", f->name, "type", type_name(f->type),
                          "required", f->required, "description", f->doc);
    if (f->type == RV_F_NUM || f->type == RV_F_INT) {
        json_object_set_new(o, "min", json_real(f->min));
        json_object_set_new(o, "max", json_real(f->max));
        json_object_set_new(o, "min_exclusive", json_boolean(f->min_exclusive));
    }
    if (f->dflt)
        json_object_set_new(o, "default", json_loads(f->dflt, JSON_DECODE_ANY, NULL));
    if (f->values) {
        json_t *vals = json_array();
        const char *s = f->values;
        while (*s) {
            const char *c = strchr(s, ',');
            size_t len = c ? (size_t)(c - s) : strlen(s);
            json_array_append_new(vals, json_stringn(s, len));
            s += len + (c ? 1 : 0);
        }
        json_object_set_new(o, "values", vals);
    }
    return o;
}

static json_t *fields_json(const rv_field_spec *f, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n && f[i].name; i++)
        json_array_append_new(a, field_json(&f[i]));
    return a;
}

json_t *rv_whatif_kinds(void)
{
    json_t *arr = json_array();
    for (size_t i = 0; arr && i < rv_spec_nkinds; i++) {
        const rv_kind_spec *k = &rv_spec_kinds[i];
        json_array_append_new(arr, json_pack("{s:s, s:s, s:i, s:s, s:o, s:o}", "kind", k->kind,
                                             "label", k->label, "order", k->order, "description",
                                             k->doc, "example", json_loads(k->example, 0, NULL),
                                             "fields", fields_json(k->fields, RV_SPEC_MAX_FIELDS)));
    }
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:s}", "optimizations", arr, "distributed",
                     fields_json(rv_spec_dist, rv_spec_ndist), "parallel",
                     fields_json(rv_spec_parallel, rv_spec_nparallel), "job",
                     fields_json(rv_spec_job, rv_spec_njob), "top_level",
                     fields_json(rv_spec_top, rv_spec_ntop), "selector",
                     fields_json(rv_spec_select, rv_spec_nselect), "order",
                     "amp, fusions, memory savers, generic primitives, distributed, gradient "
                     "accumulation, power limit, data loader, schedule");
}
