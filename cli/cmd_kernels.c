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
#include "cost/rv_kmodel.h"

enum { MAX_TO = 16 };

static void usage(FILE *f)
{
    fprintf(f, "usage: reverie kernels TRACE [--et EXECUTION_TRACE] [--fit TRACE2 [--fit-et ET2]]\n"
               "                       [--to GPU]...\n"
               "\n"
               "Per kernel class: kernels held out, the fitted model's and the bare\n"
               "roofline's geometric-mean error on them. --fit: the model is fitted on\n"
               "every costed kernel of TRACE2 (same GPU) and measured on all of TRACE's.\n"
               "--to GPU (repeatable, a name of\n"
               "the hardware table): the trace's kernel time rescaled to that GPU, fp32\n"
               "GEMM/conv/attention as TF32 where it has it.\n");
}

/* Kernel time of t as measured and rescaled to `to`, in ms. */
static json_t *rescaled(const rv_trace *t, const rv_flops_trace *f, const rv_hw *from,
                        const rv_hw *to)
{
    double meas = 0, pred = 0;
    for (size_t i = 0; i < t->nevents; i++) {
        const rv_event *e = &t->events[i];
        if (!rv_cat_is_gpu_task(e->cat) || e->dur_ns <= 0)
            continue;
        double s = (double)e->dur_ns * 1e-9;
        meas += s;
        pred += e->cat == RV_CAT_KERNEL ? rv_kmodel_rescale_s(from, to, f->cls[i], f->ptype[i],
                                                              f->flops[i], f->bytes[i], s, 1)
                                        : s;
    }
    return json_pack("{s:s,s:f,s:f}", "gpu", to->name, "kernel_ms", meas * 1e3, "predicted_ms",
                     pred * 1e3);
}

int rv_cmd_kernels(int argc, char **argv)
{
    const char *path = NULL, *et_path = NULL, *to[MAX_TO], *fit_path = NULL, *fit_et = NULL;
    int nto = 0, status = 1;
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
    for (int i = 0; i < nto; i++)
        json_array_append_new(resc, rescaled(t, &f, hw, rv_hw_lookup(to[i])));
    out = json_pack("{s:s,s:s,s:s,s:o,s:o}", "trace", path, "platform", gpu, "hw", hw->name,
                    "classes", cls, "rescaled", resc);
    if (out && fit_path)
        json_object_set_new(out, "fitted_on", json_string(fit_path));
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
    rv_trace_free(t);
    rv_trace_free(t2);
    return status;
}
