/* `reverie kernels TRACE [--et ET] [--fit TRACE2 [--fit-et ET2]] [--to GPU]...`
 *
 * The kernel models (engine/rv_kmodel.h) on one trace with shapes: per
 * kernel class, the error of the fitted roofline-efficiency model on the
 * held-out half of the costed kernels (fitted on the other half), or on
 * all of them when the model is fitted on another trace of the same GPU
 * (--fit), next to the bare roofline's; and, for each --to GPU, the
 * trace's kernel time rescaled to that GPU. One JSON object on stdout; scripts/accuracy.py
 * reads it for docs/ACCURACY.md. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "cli_kmodels.h"
#include "rv_cli.h"
#include "cost/rv_flops.h"
#include "hw/rv_hw.h"
#include "cost/rv_keff.h"
#include "cost/rv_kmodel.h"
#include "graph/rv_graph.h"
#include "trace/rv_kname.h"
#include "models/rv_apply.h"
#include "whatif/rv_whatif.h"

enum { MAX_TO = 16 };

static void usage(FILE *f)
{
    fprintf(f, "usage: reverie kernels TRACE [--et EXECUTION_TRACE] [--fit TRACE2 [--fit-et ET2]]\n"
               "                       [--to GPU]... [--efficiencies]\n"
               "\n"
               "Per kernel class: kernels held out, the fitted model's and the bare\n"
               "roofline's geometric-mean error on them. --fit: the model is fitted on\n"
               "every costed kernel of TRACE2 (same GPU) and measured on all of TRACE's.\n"
               "--to GPU (repeatable, a name of the hardware table): the trace's GPU\n"
               "time moved to that GPU by the gpu what-if's own model.\n"
               "--efficiencies: every costed kernel's class, size bucket and fp32\n"
               "efficiency (what scripts/fit_keff.py fits the cross-GPU table from).\n");
}

/* Kernel time of g as measured, and after the `gpu` what-if moves it to
 * `to`, in ms: the what-if's own path (models/rv_models_gpu.c), so the two
 * answers cannot disagree. NULL on failure (err says why). */
static json_t *rescaled(const rv_graph *g, const rv_hw *to, rv_error *err)
{
    json_t *doc = json_pack("{s:s}", "gpu", to->name), *applied = NULL, *out = NULL;
    rv_whatif *w = NULL;
    rv_graph *moved = rv_graph_clone(g);
    if (!doc || !moved) {
        rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
        goto out;
    }
    if (rv_whatif_parse(doc, &w, err) != 0 || rv_apply(w, moved, &applied, err) != 0)
        goto out;
    double meas = 0, pred = 0;
    for (size_t i = 0; i < g->ntasks; i++)
        if (g->tasks[i].kind == RV_TASK_GPU && g->tasks[i].dur_ns > 0)
            meas += (double)g->tasks[i].dur_ns;
    for (size_t i = 0; i < moved->ntasks; i++)
        if (moved->tasks[i].kind == RV_TASK_GPU && moved->tasks[i].dur_ns > 0)
            pred += (double)moved->tasks[i].dur_ns;
    out = json_pack("{s:s,s:f,s:f}", "gpu", to->name, "kernel_ms", meas * 1e-6, "predicted_ms",
                    pred * 1e-6);
    if (!out)
        rv_error_set(err, RV_ERR_NOMEM, -1, -1, "out of memory");
out:
    json_decref(doc);
    json_decref(applied);
    rv_whatif_free(w);
    rv_graph_free(moved);
    return out;
}

/* Every costed kernel of t: class, size bucket, fp32 efficiency on hw
 * (roofline over measured time, no TF32), measured us and the dtype it
 * computed in (TF32 where its name says so), in trace order: what
 * scripts/fit_keff.py fits the cross-GPU table and the tensor-core
 * efficiencies from. */
static json_t *efficiencies(const rv_trace *t, const rv_flops_trace *f, const rv_hw *hw)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        int cls = f->cls[i];
        if (e->cat != RV_CAT_KERNEL || e->dur_ns <= 0 || cls == RV_FC_NONE ||
            (f->flops[i] <= 0 && f->bytes[i] <= 0))
            continue;
        double roof = rv_kmodel_roofline_s(hw, rv_kmodel_dtype(hw, f->ptype[i], cls, 0),
                                           f->flops[i], f->bytes[i]);
        double s = (double)e->dur_ns * 1e-9;
        const char *name = rv_trace_str(t, e->name);
        int tf32 = name && rv_kname_dtype(name) == RV_DT_TF32;
        int dt = rv_kmodel_dtype(hw, f->ptype[i], cls, tf32);
        double peak = rv_hw_peak(hw, dt) * 1e12, bw = hw ? hw->hbm_gbps * 1e9 : 0;
        json_t *k = json_pack("{s:s,s:i,s:f,s:f,s:f,s:f,s:s}", "class", rv_flops_class_name(cls),
                              "bucket", rv_keff_bucket(cls, f->flops[i], f->bytes[i]), "eff",
                              roof > 0 ? roof / s : 0.0, "us", s * 1e6, "flops", f->flops[i],
                              "bytes", f->bytes[i], "dtype", rv_dtype_name(dt));
        /* The roofline's two sides at that dtype, for the tensor-core fit. */
        if (k && peak > 0 && bw > 0) {
            json_object_set_new(k, "compute_us", json_real(f->flops[i] / peak * 1e6));
            json_object_set_new(k, "memory_us", json_real(f->bytes[i] / bw * 1e6));
        }
        json_array_append_new(a, k);
    }
    return a;
}

