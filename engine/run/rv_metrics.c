/* TBD's metrics on every answer; see rv_metrics.h and
 * docs/models/metrics.md. */
#include "run/rv_metrics.h"

#include <stdlib.h>
#include <string.h>

#include "cost/rv_flops.h"
#include "hw/rv_hw.h"
#include "cost/rv_memory.h"
#include "models/rv_parallel.h"
#include "simulate/rv_pardims.h"
#include "models/rv_apply.h"
#include "simulate/rv_power.h"
#include "graph/rv_precision.h"
#include "trace/rv_shapes.h"

/* rv_prec_type -> rv_dtype; -1 when no peak applies. */
static int dtype_of_ptype(int pt)
{
    switch (pt) {
    case RV_PT_FP32: return RV_DT_FP32;
    case RV_PT_FP16: return RV_DT_FP16;
    case RV_PT_BF16: return RV_DT_BF16;
    case RV_PT_FP8: return RV_DT_FP8;
    default: return -1;
    }
}

static json_t *before_after(double b, double p)
{
    return json_pack("{s:f,s:f}", "baseline", b, "predicted", p);
}

/* GPUs (device ids) of the graph's GPU threads that ran work. */
static int gpu_count(const rv_graph *g)
{
    int seen[64] = {0}, n = 0;
    for (size_t i = 0; i < g->nthreads; i++) {
        int d = g->threads[i].device;
        if (d >= 0 && g->threads[i].first >= 0) {
            if (d < 64 && !seen[d]) {
                seen[d] = 1;
                n++;
            } else if (d >= 64) {
                n++;
            }
        }
    }
    return n > 0 ? n : 1;
}

/* Points in memory.series. */
#define RV_MEM_SERIES_BINS 200

/* The batch_size what-if's factor (1 without one). */
static double batch_factor(const rv_run_result *r)
{
    size_t i;
    json_t *a;
    double f = 1;
    json_array_foreach(r->applied, i, a)
    {
        const char *m = json_string_value(json_object_get(a, "model"));
        if (m && !strcmp(m, "batch_size"))
            f *= json_number_value(json_object_get(a, "factor"));
    }
    return f > 0 ? f : 1;
}

json_t *rv_metrics_flops(rv_run_result *r, double *per_step)
{
    const rv_graph *g = r->graph;
    const rv_flops_trace *f = g->flops;
    const rv_trace *t = g->trace;
    double sum = 0, by_cls[RV_FC_COUNT] = {0}, ktime = 0, kcosted = 0;
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *k = &g->tasks[i];
        /* Collectives move data; they have no FLOPs to miss. */
        if (k->event < 0 || (size_t)k->event >= t->nevents || k->kind == RV_TASK_COMM ||
            t->events[k->event].cat != RV_CAT_KERNEL)
            continue;
        int64_t a = r->base->start_ns[i];
        if (a < r->base_win.t0_ns || a >= r->base_win.t1_ns)
            continue;
        ktime += (double)k->dur_ns;
        if (f->cls[k->event] == RV_FC_NONE)
            continue;
        kcosted += (double)k->dur_ns;
        sum += f->flops[k->event];
        by_cls[f->cls[k->event]] += f->flops[k->event];
    }
    double per = r->base_win.per > 0 ? r->base_win.per : 1;
    *per_step = sum / per;
    /* Kernels of ops without a formula (or without shapes) count nothing. */
    if (ktime > 0 && kcosted < 0.9 * ktime)
        rv_run_warn(r, "flops_partial",
                    "the FLOP formulas cover %.0f%% of the step's kernel time: flops and mfu "
                    "are lower bounds",
                    100 * kcosted / ktime);
    json_t *cls = json_object();
    for (int c = 1; c < RV_FC_COUNT; c++)
        if (by_cls[c] > 0)
            json_object_set_new(cls, rv_flops_class_name(c), json_real(by_cls[c] / per));
    int dt = dtype_of_ptype(f ? f->dominant_ptype : 0);
    return json_pack("{s:f,s:s,s:s?,s:o,s:I,s:I,s:I}", "per_step", *per_step, "source",
                     t->shapes_source == RV_SHAPES_ET ? "execution_trace" : "kineto_shapes",
                     "dtype", dt >= 0 ? rv_dtype_name(dt) : NULL, "by_class", cls, "ops_costed",
                     (json_int_t)f->ops_costed, "gpu_tasks_costed", (json_int_t)f->gpu_tasks_costed,
                     "gpu_tasks", (json_int_t)f->gpu_tasks);
}

