/* --kernel-models-from: kernel models fitted on measured traces, for the
 * CLI's "kernel_models": "platform" and for an execution trace alone (the
 * service takes them from its store instead). */
#include "cli_kmodels.h"

#include <stdio.h>
#include <string.h>

#include "rv_cli.h"
#include "cost/rv_flops.h"

int rv_cli_load_costed(const char *path, const char *et, rv_trace **t, rv_et_join *join,
                       rv_flops_trace *f)
{
    rv_error err;
    memset(f, 0, sizeof(*f));
    if (rv_cli_load_trace(path, t, &err) != 0) {
        fprintf(stderr, "reverie: %s: %s\n", path, err.message);
        return -1;
    }
    if (et && rv_cli_attach_et(et, *t, join) != 0)
        return -1;
    if (rv_flops_of_trace(*t, f) != 0) {
        fprintf(stderr, "reverie: out of memory\n");
        return -1;
    }
    return 0;
}

static int fit_one(const char *path, const char *et, const rv_hw *own, const rv_hw *target,
                   rv_kmodel_acc *a_own, rv_kmodel_acc *a_target)
{
    rv_trace *t = NULL;
    rv_et_join join = {0};
    rv_flops_trace f;
    int rc = -1;
    if (rv_cli_load_costed(path, et, &t, &join, &f) != 0)
        goto out;
    const char *gpu = rv_trace_str(t, t->platform_gpu);
    const rv_hw *hw = rv_hw_lookup(gpu);
    rv_kmodel_acc *into = hw && hw == own ? a_own : hw && hw == target ? a_target : NULL;
    if (!into) {
        fprintf(stderr,
                "reverie: --kernel-models-from %s ran on %s, which is neither the simulated "
                "trace's GPU nor the what-if's gpu\n",
                path, gpu[0] ? gpu : "an unknown GPU");
        goto out;
    }
    if (rv_kmodel_acc_add_trace(into, t, &f, hw) == 0) {
        fprintf(stderr,
                "reverie: --kernel-models-from %s: no kernel has a cost from op shapes "
                "(record_shapes=True, or --kernel-models-et with its execution trace)\n",
                path);
        goto out;
    }
    rc = 0;
out:
    rv_flops_trace_free(&f);
    rv_et_join_free(&join);
    rv_trace_free(t);
    return rc;
}

int rv_cli_fit_kmodels(const char *const *paths, const char *const *ets, int n, const rv_hw *own,
                       const rv_hw *target, rv_kmodel_acc *a_own, rv_kmodel_acc *a_target)
{
    memset(a_own, 0, sizeof(*a_own));
    memset(a_target, 0, sizeof(*a_target));
    for (int i = 0; i < n; i++)
        if (fit_one(paths[i], ets[i], own, target, a_own, a_target) != 0)
            return -1;
    return 0;
}
