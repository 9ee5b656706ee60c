/* A platform's kernel model, kept as sums that merge: per kernel class and
 * size bucket, the number of fitted kernels and the sum of the log of their
 * efficiency (roofline / measured). The model's efficiency is the geometric
 * mean; adding a trace and removing it again are exact, so the store keeps
 * one per trace and their sum per platform. See docs/models/kernels.md
 * ("Platform models"). */
#ifndef RV_KMODEL_ACC_H
#define RV_KMODEL_ACC_H

#include <jansson.h>

#include "util/rv_error.h"
#include "cost/rv_kmodel.h"

typedef struct rv_kmodel_acc {
    double n[RV_FC_COUNT][RV_KMODEL_BUCKETS];    /* kernels */
    double slog[RV_FC_COUNT][RV_KMODEL_BUCKETS]; /* sum of ln(efficiency) */
} rv_kmodel_acc;

/* Adds the costed kernels of t (f from rv_flops_of_trace) measured on hw.
 * Returns the kernels added (0 without hw). */
size_t rv_kmodel_acc_add_trace(rv_kmodel_acc *a, const rv_trace *t, const rv_flops_trace *f,
                               const rv_hw *hw);

/* a += sign * b; a count that falls to (about) zero empties its bucket. */
void rv_kmodel_acc_merge(rv_kmodel_acc *a, const rv_kmodel_acc *b, double sign);

/* Total kernels in a. */
double rv_kmodel_acc_count(const rv_kmodel_acc *a);

/* {"CLASS": [[bucket, n, slog], ...], ...} for the non-empty buckets; new
 * reference, NULL on OOM. */
json_t *rv_kmodel_acc_to_json(const rv_kmodel_acc *a);

/* Adds n kernels of class cls (its name, rv_flops_class_name) with slog
 * the sum of their log efficiency to bucket. A name that is no class, a
 * bucket out of range, a negative or huge count or a non-finite sum gives
 * RV_ERR_INVALID (err may be NULL) and changes nothing. */
int rv_kmodel_acc_add_bucket(rv_kmodel_acc *a, const char *cls, long long bucket, double n,
                             double slog, rv_error *err);

/* Reads rv_kmodel_acc_to_json's form into *a (zeroed first). A malformed
 * document gives RV_ERR_INVALID naming what is wrong. */
int rv_kmodel_acc_from_json(rv_kmodel_acc *a, const json_t *j, rv_error *err);

/* a for people: [{class, kernels, efficiency, size_unit, buckets: [{from,
 * to, kernels, efficiency}]}] with each bucket's size range [from, to)
 * in FLOPs (GEMM, conv, attention) or bytes (the rest). New reference, NULL
 * on OOM. */
json_t *rv_kmodel_acc_render(const rv_kmodel_acc *a);

/* The model of a's geometric means on hw (borrowed). */
void rv_kmodel_from_acc(rv_kmodel *m, const rv_kmodel_acc *a, const rv_hw *hw);

/* Fills the empty buckets and classes of m from `from` (fitted on the same
 * GPU). Returns the buckets filled. */
size_t rv_kmodel_fill(rv_kmodel *m, const rv_kmodel *from);

#endif
