/* Trace diff: per-iteration op, kernel-class and kernel tables of two runs. */
#include "export/rv_diff.h"

#include "run/rv_run.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Per-side sums, indexed by string id of the side's trace. */
typedef struct side_sums {
    size_t nstr;
    double *op_cnt, *op_cpu, *op_gpu; /* nstr each */
    double *k_cnt, *k_time;           /* nstr each */
    double c_cnt[RV_KC_COUNT], c_time[RV_KC_COUNT];
} side_sums;

/* One named figure of one side, before the two sides are joined. */
typedef struct entry {
    const char *name; /* borrowed from a trace */
    int side;         /* 0: A, 1: B */
    double cnt, time, cpu, gpu;
} entry;

static void sums_free(side_sums *x)
{
    free(x->op_cnt);
    free(x->op_cpu);
    free(x->op_gpu);
    free(x->k_cnt);
    free(x->k_time);
}

/* The data-loading op of a trace: loading time sits in task gaps
 * (rv_task.gap_dl_ns) and is charged to this name. 0 when none. */
static uint32_t dataloader_name(const rv_trace *t)
{
    static const char *const marks[] = {"enumerate(DataLoader)", "DataLoader"};
    for (size_t m = 0; m < sizeof(marks) / sizeof(marks[0]); m++)
        for (uint32_t id = 1; id < t->strings.count; id++)
            if (strstr(rv_strtab_get(&t->strings, id), marks[m]))
                return id;
    return 0;
}

static uint32_t op_key(const rv_graph *g, const rv_task *t, size_t nstr)
{
    uint32_t k = t->kind == RV_TASK_DATA ? t->name : (t->layer ? t->layer : t->op);
    return k < nstr ? k : 0;
}

static int in_window(const rv_sim *s, const rv_window *w, size_t i)
{
    return s->start_ns[i] >= w->t0_ns && s->start_ns[i] < w->t1_ns;
}

/* Counts one entry into op k on CPU thread th: a new visit when the thread
 * was in another op before. */
static void op_enter(side_sums *x, uint32_t *last, int32_t th, uint32_t k)
{
    if (last[th] != k + 1) {
        x->op_cnt[k] += 1;
        last[th] = k + 1;
    }
}

static int side_collect(const rv_diff_side *sd, side_sums *x)
{
    const rv_graph *g = sd->g;
    const rv_sim *s = sd->s;
    uint32_t *last = NULL;
    int rc = RV_ERR_NOMEM;

    x->nstr = g->trace->strings.count ? g->trace->strings.count : 1;
    x->op_cnt = calloc(x->nstr, sizeof(double));
    x->op_cpu = calloc(x->nstr, sizeof(double));
    x->op_gpu = calloc(x->nstr, sizeof(double));
    x->k_cnt = calloc(x->nstr, sizeof(double));
    x->k_time = calloc(x->nstr, sizeof(double));
    last = calloc(g->nthreads ? g->nthreads : 1, sizeof(*last));
    if (!x->op_cnt || !x->op_cpu || !x->op_gpu || !x->k_cnt || !x->k_time || !last)
        goto out;
    uint32_t dl = dataloader_name(g->trace);
    for (size_t i = 0; i < g->ntasks && i < s->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if ((t->flags & RV_TF_REMOVED) || !in_window(s, &sd->w, i))
            continue;
        uint32_t k = op_key(g, t, x->nstr);
        if (t->kind == RV_TASK_CPU || t->kind == RV_TASK_DATA) {
            int64_t own = t->gap_ns - t->gap_dl_ns;
            op_enter(x, last, t->thread, k);
            x->op_cpu[k] += (double)t->dur_ns + (double)(own > 0 ? own : 0);
            if (t->gap_dl_ns > 0) {
                uint32_t d = dl && dl < x->nstr ? dl : k;
                op_enter(x, last, t->thread, d);
                x->op_cpu[d] += (double)t->gap_dl_ns;
            }
            continue;
        }
        uint32_t n = t->name < x->nstr ? t->name : 0;
        int c = rv_kclass_of_task(g, i);
        if (c < 0 || c >= RV_KC_COUNT)
            c = RV_KC_OTHER;
        x->k_cnt[n] += 1;
        x->k_time[n] += (double)t->dur_ns;
        x->c_cnt[c] += 1;
        x->c_time[c] += (double)t->dur_ns;
        x->op_gpu[k] += (double)t->dur_ns;
    }
    rc = 0;
out:
    free(last);
    return rc;
}