/* The measured span the memory peak is read over: the reported step, the
 * steps, or the whole trace. */
static void mem_window(const rv_run_result *r, int64_t *t0, int64_t *t1)
{
    const rv_graph *g = r->graph;
    *t0 = INT64_MIN;
    *t1 = INT64_MAX;
    if (r->base_fig.iter >= 0) {
        *t0 = g->origin_ns + g->iters[r->base_fig.iter].start_ns;
        *t1 = g->origin_ns + g->iters[r->base_fig.iter].end_ns;
    } else if (g->niters > 0) {
        *t0 = g->origin_ns + g->iters[0].start_ns;
        *t1 = g->origin_ns + g->iters[g->niters - 1].end_ns;
    }
}

/* The optimizer an annotation names ("Optimizer.step#Adam.step",
 * "Optimizer.zero_grad#SGD.zero_grad") and the state it keeps per
 * parameter element when only the name is known: Adam(W) two moments, SGD
 * (momentum assumed), Adagrad and RMSprop one buffer. NULL when none. */
static const char *optimizer_named(const rv_trace *t, int64_t t0, int64_t t1, int *len, double *per)
{
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if ((e->cat != RV_CAT_CPU_OP && e->cat != RV_CAT_USER_ANNOTATION) || e->ts_ns < t0 ||
            e->ts_ns >= t1)
            continue;
        const char *n = rv_memory_optimizer_named(rv_trace_str(t, e->name), len, per);
        if (n)
            return n;
    }
    return NULL;
}

/* Weights, gradients and optimizer state from a joined ET, else from the
 * step's op shapes (sb, NULL when none); activations and the rest are what
 * the peak leaves: the allocator's peak less the known parts, or the
 * allocations since profiling began (held before it: weights, gradients,
 * optimizer state), or without memory events the shapes' saved
 * activations. *est gets the peak the parts add up to when the trace has
 * no allocator totals (-1 otherwise or when unknown). */
static json_t *breakdown_json(const rv_trace *t, const rv_memory_shapes *sb, int64_t peak,
                              int totals, int64_t t0, int64_t t1, int64_t *est)
{
    int64_t w, gr, os;
    const char *src, *osrc = NULL;
    json_t *oname = json_null();
    *est = -1;
    if (t->mem_model) {
        w = t->mem_weights;
        gr = t->mem_gradients;
        os = t->mem_optimizer_state;
        src = "execution_trace";
        if (t->mem_optimizer) {
            oname = json_string(rv_trace_str(t, t->mem_optimizer));
            osrc = "name";
        }
    } else if (sb && sb->nparams > 0) {
        int len = 0;
        double per = 0;
        const char *n = optimizer_named(t, t0, t1, &len, &per);
        w = sb->weights;
        gr = sb->gradients;
        os = sb->optimizer_state;
        src = "shapes";
        if (n)
            oname = json_stringn(n, (size_t)len);
        if (os != RV_NONE) {
            osrc = sb->training ? "ops" : "inference";
        } else if (n) {
            os = (int64_t)(per * (double)w);
            osrc = "name";
        }
    } else {
        return json_null();
    }
    json_t *b = json_object();
    int64_t known = w + gr + (os != RV_NONE ? os : 0);
    int64_t act = sb && sb->nparams > 0 ? sb->activations : -1, ao = -1;
    json_object_set_new(b, "weights", json_integer((json_int_t)w));
    json_object_set_new(b, "gradients", json_integer((json_int_t)gr));
    json_object_set_new(b, "optimizer_state",
                        os != RV_NONE ? json_integer((json_int_t)os) : json_null());
    json_object_set_new(b, "activations", act >= 0 ? json_integer((json_int_t)act) : json_null());
    json_object_set_new(b, "activation_layers",
                        json_integer(sb && sb->nparams > 0 ? (json_int_t)sb->nsaving : 0));
    if (os != RV_NONE) {
        if (peak >= 0 && totals)
            ao = peak > known ? peak - known : 0;
        else if (peak >= 0)
            ao = peak;
        else if (act >= 0 && sb->training)
            ao = act;
        else if (sb && sb->nparams > 0 && !sb->training)
            ao = 2 * sb->largest_input; /* inference: one op's input and output */
    }
    json_object_set_new(b, "activations_and_other",
                        ao >= 0 ? json_integer((json_int_t)ao) : json_null());
    if (ao >= 0 && !(peak >= 0 && totals))
        *est = known + ao;
    json_object_set_new(b, "optimizer", oname);
    json_object_set_new(b, "optimizer_source", osrc ? json_string(osrc) : json_null());
    json_object_set_new(b, "source", json_string(src));
    return b;
}

