/* Internal: the model entry points and their shared helpers; the request
 * they read is whatif/rv_whatif_types.h, the dispatcher that calls them
 * models/rv_apply.h. Not a public API. */
#ifndef RV_MODELS_H
#define RV_MODELS_H

#include <jansson.h>

#include "trace/rv_coll.h"
#include "graph/rv_graph.h"
#include "hw/rv_hw.h"
#include "simulate/rv_power.h"
#include "graph/rv_select.h"
#include "whatif/rv_whatif.h"
#include "whatif/rv_whatif_types.h"

/* Constants the models share (each model's doc lists them, docs/models/). */
/* Share of peak HBM bandwidth a streaming kernel (copy, unscale, offload
 * staging) achieves: about 80% in STREAM-like measurements on V100/A100. */
#define RV_MODELS_HBM_SHARE 0.8
/* Host <-> device GB/s one way when the hardware table has no row: PCIe 3
 * x16's ~12 GB/s achieved (16 GB/s theoretical). */
#define RV_MODELS_PCIE_GBYTES 12.0

/* The hardware row for g (the override when given). May be NULL. */
const rv_hw *rv_models__hw(const struct rv_whatif *w, const rv_graph *g);

/* Shared graph helpers. next[] maps each task to its successor on its
 * thread (-1 at the end); returns new array or NULL on OOM. */
int32_t *rv_models__thread_next(const rv_graph *g);
/* Median duration of the CPU calls that launch GPU work (ns). */
int64_t rv_models__launch_ns(const rv_graph *g);
/* Removes a task; when keep_gap, its gap (CPU work not owned by it) stays. */
void rv_models__remove(rv_graph *g, int32_t i, int keep_gap);

/* Inserts a task of dur_ns after anchor (see rv_models_generic.c); sel_kind
 * is RV_SEL_KERNEL, RV_SEL_MEMCPY or RV_SEL_CPU. side_of_thread (nthreads
 * entries, -1 = none yet) caches the side thread per original thread. */
int rv_models__insert_after(rv_graph *g, int32_t anchor, const int32_t *next, int64_t dur_ns,
                            int sel_kind, int32_t *side_of_thread);
/* The most tasks one insert optimization may add (its selector's matches
 * are counted first). */
#define RV_MODELS_MAX_INSERT ((size_t)1000000)

/* ns * mult rounded, saturated at RV_MODELS_MAX_TASK_NS (a task of more
 * than a day is no what-if; past it sums would overflow the clock). */
#define RV_MODELS_MAX_TASK_NS ((int64_t)86400 * 1000000000)
int64_t rv_models__scaled_ns(int64_t ns, double mult);

/* Adds {code, message} to the "warnings" array of a model's applied entry
 * (obj, borrowed); rv_run lifts them into the answer's warnings. */
void rv_models__warn(json_t *obj, const char *code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Models. Each returns 0 or a negative rv_err and adds one object to
 * applied (borrowed array). */
int rv_models__amp(const struct rv_whatif *w, const rv_opt *o, rv_graph *g, json_t *applied,
                   rv_error *err);
int rv_models__fused_optimizer(const struct rv_whatif *w, const rv_opt *o, rv_graph *g,
                               json_t *applied, rv_error *err);
int rv_models__kernel_fusion(const struct rv_whatif *w, const rv_opt *o, rv_graph *g,
                             json_t *applied, rv_error *err);
int rv_models__restructure_bn(const struct rv_whatif *w, const rv_opt *o, rv_graph *g,
                              json_t *applied, rv_error *err);
int rv_models__memory_saver(const struct rv_whatif *w, const rv_opt *o, rv_graph *g,
                            json_t *applied, rv_error *err);
int rv_models__generic(const struct rv_whatif *w, const rv_opt *o, rv_graph *g, json_t *applied,
                       rv_error *err);
int rv_models__dataloader(const struct rv_whatif *w, const rv_opt *o, rv_graph *g, json_t *applied,
                          rv_error *err);
int rv_models__distributed(const struct rv_whatif *w, rv_graph *g, json_t *applied, rv_error *err);
/* The `parallel` what-if (rv_models_parallel.c). */
int rv_models__parallel(const struct rv_whatif *w, rv_graph *g, json_t *applied, rv_error *err);
/* *changed: whether any task's duration moved (the only thing it changes),
 * so that the caller needs no fingerprint pass to tell. */
int rv_models__power(const struct rv_whatif *w, rv_graph *g, json_t *applied, int *changed,
                     rv_error *err);
int rv_models__batch_size(const struct rv_whatif *w, const rv_opt *o, rv_graph *g, json_t *applied,
                          rv_error *err);
/* Kernel times rescaled to w->gpu (rv_models_gpu.c). */
int rv_models__gpu(const struct rv_whatif *w, rv_graph *g, json_t *applied, rv_error *err);

/* A communication task a model inserts: secs long, moving bytes, in
 * iteration it and the given phase (an rv_phase), not measured (no event,
 * no launch). The caller sets what else it needs (priority, pardim). */
rv_task rv_models__comm_task(double secs, double bytes, int32_t it, int phase);

#endif
