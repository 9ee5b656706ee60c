/* The catalogue of what-if kinds and fields, for forms and API clients
 * (GET /v1/whatif/kinds). tests/engine/test_whatif_kinds.c checks every
 * range here against the parser, so the two cannot drift apart. */
#include "rv_whatif.h"

#include <math.h>
#include <stdint.h>
#include <string.h>

typedef enum ftype { F_NUM, F_INT, F_BOOL, F_ENUM, F_SELECT, F_STRING, F_TABLE } ftype;

typedef struct field_doc {
    const char *name;
    ftype type;
    double min, max;    /* numbers: inclusive bounds */
    int min_exclusive;  /* numbers: min itself is rejected */
    const char *dflt;   /* JSON text of the default, NULL = none / derived */
    const char *values; /* enums: comma-separated */
    int required;
    const char *doc;
} field_doc;

typedef struct kind_doc {
    const char *kind;
    const char *label; /* for forms */
    int order;         /* position in the application order */
    const char *doc;
    const char *example; /* a minimal valid optimization object */
    field_doc fields[8];
} kind_doc;

#define SEL(req, what)                                                                             \
    {                                                                                              \
        "select", F_SELECT, 0, 0, 0, NULL, NULL, req,                                              \
            "tasks to " what ": {kind: kernel|cpu|memcpy|comm, name: regex, layer, phase, stream}" \
    }

static const kind_doc kinds[] = {
    {"amp",
     "Mixed precision (AMP)",
     1,
     "Mixed precision: roofline with the GPU's peaks per dtype (or Daydream's /3 and /2 rule), "
     "cast kernels added.",
     "{\"kind\":\"amp\"}",
     {{"dtype", F_ENUM, 0, 0, 0, "\"fp16\"", "fp16,bf16,fp8", 0, "precision to switch to"},
      {"model", F_ENUM, 0, 0, 0, "\"roofline\"", "roofline,daydream", 0, "which model"},
      {"cast_us", F_NUM, 0, 1e6, 0, "3", NULL, 0, "duration of one inserted cast kernel"}}},
    {"fused_optimizer",
     "Fused optimizer",
     2,
     "Fused optimizer: optimizer-phase kernels and launches replaced by one fused kernel per "
     "pass with their memory traffic.",
     "{\"kind\":\"fused_optimizer\"}",
     {{"traffic_ratio", F_NUM, 0, 1, 1, "0.5", NULL, 0,
       "fused traffic as a share of the unfused kernels' traffic"}}},
    {"kernel_fusion",
     "Kernel fusion",
     2,
     "Fuse the selected memory-bound kernels: their launches go, the bytes that must move stay.",
     "{\"kind\":\"kernel_fusion\",\"select\":{\"kind\":\"kernel\",\"name\":\"elementwise\"}}",
     {SEL(1, "fuse")}},
    {"restructure_batchnorm",
     "Restructured batchnorm",
     2,
     "Daydream's restructured batchnorm: batchnorm and the elementwise kernels around it fused.",
     "{\"kind\":\"restructure_batchnorm\"}",
     {{NULL}}},
    {"vdnn",
     "vDNN offload",
     3,
     "vDNN: offload activations to host memory in forward, prefetch them in backward, at PCIe "
     "bandwidth.",
     "{\"kind\":\"vdnn\"}",
     {SEL(0, "offload after"),
      {"pcie_gbps", F_NUM, 0, 1e5, 1, NULL, NULL, 0, "PCIe bandwidth (default: the GPU's)"}}},
    {"gist",
     "Gist encoding",
     3,
     "Gist: encode activations after forward and decode them before backward.",
     "{\"kind\":\"gist\"}",
     {SEL(0, "encode after"),
      {"ratio", F_NUM, 0, 100, 0, "1", NULL, 0, "encode/decode cost as a share of the kernel"}}},
    {"recompute",
     "Recomputation",
     3,
     "Activation recomputation: forward kernels run again in backward.",
     "{\"kind\":\"recompute\"}",
     {SEL(0, "recompute"),
      {"share", F_NUM, 0, 1, 0, "1", NULL, 0, "share of forward work recomputed"}}},
    {"scale",
     "Scale selected tasks",
     4,
     "Scale the duration of the selected tasks.",
     "{\"kind\":\"scale\",\"factor\":0.5}",
     {SEL(0, "scale (default: every task)"),
      {"factor", F_NUM, 0, 1e4, 0, NULL, NULL, 1, "duration multiplier"}}},
    {"remove",
     "Remove selected tasks",
     4,
     "Remove the selected tasks (and, for GPU tasks, their launch calls).",
     "{\"kind\":\"remove\",\"select\":{\"kind\":\"memcpy\"}}",
     {SEL(1, "remove"),
      {"launches", F_BOOL, 0, 0, 0, "true", NULL, 0, "also remove their launch calls"}}},
    {"insert",
     "Insert work",
     4,
     "Insert a task after each selected task.",
     "{\"kind\":\"insert\",\"after\":{\"kind\":\"kernel\"},\"duration_us\":10}",
     {{"after", F_SELECT, 0, 0, 0, NULL, NULL, 1, "tasks to insert after"},
      {"duration_us", F_NUM, 0, 1e9, 1, NULL, NULL, 1, "duration of each inserted task"},
      {"task", F_ENUM, 0, 0, 0, "\"kernel\"", "kernel,cpu,memcpy", 0, "kind of task"}}},
    {"cpu_speed",
     "CPU speed",
     4,
     "A faster (> 1) or slower (< 1) CPU: CPU calls and gaps divide by the factor.",
     "{\"kind\":\"cpu_speed\",\"factor\":1.5}",
     {{"factor", F_NUM, 0, 100, 1, NULL, NULL, 1, "single-thread speed ratio"}}},
    {"gradient_accumulation",
     "Gradient accumulation",
     6,
     "Accumulate gradients over several micro-batches before one optimizer step.",
     "{\"kind\":\"gradient_accumulation\",\"steps\":4}",
     {{"steps", F_INT, 1, 1 << 20, 0, NULL, NULL, 1, "micro-batches per optimizer step"}}},
    {"dataloader",
     "Data loader",
     8,
     "A faster data loader or more DataLoader worker processes.",
     "{\"kind\":\"dataloader\",\"workers\":4}",
     {{"workers", F_INT, 0, 1024, 0, NULL, NULL, 0,
       "DataLoader num_workers (workers or speedup is required)"},
      {"speedup", F_NUM, 0, 1e4, 1, NULL, NULL, 0, "loading speedup"},
      {"contention", F_NUM, 0, 10, 0, "0", NULL, 0,
       "main-process CPU slowdown per busy loader core (host-specific)"},
      {"ipc_us", F_NUM, 0, 1e7, 0, "1000", NULL, 0, "hand-over cost per batch"}}},
};