static int cmp_entry(const void *pa, const void *pb)
{
    const entry *a = pa, *b = pb;
    int c = strcmp(a->name, b->name);
    return c ? c : a->side - b->side;
}

static int cmp_row(const void *pa, const void *pb)
{
    const rv_diff_row *a = pa, *b = pb;
    double x = fabs(a->delta_us), y = fabs(b->delta_us);
    if (x != y)
        return x < y ? 1 : -1;
    return strcmp(a->name, b->name);
}

static int row_status(const rv_diff_row *r)
{
    int in_a = r->count_a > 0 || r->time_us_a > 0, in_b = r->count_b > 0 || r->time_us_b > 0;
    if (in_a && !in_b)
        return RV_DIFF_VANISHED;
    if (in_b && !in_a)
        return RV_DIFF_APPEARED;
    if (r->count_a != r->count_b || fabs(r->delta_us) >= 0.0005)
        return RV_DIFF_CHANGED;
    return RV_DIFF_SAME;
}

static void row_add(rv_diff_row *r, const entry *e, double per)
{
    double cnt = e->cnt / per, time = e->time / per / 1000.0;
    double cpu = e->cpu / per / 1000.0, gpu = e->gpu / per / 1000.0;
    if (e->side == 0) {
        r->count_a = cnt;
        r->time_us_a = time;
        r->cpu_us_a = cpu;
        r->gpu_us_a = gpu;
    } else {
        r->count_b = cnt;
        r->time_us_b = time;
        r->cpu_us_b = cpu;
        r->gpu_us_b = gpu;
    }
}

/* Joins the two sides' entries by name into rows (*rows new, sorted by
 * impact). Takes ents (sorted here, freed by the caller). */
static int join(entry *ents, size_t n, const double per[2], rv_diff_row **rows, size_t *nrows)
{
    rv_diff_row *out = NULL;
    size_t m = 0;

    *rows = NULL;
    *nrows = 0;
    if (n == 0)
        return 0;
    qsort(ents, n, sizeof(*ents), cmp_entry);
    out = calloc(n, sizeof(*out));
    if (!out)
        return RV_ERR_NOMEM;
    for (size_t i = 0; i < n; i++) {
        if (i == 0 || strcmp(ents[i].name, ents[i - 1].name) != 0) {
            out[m].name = strdup(ents[i].name);
            if (!out[m].name) {
                for (size_t j = 0; j < m; j++)
                    free(out[j].name);
                free(out);
                return RV_ERR_NOMEM;
            }
            m++;
        }
        row_add(&out[m - 1], &ents[i], per[ents[i].side]);
    }
    for (size_t i = 0; i < m; i++) {
        out[i].delta_us = out[i].time_us_b - out[i].time_us_a;
        out[i].status = row_status(&out[i]);
    }
    qsort(out, m, sizeof(*out), cmp_row);
    *rows = out;
    *nrows = m;
    return 0;
}

/* The entries of one table (ops when ops, else kernels) of both sides. */
static int gather(const rv_diff_side *sd[2], const side_sums x[2], int ops, entry **out, size_t *n)
{
    size_t cap = x[0].nstr + x[1].nstr, k = 0;
    entry *e = calloc(cap ? cap : 1, sizeof(*e));
    if (!e)
        return RV_ERR_NOMEM;
    for (int si = 0; si < 2; si++) {
        const rv_trace *tr = sd[si]->g->trace;
        for (size_t id = 0; id < x[si].nstr; id++) {
            double cnt = ops ? x[si].op_cnt[id] : x[si].k_cnt[id];
            double time = ops ? x[si].op_cpu[id] + x[si].op_gpu[id] : x[si].k_time[id];
            if (cnt <= 0 && time <= 0)
                continue;
            const char *name = rv_strtab_get(&tr->strings, (uint32_t)id);
            if (!name || !name[0])
                name = ops ? RV_DIFF_NO_OP : "(unnamed)";
            e[k].name = name;
            e[k].side = si;
            e[k].cnt = cnt;
            e[k].time = time;
            e[k].cpu = ops ? x[si].op_cpu[id] : 0;
            e[k].gpu = ops ? x[si].op_gpu[id] : 0;
            k++;
        }
    }
    *out = e;
    *n = k;
    return 0;
}