/* Allocated bytes over the reported window, at most RV_MEM_SERIES_BINS
 * points: {t_us (from the window's start), bytes}. */
static json_t *series_json(const int64_t *bins, int64_t t0, int64_t t1)
{
    json_t *ts = json_array(), *by = json_array();
    double w = (double)(t1 - t0 + 1) / RV_MEM_SERIES_BINS;
    for (size_t b = 0; ts && by && b < RV_MEM_SERIES_BINS; b++) {
        if (bins[b] < 0)
            continue;
        json_array_append_new(ts, json_real(((double)b + 0.5) * w / 1e3));
        json_array_append_new(by, json_integer((json_int_t)bins[b]));
    }
    return json_pack("{s:o,s:o,s:f}", "t_us", ts, "bytes", by, "window_us",
                     (double)(t1 - t0) / 1e3);
}

/* The breakdown and the peak the parts add up to, onto o (owned). */
static json_t *with_breakdown(rv_run_result *r, json_t *o, const rv_trace *t, int64_t peak,
                              int totals, int64_t t0, int64_t t1)
{
    rv_memory_shapes sb;
    /* The shapes count one step: the reported one, else the middle one. */
    const rv_graph *g = r->graph;
    int64_t s0 = t0, s1 = t1;
    if (r->base_fig.iter < 0 && g->niters > 0) {
        s0 = g->origin_ns + g->iters[g->niters / 2].start_ns;
        s1 = g->origin_ns + g->iters[g->niters / 2].end_ns;
    }
    int have = t->nop_shapes > 0 &&
               rv_memory_from_shapes(t, g->flops ? g->flops->op_tree : NULL, s0, s1, &sb) == 0;
    int64_t est = -1;
    json_t *b = breakdown_json(t, have ? &sb : NULL, peak, totals, s0, s1, &est);
    if (!o)
        return NULL;
    json_object_set_new(o, "breakdown", b);
    if (json_is_null(b)) {
        json_object_set_new(o, json_object_get(o, "reason") ? "breakdown_reason" : "reason",
                            json_string("the breakdown needs the op shapes (record_shapes=True) "
                                        "or the run's execution trace (--et) to tell weights, "
                                        "gradients and optimizer state from activations"));
        return o;
    }
    if (est >= 0) {
        json_object_set_new(o, "estimated_peak_bytes", json_integer((json_int_t)est));
        rv_run_warn(r, "memory_estimated",
                    peak >= 0 ? "estimated_peak_bytes adds the weights, gradients and optimizer "
                                "state the breakdown infers to the allocations seen since "
                                "profiling began"
                              : "the trace has no memory events: estimated_peak_bytes adds up "
                                "the breakdown the op shapes give (activations saved for the "
                                "backward pass, no workspace)");
    }
    return o;
}

json_t *rv_metrics_memory(rv_run_result *r)
{
    const rv_trace *t = r->graph->trace;
    const char *none = "the trace has no GPU \"[memory]\" events (record with profile_memory=True)";
    int64_t t0, t1, peak = -1, running[64] = {0}, bins[RV_MEM_SERIES_BINS];
    int totals = 0;
    if (!t)
        return json_pack("{s:n,s:n,s:s}", "peak_bytes", "breakdown", "reason", none);
    mem_window(r, &t0, &t1);
    if (t->nmem == 0)
        return with_breakdown(r, json_pack("{s:n,s:s}", "peak_bytes", "reason", none), t, -1, 0, t0,
                              t1);
    for (size_t b = 0; b < RV_MEM_SERIES_BINS; b++)
        bins[b] = -1;
    for (size_t i = 0; i < t->nmem; i++)
        totals |= t->mem[i].allocated != RV_NONE;
    for (size_t i = 0; i < t->nmem; i++) {
        const rv_mem_sample *m = &t->mem[i];
        int64_t v;
        if (totals) {
            if (m->allocated == RV_NONE)
                continue;
            v = m->allocated;
        } else {
            int d = m->device >= 0 && m->device < 64 ? m->device : 63;
            running[d] += m->bytes;
            v = running[d];
        }
        if (m->ts_ns < t0 || m->ts_ns > t1)
            continue;
        if (v > peak)
            peak = v;
        /* The series keeps each bin's highest value, so the peak shows. */
        size_t b = (size_t)((double)(m->ts_ns - t0) * RV_MEM_SERIES_BINS / (double)(t1 - t0 + 1));
        b = b < RV_MEM_SERIES_BINS ? b : RV_MEM_SERIES_BINS - 1;
        if (v > bins[b])
            bins[b] = v;
    }
    if (peak < 0)
        return with_breakdown(r,
                              json_pack("{s:n,s:s}", "peak_bytes", "reason",
                                        "no GPU memory event falls inside the reported steps"),
                              t, -1, 0, t0, t1);
    if (!totals)
        rv_run_warn(r, "memory_lower_bound",
                    "the trace's memory events carry allocations but not the allocator's "
                    "totals: peak_bytes counts from the start of profiling, so memory held "
                    "before it (weights, optimizer state) is missing");
    json_t *o = json_pack("{s:I,s:s}", "peak_bytes", (json_int_t)peak, "source",
                          totals ? "allocator_totals" : "allocations_since_profiling_start");
    o = with_breakdown(r, o, t, peak, totals, t0, t1);
    if (o)
        json_object_set_new(o, "series", series_json(bins, t0, t1));
    return o;
}

