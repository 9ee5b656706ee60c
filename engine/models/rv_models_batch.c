/* batch_size: the step at another batch size. Costed kernels take the
 * kernel models' time at their FLOPs and bytes scaled by the batch factor
 * (the efficiency of the new size bucket); other kernels scale linearly;
 * optimizer and collective kernels, CPU work and launches stay; data
 * loading and host-to-device copies scale. See docs/models/batch.md. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cost/rv_flops.h"
#include "cost/rv_kmodel.h"
#include "cost/rv_kmodel_acc.h"
#include "trace/rv_shapes.h"
#include "models/rv_models.h"

int rv_models__batch_size(const struct rv_whatif *w, const rv_opt *o, rv_graph *g, json_t *applied,
                          rv_error *err)
{
    const rv_trace *t = g->trace;
    const char *from = "the request";
    int64_t b0 = w->batch_size > 0 ? w->batch_size : 0;
    const rv_flops_trace *f = NULL;
    rv_kmodel *own = NULL;
    json_t *out = NULL;
    int rc = 0;

    if ((o->factor > 0) == (o->batch_to > 0))
        return rv_error_field(err, RV_ERR_INVALID, "factor",
                              "batch_size takes one of factor or to");
    if (!b0 && t)
        b0 = rv_shapes_batch(t, &from);
    if (o->batch_to > 0 && b0 <= 0)
        return rv_error_field(err, RV_ERR_UNSUPPORTED, "to",
                              "batch_size to: the trace's batch size is unknown (no op shapes "
                              "to read it from): give batch_size in the request or a factor");
    double F = o->factor > 0 ? o->factor : (double)o->batch_to / (double)b0;
    out = json_pack("{s:s,s:i,s:f}", "model", "batch_size", "index", o->index, "factor", F);
    if (!out)
        return rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
    if (b0 > 0) {
        json_object_set_new(out, "batch_from", json_integer(b0));
        json_object_set_new(out, "batch_to", json_real((double)b0 * F));
        json_object_set_new(out, "batch_source", json_string(from));
    }
    rv_kmodel m;
    const rv_hw *hw = rv_models__hw(w, g);
    memset(&m, 0, sizeof(m));
    if (t && t->nop_shapes > 0 && hw && g->flops) {
        f = g->flops;
        rv_kmodel_fit(&m, t, f, hw, 1, 0);
        if (w->kmodel_platform) {
            /* The trace's own fit, to tell the sizes the platform lent. */
            if ((own = malloc(sizeof(*own))) == NULL) {
                rc = rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
                goto out;
            }
            *own = m;
            json_object_set_new(out, "platform_buckets_filled",
                                json_integer((json_int_t)rv_kmodel_fill(&m, w->kmodel_platform)));
        }
    }
    double before = 0, after = 0, k_model = 0, k_lin = 0, k_kept = 0, k_extra = 0, k_plat = 0;
    for (size_t i = 0; i < g->ntasks; i++) {
        rv_task *k = &g->tasks[i];
        if (k->kind == RV_TASK_DATA || (k->kind == RV_TASK_CPU && k->gap_dl_ns > 0)) {
            /* Loading a batch scales with its samples. */
            int64_t dl = rv_models__scaled_ns(k->gap_dl_ns, F);
            k->gap_ns += dl - k->gap_dl_ns;
            k->gap_dl_ns = dl;
            if (k->kind == RV_TASK_DATA)
                k->dur_ns = rv_models__scaled_ns(k->dur_ns, F);
            continue;
        }
        if (k->kind != RV_TASK_GPU || k->dur_ns <= 0)
            continue;
        double s = (double)k->dur_ns * 1e-9, mult = 1;
        if (k->cat != RV_CAT_KERNEL) {
            const char *name = rv_task_name(g, i);
            mult = strstr(name, "HtoD") ? F : 1; /* the batch's input */
        } else {
            before += s;
            int32_t e = k->event;
            int kc = rv_kclass_of_task(g, i);
            int cls = f && e >= 0 ? f->cls[e] : RV_FC_NONE;
            double e0 = 0, e1 = 0, nf = 0, nb = 0; /* nf, nb: the new size */
            if (f && cls != RV_FC_NONE && cls != RV_FC_OPTIM) {
                nf = f->flops[e] * F;
                nb = f->bytes[e] * F;
                e0 = rv_kmodel_nearest_eff(&m, cls, f->flops[e], f->bytes[e]);
                e1 = rv_kmodel_nearest_eff(&m, cls, nf, nb);
            }
            if (e0 > 0) {
                /* The roofline grows by F; the efficiency moves to the new
                 * size's bucket where one was fitted, else stays. A kernel
                 * doing F times the work takes between 1 and F times as
                 * long. */
                mult = e1 > 0 ? F * e0 / e1 : F;
                double lo = F < 1 ? F : 1, hi = F < 1 ? 1 : F;
                mult = mult < lo ? lo : mult > hi ? hi : mult;
                k_model += s;
                if (rv_kmodel_bucket_eff(&m, cls, nf, nb) <= 0)
                    k_extra += s; /* no kernel of the class measured at that size */
                else if (own && rv_kmodel_bucket_eff(own, cls, nf, nb) <= 0)
                    k_plat += s;
            } else if (kc == RV_KC_OPTIMIZER || kc == RV_KC_COMM || cls == RV_FC_OPTIM) {
                k_kept += s; /* parameters and gradients do not grow with the batch */
            } else {
                mult = F;
                k_lin += s;
            }
        }
        k->dur_ns = rv_models__scaled_ns(k->dur_ns, mult);
        if (k->cat == RV_CAT_KERNEL)
            after += (double)k->dur_ns * 1e-9;
    }
    json_object_set_new(out, "kernel_us_before", json_real(before * 1e6));
    json_object_set_new(out, "kernel_us_after", json_real(after * 1e6));
    json_object_set_new(out, "kernel_time_share_modelled",
                        json_real(before > 0 ? k_model / before : 0));
    json_object_set_new(out, "kernel_time_share_linear",
                        json_real(before > 0 ? k_lin / before : 0));
    json_object_set_new(out, "kernel_time_share_kept", json_real(before > 0 ? k_kept / before : 0));
    json_object_set_new(out, "kernel_time_share_extrapolated",
                        json_real(before > 0 ? k_extra / before : 0));
    if (k_extra > 0)
        rv_models__warn(out, "batch_extrapolated",
                        "%.1f%% of kernel time moves to sizes no measured kernel of its class ran "
                        "at: it takes the nearest measured size's efficiency (held at the "
                        "largest's past them)",
                        before > 0 ? k_extra / before * 100 : 0);
    if (k_plat > 0)
        rv_models__warn(out, "batch_platform_efficiencies",
                        "%.1f%% of kernel time moves to sizes only the platform's stored traces "
                        "ran at: it takes their efficiency, which carries poorly from another "
                        "model (docs/ACCURACY.md)",
                        before > 0 ? k_plat / before * 100 : 0);
    if (k_lin > 0)
        rv_models__warn(out, "batch_linear",
                        "%.1f%% of kernel time has no cost from op shapes and scales linearly "
                        "with the batch (x%.3g); the kernel models give the rest",
                        before > 0 ? k_lin / before * 100 : 0, F);
    if (b0 <= 0)
        rv_models__warn(out, "batch_unknown",
                        "the trace's batch size is unknown: throughput cannot be given for the "
                        "new batch");
    json_array_append_new(applied, out);
    out = NULL;
out:
    json_decref(out);
    free(own);
    return rc;
}