int rv_diff_compute(const rv_diff_side *a, const rv_diff_side *b, rv_diff **out, rv_error *err)
{
    side_sums x[2];
    const rv_diff_side *sd[2] = {a, b};
    entry *ents = NULL;
    size_t n = 0;
    rv_diff *d = NULL;
    int rc = RV_ERR_NOMEM;

    memset(x, 0, sizeof(x));
    *out = NULL;
    if (!a || !b || !a->g || !a->s || !b->g || !b->s || !a->g->trace || !b->g->trace)
        return rv_error_set(err, RV_ERR_INVALID, -1, -1, "diff: a side has no graph or simulation");
    d = calloc(1, sizeof(*d));
    if (!d)
        goto out;
    double per[2] = {a->w.per > 0 ? a->w.per : 1, b->w.per > 0 ? b->w.per : 1};
    for (int si = 0; si < 2; si++)
        if (side_collect(sd[si], &x[si]) != 0)
            goto out;
    if (gather(sd, x, 1, &ents, &n) != 0 || join(ents, n, per, &d->ops, &d->nops) != 0)
        goto out;
    free(ents);
    ents = NULL;
    if (gather(sd, x, 0, &ents, &n) != 0 || join(ents, n, per, &d->kernels, &d->nkernels) != 0)
        goto out;
    for (int c = 0; c < RV_KC_COUNT; c++) {
        rv_diff_row *r = &d->classes[c];
        r->name = (char *)rv_kname_class_name(c);
        r->count_a = x[0].c_cnt[c] / per[0];
        r->count_b = x[1].c_cnt[c] / per[1];
        r->time_us_a = x[0].c_time[c] / per[0] / 1000.0;
        r->time_us_b = x[1].c_time[c] / per[1] / 1000.0;
        r->delta_us = r->time_us_b - r->time_us_a;
        r->status = row_status(r);
    }
    qsort(d->classes, RV_KC_COUNT, sizeof(d->classes[0]), cmp_row);
    d->iteration_us_a = a->iteration_us;
    d->iteration_us_b = b->iteration_us;
    d->measured_us_a = a->measured_us;
    d->measured_us_b = b->measured_us;
    d->iterations_a = per[0];
    d->iterations_b = per[1];
    *out = d;
    d = NULL;
    rc = 0;
out:
    if (rc != 0)
        rv_error_set(err, rc, -1, -1, "diff: out of memory");
    free(ents);
    sums_free(&x[0]);
    sums_free(&x[1]);
    rv_diff_free(d);
    return rc;
}

void rv_diff_free(rv_diff *d)
{
    if (!d)
        return;
    for (size_t i = 0; i < d->nops; i++)
        free(d->ops[i].name);
    for (size_t i = 0; i < d->nkernels; i++)
        free(d->kernels[i].name);
    free(d->ops);
    free(d->kernels);
    free(d);
}

const char *rv_diff_status_name(int status)
{
    switch (status) {
    case RV_DIFF_CHANGED: return "changed";
    case RV_DIFF_APPEARED: return "appeared";
    case RV_DIFF_VANISHED: return "vanished";
    default: return "same";
    }
}

/* Rounds to 1 ns (3 decimals of a microsecond) so answers stay stable. */
static double r3(double v)
{
    return round(v * 1000.0) / 1000.0;
}

static json_t *row_json(const rv_diff_row *r, int op)
{
    json_t *o = json_pack("{s:s, s:s, s:f, s:f, s:f, s:f, s:f}", "name", r->name, "status",
                          rv_diff_status_name(r->status), "count_a", r3(r->count_a), "count_b",
                          r3(r->count_b), "time_us_a", r3(r->time_us_a), "time_us_b",
                          r3(r->time_us_b), "delta_us", r3(r->delta_us));
    if (o && op &&
        (json_object_set_new(o, "cpu_us_a", json_real(r3(r->cpu_us_a))) != 0 ||
         json_object_set_new(o, "cpu_us_b", json_real(r3(r->cpu_us_b))) != 0 ||
         json_object_set_new(o, "gpu_us_a", json_real(r3(r->gpu_us_a))) != 0 ||
         json_object_set_new(o, "gpu_us_b", json_real(r3(r->gpu_us_b))) != 0)) {
        json_decref(o);
        return NULL;
    }
    return o;
}

static json_t *table_json(const rv_diff_row *rows, size_t n, size_t top, int op)
{
    json_t *arr = json_array();
    size_t shown = n < top ? n : top;
    if (!arr)
        return NULL;
    for (size_t i = 0; i < shown; i++)
        if (json_array_append_new(arr, row_json(&rows[i], op)) != 0) {
            json_decref(arr);
            return NULL;
        }
    return json_pack("{s:I, s:o}", "total", (json_int_t)n, "rows", arr);
}