static json_t *utilization_json(const rv_run_result *r)
{
    const json_t *bd[2] = {r->breakdown_base, r->breakdown_pred};
    double gpu[2], cpu[2];
    for (int k = 0; k < 2; k++) {
        const json_t *cg = json_object_get(bd[k], "cpu_gpu");
        double win = json_number_value(json_object_get(bd[k], "window_us"));
        double busy = json_number_value(json_object_get(cg, "cpu_only_us")) +
                      json_number_value(json_object_get(cg, "parallel_us"));
        gpu[k] = json_number_value(json_object_get(bd[k], "gpu_utilization"));
        cpu[k] = win > 0 ? busy / win : 0;
    }
    return json_pack("{s:o,s:o}", "gpu", before_after(gpu[0], gpu[1]), "cpu",
                     before_after(cpu[0], cpu[1]));
}

/* The baseline's memory report: a copy of the prep's (the what-if's
 * predictions are added to it), with the warnings it rests on. */
static json_t *memory_of(rv_run_result *r)
{
    const rv_run_prep *p = r->prep;
    if (!p)
        return rv_metrics_memory(r);
    for (size_t i = 0; i < p->mem_nwarnings; i++)
        rv_run_warn(r, p->mem_warnings[i].code, "%s", p->mem_warnings[i].message);
    return json_deep_copy(p->memory);
}

/* The baseline's FLOPs: a copy of the prep's (predicted_per_step is
 * added to it), with the warnings they rest on. */
static json_t *flops_of(rv_run_result *r, double *per_step)
{
    const rv_run_prep *p = r->prep;
    if (!p)
        return rv_metrics_flops(r, per_step);
    for (size_t i = 0; i < p->flops_nwarnings; i++)
        rv_run_warn(r, p->flops_warnings[i].code, "%s", p->flops_warnings[i].message);
    *per_step = p->flops_per_step;
    return json_deep_copy(p->flops);
}

