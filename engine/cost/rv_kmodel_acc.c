/* Mergeable kernel-model sums; see rv_kmodel_acc.h. */
#include "cost/rv_kmodel_acc.h"

#include <math.h>
#include <string.h>

/* Below this a bucket's count is rounding left by a removal. */
#define RV_KACC_EMPTY 0.5

size_t rv_kmodel_acc_add_trace(rv_kmodel_acc *a, const rv_trace *t, const rv_flops_trace *f,
                               const rv_hw *hw)
{
    size_t added = 0;
    if (!hw || !t || !f)
        return 0;
    for (size_t i = 0; i < t->nevents; i++) {
        int cls = 0, b = 0;
        double eff = rv_kmodel_event_eff(t, f, hw, i, &cls, &b);
        if (eff <= 0)
            continue;
        a->n[cls][b] += 1;
        a->slog[cls][b] += log(eff);
        added++;
    }
    return added;
}

void rv_kmodel_acc_merge(rv_kmodel_acc *a, const rv_kmodel_acc *b, double sign)
{
    for (int c = 0; c < RV_FC_COUNT; c++)
        for (int k = 0; k < RV_KMODEL_BUCKETS; k++) {
            a->n[c][k] += sign * b->n[c][k];
            a->slog[c][k] += sign * b->slog[c][k];
            if (a->n[c][k] < RV_KACC_EMPTY)
                a->n[c][k] = a->slog[c][k] = 0;
        }
}

double rv_kmodel_acc_count(const rv_kmodel_acc *a)
{
    double s = 0;
    for (int c = 0; c < RV_FC_COUNT; c++)
        for (int k = 0; k < RV_KMODEL_BUCKETS; k++)
            s += a->n[c][k];
    return s;
}

json_t *rv_kmodel_acc_to_json(const rv_kmodel_acc *a)
{
    json_t *o = json_object();
    for (int c = 1; o && c < RV_FC_COUNT; c++) {
        json_t *rows = NULL;
        for (int k = 0; k < RV_KMODEL_BUCKETS; k++) {
            if (a->n[c][k] < RV_KACC_EMPTY)
                continue;
            if (!rows && (rows = json_array()) == NULL)
                goto oom;
            if (json_array_append_new(rows, json_pack("[i,f,f]", k, a->n[c][k], a->slog[c][k])))
                goto oom_rows;
        }
        if (rows && json_object_set_new(o, rv_flops_class_name(c), rows))
            goto oom;
        continue;
    oom_rows:
        json_decref(rows);
        goto oom;
    }
    return o;
oom:
    json_decref(o);
    return NULL;
}

static int class_of_name(const char *name)
{
    for (int c = 1; c < RV_FC_COUNT; c++)
        if (!strcmp(rv_flops_class_name(c), name))
            return c;
    return RV_FC_NONE;
}

int rv_kmodel_acc_add_bucket(rv_kmodel_acc *a, const char *cls, long long bucket, double n,
                             double slog, rv_error *err)
{
    int c = class_of_name(cls);
    if (c == RV_FC_NONE)
        return rv_error_set(err, RV_ERR_INVALID, -1, -1,
                            "kernel model: \"%.64s\" is not a kernel class", cls);
    if (bucket < 0 || bucket >= RV_KMODEL_BUCKETS || !(n >= 0 && n < 1e15) || !isfinite(slog))
        return rv_error_set(err, RV_ERR_INVALID, -1, -1,
                            "kernel model: %s bucket %lld is not [bucket 0-%d, count, sum]", cls,
                            bucket, RV_KMODEL_BUCKETS - 1);
    a->n[c][bucket] += n;
    a->slog[c][bucket] += slog;
    return 0;
}

int rv_kmodel_acc_from_json(rv_kmodel_acc *a, const json_t *j, rv_error *err)
{
    const char *key;
    json_t *rows;
    memset(a, 0, sizeof(*a));
    if (!json_is_object(j))
        return rv_error_set(err, RV_ERR_INVALID, -1, -1, "kernel model: not an object");
    json_object_foreach((json_t *)j, key, rows)
    {
        size_t i;
        json_t *r;
        if (class_of_name(key) == RV_FC_NONE || !json_is_array(rows))
            return rv_error_set(err, RV_ERR_INVALID, -1, -1,
                                "kernel model: \"%s\" is not a kernel class with a list", key);
        json_array_foreach(rows, i, r)
        {
            json_t *b = json_array_get(r, 0), *n = json_array_get(r, 1), *s = json_array_get(r, 2);
            if (!json_is_integer(b) || !json_is_number(n) || !json_is_number(s) ||
                rv_kmodel_acc_add_bucket(a, key, json_integer_value(b), json_number_value(n),
                                         json_number_value(s), NULL) != 0)
                return rv_error_set(err, RV_ERR_INVALID, -1, (int64_t)i,
                                    "kernel model: %s[%zu] is not [bucket 0-%d, count, sum]", key,
                                    i, RV_KMODEL_BUCKETS - 1);
        }
    }
    return 0;
}

json_t *rv_kmodel_acc_render(const rv_kmodel_acc *a)
{
    json_t *out = json_array();
    for (int c = 1; out && c < RV_FC_COUNT; c++) {
        double n = 0, s = 0;
        json_t *bk = json_array();
        for (int k = 0; bk && k < RV_KMODEL_BUCKETS; k++) {
            if (a->n[c][k] < RV_KACC_EMPTY)
                continue;
            n += a->n[c][k];
            s += a->slog[c][k];
            json_array_append_new(bk, json_pack("{s:f,s:f,s:I,s:f}", "from", ldexp(1, k), "to",
                                                ldexp(1, k + 1), "kernels",
                                                (json_int_t)llround(a->n[c][k]), "efficiency",
                                                exp(a->slog[c][k] / a->n[c][k])));
        }
        if (!bk || n <= 0) {
            json_decref(bk);
            continue;
        }
        int flops = c == RV_FC_GEMM || c == RV_FC_CONV || c == RV_FC_ATTN;
        json_array_append_new(out,
                              json_pack("{s:s,s:I,s:f,s:s,s:o}", "class", rv_flops_class_name(c),
                                        "kernels", (json_int_t)llround(n), "efficiency", exp(s / n),
                                        "size_unit", flops ? "flops" : "bytes", "buckets", bk));
    }
    return out;
}

void rv_kmodel_from_acc(rv_kmodel *m, const rv_kmodel_acc *a, const rv_hw *hw)
{
    memset(m, 0, sizeof(*m));
    m->hw = hw;
    for (int c = 1; c < RV_FC_COUNT; c++) {
        double n = 0, s = 0;
        for (int k = 0; k < RV_KMODEL_BUCKETS; k++) {
            if (a->n[c][k] < RV_KACC_EMPTY)
                continue;
            m->eff[c][k] = exp(a->slog[c][k] / a->n[c][k]);
            n += a->n[c][k];
            s += a->slog[c][k];
        }
        m->n[c] = (size_t)llround(n);
        m->cls_eff[c] = n > 0 ? exp(s / n) : 0;
    }
}

size_t rv_kmodel_fill(rv_kmodel *m, const rv_kmodel *from)
{
    size_t filled = 0;
    if (!from)
        return 0;
    for (int c = 1; c < RV_FC_COUNT; c++) {
        for (int k = 0; k < RV_KMODEL_BUCKETS; k++)
            if (m->eff[c][k] <= 0 && from->eff[c][k] > 0) {
                m->eff[c][k] = from->eff[c][k];
                filled++;
            }
        if (m->cls_eff[c] <= 0)
            m->cls_eff[c] = from->cls_eff[c];
    }
    return filled;
}