/* The task selector used by "select" and "after" (engine/rv_select.c). */
static const field_doc select_docs[] = {
    {"kind", F_ENUM, 0, 0, 0, NULL, "kernel,cpu,memcpy,comm,data", 0, "kind of task"},
    {"name", F_STRING, 0, 0, 0, NULL, NULL, 0, "POSIX extended regex on the task name"},
    {"layer", F_STRING, 0, 0, 0, NULL, NULL, 0, "POSIX extended regex on the layer (op)"},
    {"phase", F_ENUM, 0, 0, 0, NULL, "forward,backward,optimizer,dataloader,unknown", 0,
     "training phase"},
    {"stream", F_INT, 0, INT32_MAX, 0, NULL, NULL, 0, "GPU stream id"},
};

static const field_doc dist_docs[] = {
    {"workers", F_INT, 1, 1 << 20, 0, NULL, NULL, 1, "data-parallel workers (GPUs)"},
    {"gpus_per_node", F_INT, 1, 1024, 0, NULL, NULL, 0, "GPUs per node (default min(workers, 8))"},
    {"intra_node_gbps", F_NUM, 0, 1e6, 1, NULL, NULL, 0,
     "intra-node link, Gb/s (default: the GPU's NVLink, else PCIe)"},
    {"inter_node_gbps", F_NUM, 0, 1e6, 1, "100", NULL, 0, "network per node, Gb/s"},
    {"latency_us", F_NUM, 0, 1e6, 0, "5", NULL, 0, "per-message latency"},
    {"algorithm", F_ENUM, 0, 0, 0, "\"ring\"", "ring,tree,hierarchical,parameter_server", 0,
     "collective algorithm"},
    {"bucket_mb", F_NUM, 0, 65536, 1, "25", NULL, 0, "DDP bucket cap"},
    {"first_bucket_mb", F_NUM, 0, 65536, 0, "1", NULL, 0, "DDP first bucket cap"},
    {"p3", F_BOOL, 0, 0, 0, "false", NULL, 0, "P3 slicing and priority (parameter server)"},
    {"p3_slice_kb", F_NUM, 0, 1 << 20, 1, "200", NULL, 0, "P3 slice size"},
    {"blueconnect", F_BOOL, 0, 0, 0, "false", NULL, 0, "BlueConnect hierarchical all-reduce"},
    {"dgc_density", F_NUM, 0, 1, 1, NULL, NULL, 0, "DGC gradient density (e.g. 0.001)"},
    {"tensor_fusion_mb", F_NUM, 0, 65536, 1, NULL, NULL, 0, "fuse tensors up to this size"},
    {"tensor_partition_mb", F_NUM, 0, 65536, 1, NULL, NULL, 0, "partition tensors to this size"},
    {"efficiency", F_NUM, 0, 1, 1, "0.8", NULL, 0, "achieved share of link bandwidth"},
    {"interference", F_NUM, 0, 4, 0, "0.15", NULL, 0,
     "slowdown of compute overlapped by communication"},
    {"gradient_mb", F_NUM, 0, 1e7, 1, NULL, NULL, 0, "gradient size (default: from the trace)"},
    {"ps_servers", F_INT, 0, 1 << 20, 0, "0", NULL, 0, "parameter servers (0 = workers)"},
    {"allreduce_table", F_TABLE, 0, 0, 0, NULL, NULL, 0,
     "measured all-reduce times at this worker count: [[bytes, us], ...] with sizes increasing "
     "(replaces the alpha-beta model; log-log interpolation)"},
};