json_t *rv_metrics_compute(rv_run_result *r, const rv_whatif *w)
{
    const rv_graph *g = r->graph;
    const rv_trace *t = g->trace;
    json_t *o = json_object();
    /* Costed once with the graph (rv_graph_build), borrowed. */
    const rv_flops_trace *f = g->flops;
    double per_step = 0;
    if (!o)
        return NULL;
    if (f && f->total_flops > 0) {
        json_t *fj = flops_of(r, &per_step);
        if (fj && batch_factor(r) != 1)
            json_object_set_new(fj, "predicted_per_step", json_real(per_step * batch_factor(r)));
        json_object_set_new(o, "flops", fj);
    } else {
        json_object_set_new(o, "flops", json_null());
        rv_run_warn(r, "flops_unknown",
                    t && t->nop_shapes
                        ? "no op with shapes has a FLOP formula: flops and mfu are null"
                        : "the trace has no op shapes (record_shapes=True, or an execution "
                          "trace with --et): flops and mfu are null");
    }
    /* MFU against the dense peak of the dtype most FLOPs ran in. */
    const rv_hw *hw = t ? rv_hw_lookup(rv_trace_str(t, t->platform_gpu)) : NULL;
    const char *over = rv_whatif_gpu_override(w);
    const rv_hw *phw = over ? rv_hw_lookup(over) : hw;
    int dt = dtype_of_ptype(f ? f->dominant_ptype : 0);
    double peak = dt >= 0 ? rv_hw_peak(hw, dt) : 0, ppeak = dt >= 0 ? rv_hw_peak(phw, dt) : 0;
    int ngpu = gpu_count(g);
    if (per_step > 0 && peak > 0 && ppeak > 0 && r->sum.baseline_us > 0 &&
        r->sum.predicted_us > 0) {
        double mb = per_step / (r->sum.baseline_us * 1e-6) / (peak * 1e12 * ngpu);
        /* At another batch the step does that many times the FLOPs. */
        double mp =
            per_step * batch_factor(r) / (r->sum.predicted_us * 1e-6) / (ppeak * 1e12 * ngpu);
        json_object_set_new(o, "mfu", before_after(mb, mp));
        if (mb > 1 || mp > 1)
            rv_run_warn(r, "mfu_above_peak",
                        "model FLOP/s exceed the %s peak of %s: kernels likely ran in a faster "
                        "mode than their inputs' type (TF32 for fp32)",
                        rv_dtype_name(dt), hw ? hw->name : "the GPU");
    } else {
        json_object_set_new(o, "mfu", json_null());
        if (per_step > 0)
            rv_run_warn(r, "mfu_unknown", "%s: mfu is null",
                        dt < 0   ? "the FLOPs' dtype is not fp32, fp16, bf16 or fp8"
                        : !hw    ? "the trace's GPU is not in the hardware table"
                        : !ppeak ? "the requested GPU is not in the hardware table"
                                 : "the GPU has no peak for the FLOPs' dtype");
    }
    /* Batch size: the request's, else what the shapes say. */
    rv_energy_params ep;
    rv_apply_energy_params(w, g, &ep);
    const char *from = "the request", *inferred_from = NULL;
    int64_t batch = ep.batch_size > 0 ? ep.batch_size : 0;
    int64_t inferred = 0;
    if (r->prep) {
        inferred = r->prep->batch_inferred;
        inferred_from = r->prep->batch_from;
    } else if (t) {
        inferred = rv_shapes_batch(t, &inferred_from);
    }
    if (!batch && inferred > 0) {
        batch = inferred;
        from = inferred_from;
    }
    /* samples_per_step only relabels the step: when it is not the batch the
     * shapes say, say so. */
    if (ep.batch_size > 0 && inferred > 0 && ep.batch_size != inferred)
        rv_run_warn(r, "samples_per_step_mismatch",
                    "samples_per_step %lld contradicts the batch %lld read from %s: it "
                    "relabels the step, so throughput changes and the step's time does not "
                    "(the batch_size optimization changes the batch)",
                    (long long)ep.batch_size, (long long)inferred, inferred_from);
    if (batch > 0 && r->sum.baseline_us > 0 && r->sum.predicted_us > 0) {
        json_object_set_new(o, "batch_size",
                            json_pack("{s:I,s:s}", "value", (json_int_t)batch, "source", from));
        json_object_set_new(
            o, "throughput",
            before_after((double)batch / (r->sum.baseline_us * 1e-6),
                         (double)batch * batch_factor(r) / (r->sum.predicted_us * 1e-6)));
        if (ep.batch_size <= 0)
            rv_run_warn(r, "batch_inferred",
                        "batch size %lld is read from %s; give samples_per_step in the request "
                        "if that is not the samples per step",
                        (long long)batch, from);
    } else {
        json_object_set_new(o, "batch_size", json_null());
        json_object_set_new(o, "throughput", json_null());
    }
    json_object_set_new(o, "utilization", utilization_json(r));
    /* The dimensions the predicted run communicates over (rv_pardims.h). */
    int32_t deg[RV_PD_COUNT];
    json_object_set_new(o, "parallelism",
                        rv_pardims_json_pre(rv_run_pred_graph(r), rv_run_pred_sim(r), &r->pred_win,
                                            rv_parallel_degrees(w, deg),
                                            r->prep ? r->prep->calls : NULL));
    json_object_set_new(o, "memory", memory_of(r));
    if (rv_memory_predict(json_object_get(o, "memory"), r->applied))
        rv_run_warn(r, "memory_savers_assumed",
                    "predicted_peak_bytes of the memory savers rests on defaults, nothing here "
                    "measured them: vDNN offloads what each consumer kernel streams in its time "
                    "and keeps %d layers prefetched, Gist encodes %.0fx, recompute keeps "
                    "2/sqrt(L) of the activations (docs/models/memory.md)",
                    RV_VDNN_PREFETCH_LAYERS, RV_GIST_ENCODING);
    /* Per GPU after sharding, when the what-if moved the degrees. */
    rv_parallel_memory(json_object_get(o, "memory"), r->applied);
    return o;
}