int rv_cmd_kernels(int argc, char **argv)
{
    const char *path = NULL, *et_path = NULL, *to[MAX_TO], *fit_path = NULL, *fit_et = NULL;
    int nto = 0, status = 1, want_eff = 0;
    rv_graph *g = NULL;
    rv_trace *t = NULL, *t2 = NULL;
    rv_et_join join = {0}, join2 = {0};
    rv_flops_trace f = {0}, f2 = {0};
    json_t *out = NULL;
    rv_error err;
    rv_error_clear(&err);
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(argv[i], "--efficiencies")) {
            want_eff = 1;
        } else if (i + 1 < argc && !strcmp(argv[i], "--et")) {
            et_path = argv[++i];
        } else if (i + 1 < argc && !strcmp(argv[i], "--fit")) {
            fit_path = argv[++i];
        } else if (i + 1 < argc && !strcmp(argv[i], "--fit-et")) {
            fit_et = argv[++i];
        } else if (i + 1 < argc && !strcmp(argv[i], "--to")) {
            if (nto == MAX_TO || !rv_hw_lookup(argv[i + 1])) {
                fprintf(stderr, "reverie: --to wants a GPU of the hardware table (at most %d)\n",
                        MAX_TO);
                return 2;
            }
            to[nto++] = argv[++i];
        } else if (!path && argv[i][0] != '-') {
            path = argv[i];
        } else {
            usage(stderr);
            return 2;
        }
    }
    if (!path || (fit_et && !fit_path)) {
        usage(stderr);
        return 2;
    }
    if (rv_cli_load_costed(path, et_path, &t, &join, &f) != 0)
        goto out;
    const char *gpu = rv_trace_str(t, t->platform_gpu);
    const rv_hw *hw = rv_hw_lookup(gpu);
    if (!hw) {
        fprintf(stderr, "reverie: %s: the trace's GPU (%s) is not in the hardware table\n", path,
                gpu[0] ? gpu : "none named");
        goto out;
    }
    if (t->nop_shapes == 0) {
        fprintf(stderr,
                "reverie: %s: no op shapes (record_shapes=True, or give the execution trace "
                "with --et)\n",
                path);
        goto out;
    }
    rv_kmodel m, roof;
    size_t mod = 2, rem = 1; /* held out: every other kernel */
    if (fit_path) {
        if (rv_cli_load_costed(fit_path, fit_et, &t2, &join2, &f2) != 0)
            goto out;
        if (rv_hw_lookup(rv_trace_str(t2, t2->platform_gpu)) != hw) {
            fprintf(stderr, "reverie: %s: --fit wants a trace of the same GPU (%s)\n", fit_path,
                    hw->name);
            goto out;
        }
        rv_kmodel_fit(&m, t2, &f2, hw, 1, 0);
        mod = 1;
        rem = 0;
    } else {
        rv_kmodel_fit(&m, t, &f, hw, 2, 0);
    }
    memset(&roof, 0, sizeof(roof));
    roof.hw = hw;
    for (int k = 1; k < RV_FC_COUNT; k++)
        roof.cls_eff[k] = 1;
    double gm[RV_FC_COUNT], gr[RV_FC_COUNT];
    size_t n[RV_FC_COUNT], nr[RV_FC_COUNT];
    rv_kmodel_error(&m, t, &f, mod, rem, gm, n);
    rv_kmodel_error(&roof, t, &f, mod, rem, gr, nr);
    json_t *cls = json_array(), *resc = json_array();
    for (int k = 1; k < RV_FC_COUNT; k++)
        if (n[k])
            json_array_append_new(cls,
                                  json_pack("{s:s,s:I,s:f,s:f}", "class", rv_flops_class_name(k),
                                            "kernels_held_out", (json_int_t)n[k], "model_error",
                                            gm[k], "roofline_error", gr[k]));
    if (nto > 0 && rv_graph_build(t, NULL, &g, &err) != 0) {
        fprintf(stderr, "reverie: %s: %s\n", path,
                err.message[0] ? err.message : rv_err_name(err.code));
        goto out;
    }
    for (int i = 0; i < nto; i++) {
        json_t *r = rescaled(g, rv_hw_lookup(to[i]), &err);
        if (!r) {
            fprintf(stderr, "reverie: %s: %s\n", path,
                    err.message[0] ? err.message : rv_err_name(err.code));
            json_decref(cls);
            json_decref(resc);
            goto out;
        }
        json_array_append_new(resc, r);
    }
    out = json_pack("{s:s,s:s,s:s,s:o,s:o}", "trace", path, "platform", gpu, "hw", hw->name,
                    "classes", cls, "rescaled", resc);
    if (out && fit_path)
        json_object_set_new(out, "fitted_on", json_string(fit_path));
    if (out && want_eff)
        json_object_set_new(out, "kernels", efficiencies(t, &f, hw));
    if (!out || json_dumpf(out, stdout, JSON_INDENT(2)) != 0) {
        fprintf(stderr, "reverie: cannot write the answer\n");
        goto out;
    }
    fputc('\n', stdout);
    status = 0;
out:
    json_decref(out);
    rv_flops_trace_free(&f);
    rv_flops_trace_free(&f2);
    rv_et_join_free(&join);
    rv_et_join_free(&join2);
    rv_graph_free(g);
    rv_trace_free(t);
    rv_trace_free(t2);
    return status;
}