static json_t *side_json(const char *label, double iter_us, double meas_us, double per)
{
    /* A prediction (or a modelled trace) measured nothing: null, not 0. */
    json_t *o = json_pack("{s:f, s:o, s:f}", "iteration_us", r3(iter_us), "measured_us",
                          meas_us > 0 ? json_real(r3(meas_us)) : json_null(), "iterations", per);
    if (o && label && json_object_set_new(o, "label", json_string(label)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

/* A side replayed more than 2% off its measurement: its figures carry
 * that error. */
static void warn_replay(json_t *arr, const char *side, double sim_us, double meas_us)
{
    double err = meas_us > 0 ? fabs(sim_us - meas_us) / meas_us : 0;
    char msg[200];
    if (err <= 0.02)
        return;
    snprintf(msg, sizeof(msg),
             "side %s replays its measured step %.1f%% off: its figures carry at least that "
             "error",
             side, err * 100);
    json_array_append_new(arr, json_pack("{s:s,s:s}", "code", "replay_error", "message", msg));
}

/* Counts are per iteration over the window's steps: an op that ran a
 * number of times not divisible by them reads fractional. Say why once. */
static void warn_fractional(json_t *arr, const rv_diff *d)
{
    const rv_diff_row *sets[2] = {d->ops, d->kernels};
    size_t ns[2] = {d->nops, d->nkernels};
    for (int k = 0; k < 2; k++)
        for (size_t i = 0; i < ns[k]; i++) {
            double a = sets[k][i].count_a, b = sets[k][i].count_b;
            if (fabs(a - round(a)) > 1e-6 || fabs(b - round(b)) > 1e-6) {
                char msg[240];
                snprintf(msg, sizeof(msg),
                         "counts are per iteration: totals over the window divided by its %g "
                         "(a) and %g (b) steps, so an op that ran once outside every step, or "
                         "unevenly, reads fractional",
                         d->iterations_a, d->iterations_b);
                json_array_append_new(
                    arr, json_pack("{s:s,s:s}", "code", "counts_per_iteration", "message", msg));
                return;
            }
        }
}

json_t *rv_diff_render(const rv_diff *d, int top, const char *label_a, const char *label_b,
                       const rv_run_result *run)
{
    size_t t = top < 1 ? 1 : (top > RV_DIFF_TOP_MAX ? RV_DIFF_TOP_MAX : (size_t)top);
    json_t *classes = json_array();
    if (!classes)
        return NULL;
    for (int c = 0; c < RV_KC_COUNT; c++)
        if (json_array_append_new(classes, row_json(&d->classes[c], 0)) != 0) {
            json_decref(classes);
            return NULL;
        }
    json_t *warnings = run ? rv_run_warnings_json(run) : json_array();
    if (warnings && !run) {
        warn_replay(warnings, "a", d->iteration_us_a, d->measured_us_a);
        warn_replay(warnings, "b", d->iteration_us_b, d->measured_us_b);
    }
    if (warnings)
        warn_fractional(warnings, d);
    /* "o" takes its references even when packing fails. */
    return json_pack("{s:o, s:o, s:f, s:o, s:o, s:o, s:o*}", "a",
                     side_json(label_a, d->iteration_us_a, d->measured_us_a, d->iterations_a), "b",
                     side_json(label_b, d->iteration_us_b, d->measured_us_b, d->iterations_b),
                     "delta_us", r3(d->iteration_us_b - d->iteration_us_a), "ops",
                     table_json(d->ops, d->nops, t, 1), "kernel_classes", classes, "kernels",
                     table_json(d->kernels, d->nkernels, t, 0), "warnings", warnings);
}

int rv_diff_side_baseline(const rv_graph *g, const rv_sim *s, rv_diff_side *out, rv_error *err)
{
    rv_iter_figures fig;
    int rc = rv_report_iteration(g, s, RV_ITER_MEDIAN, &fig, err);
    if (rc != 0)
        return rc;
    *out = (rv_diff_side){g, s, rv_report_window(g, s, -1), fig.simulated_us, fig.measured_us};
    return 0;
}

void rv_diff_sides_of_run(const rv_run_result *r, rv_diff_side *a, rv_diff_side *b)
{
    *a = (rv_diff_side){r->graph, r->base, r->base_win, r->base_fig.simulated_us,
                        rv_run_modelled(r->graph) ? 0 : r->base_fig.measured_us};
    *b = (rv_diff_side){rv_run_pred_graph(r), rv_run_pred_sim(r), r->pred_win,
                        r->pred_fig.simulated_us, 0};
}