static const field_doc top_docs[] = {
    {"power_limit_w", F_NUM, 0, 5000, 1, NULL, NULL, 0, "GPU power limit to model"},
    {"schedule", F_ENUM, 0, 0, 0, "\"earliest_start\"", "earliest_start,fifo,priority", 0,
     "simulator schedule policy"},
    {"gpu", F_STRING, 0, 0, 0, NULL, NULL, 0,
     "hardware override, a name from GET /v1/hardware (default: the trace's GPU)"},
    {"batch_size", F_INT, 1, 1 << 24, 0, NULL, NULL, 0, "samples per step, for samples per joule"},
    {"host_overheads", F_ENUM, 0, 0, 0, "\"trace\"", "trace,platform", 0,
     "host overheads from the trace itself, or the platform's shared statistics"},
};

static const char *type_name(ftype t)
{
    static const char *const n[] = {"number", "integer", "boolean", "enum",
                                    "select", "string",  "table"};
    return n[t];
}

static json_t *field_json(const field_doc *f)
{
    json_t *o = json_pack("{s:s, s:s, s:b, s:s}", "name", f->name, "type", type_name(f->type),
                          "required", f->required, "description", f->doc);
    if (f->type == F_NUM || f->type == F_INT) {
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

static json_t *fields_json(const field_doc *f, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; i < n && f[i].name; i++)
        json_array_append_new(a, field_json(&f[i]));
    return a;
}

json_t *rv_whatif_kinds(void)
{
    json_t *arr = json_array();
    for (size_t i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
        const kind_doc *k = &kinds[i];
        json_array_append_new(
            arr,
            json_pack("{s:s, s:s, s:i, s:s, s:o, s:o}", "kind", k->kind, "label", k->label,
                      "order", k->order, "description", k->doc, "example", json_loads(k->example, 0, NULL), "fields",
                      fields_json(k->fields, sizeof(k->fields) / sizeof(k->fields[0]))));
    }
    return json_pack("{s:o, s:o, s:o, s:o, s:s}", "optimizations", arr, "distributed",
                     fields_json(dist_docs, sizeof(dist_docs) / sizeof(dist_docs[0])), "top_level",
                     fields_json(top_docs, sizeof(top_docs) / sizeof(top_docs[0])), "selector",
                     fields_json(select_docs, sizeof(select_docs) / sizeof(select_docs[0])),
                     "order",
                     "amp, fusions, memory savers, generic primitives, distributed, gradient "
                     "accumulation, power limit, data loader, schedule");
}
