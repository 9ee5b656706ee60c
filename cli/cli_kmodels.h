/* --kernel-models-from for `reverie simulate` (cli/cli_kmodels.c). */
#ifndef RV_CLI_KMODELS_H
#define RV_CLI_KMODELS_H

#include "reader/rv_et.h"
#include "cost/rv_flops.h"
#include "hw/rv_hw.h"
#include "cost/rv_kmodel_acc.h"

/* Loads the trace at path (*t new, rv_trace_free), joins the execution
 * trace et to it when given (*join, rv_et_join_free) and costs its ops (*f,
 * zeroed first; rv_flops_trace_free). 0, or -1 with the reason printed;
 * what was made is the caller's to free either way. */
int rv_cli_load_costed(const char *path, const char *et, rv_trace **t, rv_et_join *join,
                       rv_flops_trace *f);

/* The kernel-model sums of the traces paths[0..n) (ets[i], may be NULL:
 * the execution trace joined to paths[i] for its shapes), each fitted on
 * its own GPU: those that ran on `own` into *a_own, on `target` into
 * *a_target (both zeroed first; own and target may be NULL). A trace of
 * another GPU, or without a costed kernel, is refused with the reason
 * printed. 0 or -1. */
int rv_cli_fit_kmodels(const char *const *paths, const char *const *ets, int n, const rv_hw *own,
                       const rv_hw *target, rv_kmodel_acc *a_own, rv_kmodel_acc *a_target);

#endif
