#include "simulate/rv_power.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "util/rv_sort.h"

void rv_power_init(rv_power_model *m, const rv_hw *hw)
{
    m->tdp_w = hw ? hw->default_pl_w : 300;
    m->min_pl_w = hw ? hw->min_pl_w : 100;
    m->idle_w = hw ? hw->idle_w : 40;
    m->x_min = hw && hw->max_sm_mhz > 0 ? hw->min_sm_mhz / hw->max_sm_mhz : 0.1;
    m->x_knee = 0.85;
    /* P^ as a share of TDP (MODELS.md A3): GEMM/conv 1.1 TDP (they already
     * throttle at the default cap), memory-bound 0.7, collectives and copies
     * 0.45. gamma (A2): GEMM 0.10, memory-bound 0.85, optimizer 0.9,
     * collectives and copies 1 (unaffected by the SM clock). The fit on the
     * Zeus V100 ResNet-50 data used one P^ = 0.9 TDP and gamma = 0.15 for
     * the whole job, which these per-class values bracket. */
    m->demand_frac[RV_KC_OTHER] = 0.70;
    m->demand_frac[RV_KC_GEMM] = 1.10;
    m->demand_frac[RV_KC_MEMBOUND] = 0.70;
    m->demand_frac[RV_KC_OPTIMIZER] = 0.65;
    m->demand_frac[RV_KC_COMM] = 0.45;
    m->demand_frac[RV_KC_MEMCPY] = 0.40;
    m->gamma[RV_KC_OTHER] = 0.85;
    m->gamma[RV_KC_GEMM] = 0.10;
    m->gamma[RV_KC_MEMBOUND] = 0.85;
    m->gamma[RV_KC_OPTIMIZER] = 0.90;
    m->gamma[RV_KC_COMM] = 1.0;
    m->gamma[RV_KC_MEMCPY] = 1.0;
}

double rv_power_demand_w(const rv_power_model *m, int kclass)
{
    if (kclass < 0 || kclass >= RV_KC_COUNT)
        kclass = RV_KC_OTHER;
    return m->demand_frac[kclass] * m->tdp_w;
}

static double h(const rv_power_model *m, double x)
{
    return x >= m->x_knee ? x * x * x : m->x_knee * m->x_knee * x;
}

double rv_power_draw_w(const rv_power_model *m, double demand_w, double x)
{
    if (demand_w <= m->idle_w)
        return demand_w;
    return m->idle_w + (demand_w - m->idle_w) * h(m, x);
}

double rv_power_clock(const rv_power_model *m, double demand_w, double cap_w)
{
    if (demand_w <= cap_w || demand_w <= m->idle_w)
        return 1.0;
    double r = (cap_w - m->idle_w) / (demand_w - m->idle_w);
    if (r <= 0)
        return m->x_min;
    double knee3 = m->x_knee * m->x_knee * m->x_knee;
    /* Invert h: cube root above the knee, linear below it. */
    double x = r >= knee3 ? cbrt(r) : r / (m->x_knee * m->x_knee);
    if (x < m->x_min)
        x = m->x_min;
    return x > 1.0 ? 1.0 : x;
}

double rv_power_time_factor(double gamma, double x)
{
    if (x <= 0)
        x = 1e-3;
    return (1.0 - gamma) / x + gamma;
}

double rv_power_slowdown(const rv_power_model *m, int kclass, double cap_trace_w, double cap_new_w)
{
    if (kclass < 0 || kclass >= RV_KC_COUNT)
        kclass = RV_KC_OTHER;
    double p = rv_power_demand_w(m, kclass);
    double g = m->gamma[kclass];
    double x0 = rv_power_clock(m, p, cap_trace_w);
    double x1 = rv_power_clock(m, p, cap_new_w);
    return rv_power_time_factor(g, x1) / rv_power_time_factor(g, x0);
}

double rv_power_kernel_w(const rv_power_model *m, int kclass, double cap_w)
{
    double p = rv_power_demand_w(m, kclass);
    double w = rv_power_draw_w(m, p, rv_power_clock(m, p, cap_w));
    return w > cap_w ? cap_w : w;
}

/* ---- energy of a simulated window -------------------------------------- */

/* One end of a task's interval. The keys are 64-bit so that rv_sort can
 * order by each of them. */
typedef struct pw_ev {
    uint64_t at; /* (t - t0) * 2 + open (1 start, 0 end): time, ends first */
    double w;    /* power of the interval */
    int64_t dev; /* >= 0 */
} pw_ev;

/* Orders events by device, then time, with ends before starts at equal
 * times: stable linear-time passes, the least significant key first; time
 * and open share one key, which saves a pass. */
static void sort_pw(pw_ev *ev, size_t n)
{
    rv_sort_u64(ev, n, sizeof(*ev), offsetof(pw_ev, at));
    rv_sort_u64(ev, n, sizeof(*ev), offsetof(pw_ev, dev));
}

/* The figures of out from the energy e_j of the ndev devices that ran
 * work over secs. gpus, energy and power count the GPUs the trace's work
 * runs on (those devices, times the GPUs a model-parallel replica spans,
 * each taken to run like the simulated one); the job's figures (times the
 * data-parallel ranks it stands for) are kept apart so a rank of a 64-GPU
 * job does not report 64 GPUs. */
static void energy_figures(const rv_energy_params *p, int ndev, double e_j, double secs,
                           rv_energy *out)
{
    int ranks = p->ranks > 0 ? p->ranks : 1;
    int split = p->replica_gpus > 1 ? p->replica_gpus : 1;
    out->ngpus = ndev * split;
    out->energy_j = e_j * split;
    out->energy_per_gpu_j = e_j / ndev;
    out->avg_power_w = out->energy_j / secs;
    out->avg_power_per_gpu_w = out->avg_power_w / out->ngpus;
    out->ranks = ranks;
    out->job_gpus = out->ngpus * ranks;
    out->job_energy_j = out->energy_j * ranks;
    out->job_avg_power_w = out->avg_power_w * ranks;
    /* Each data-parallel rank runs the batch; a replica's GPUs share it. */
    if (p->batch_size > 0 && out->job_energy_j > 0)
        out->samples_per_j = (double)p->batch_size * ranks / out->job_energy_j;
}

int rv_power_energy(const rv_graph *g, const rv_sim *s, const rv_energy_params *p, int64_t t0_ns,
                    int64_t t1_ns, rv_energy *out)
{
    memset(out, 0, sizeof(*out));
    if (!g || !s || t1_ns <= t0_ns)
        return RV_ERR_INVALID;
    rv_power_model pm;
    rv_power_init(&pm, p->hw);
    double cap = p->cap_w;
    if (cap <= 0)
        cap = pm.tdp_w;
    out->power_limit_w = cap;

    /* Per device: a sweep over task starts and ends charging the highest
     * power among the tasks running (overlap is not additive) and idle
     * power when none is. */
    size_t n = 0;
    pw_ev *ev = malloc((2 * g->ntasks + 1) * sizeof(*ev));
    /* The class of a kernel follows from its name, and its power from the
     * class: both are worked out once per distinct name. */
    uint32_t nstr = g->trace->strings.count;
    uint8_t *cls_of_name = malloc((size_t)nstr + 1); /* 0xff: not worked out yet */
    double pw_of_class[RV_KC_COUNT];
    if (!ev || !cls_of_name) {
        free(ev);
        free(cls_of_name);
        return RV_ERR_NOMEM;
    }
    memset(cls_of_name, 0xff, (size_t)nstr + 1);
    for (int c = 0; c < RV_KC_COUNT; c++)
        pw_of_class[c] = rv_power_kernel_w(&pm, c, cap);
    for (size_t i = 0; i < g->ntasks; i++) {
        const rv_task *t = &g->tasks[i];
        if (t->kind == RV_TASK_CPU || t->kind == RV_TASK_DATA || (t->flags & RV_TF_REMOVED))
            continue;
        int64_t a = s->start_ns[i], b = s->end_ns[i];
        if (b <= t0_ns || a >= t1_ns || b <= a)
            continue;
        a = a < t0_ns ? t0_ns : a;
        b = b > t1_ns ? t1_ns : b;
        int32_t dev = g->threads[t->thread].device;
        if (dev < 0)
            dev = 0;
        int cls;
        if (t->kind == RV_TASK_GPU && t->cat == RV_CAT_KERNEL && !(t->flags & RV_TF_NCCL) &&
            t->name < nstr) {
            if (cls_of_name[t->name] == 0xff)
                cls_of_name[t->name] = (uint8_t)rv_kclass_of_task(g, i);
            cls = cls_of_name[t->name];
        } else {
            cls = rv_kclass_of_task(g, i);
        }
        double pw = pw_of_class[cls];
        /* t0 <= a, b <= t1 and t1 - t0 < 2^63: the keys fit. */
        ev[n++] = (pw_ev){((uint64_t)(a - t0_ns) << 1) | 1, pw, dev};
        ev[n++] = (pw_ev){(uint64_t)(b - t0_ns) << 1, pw, dev};
    }
    sort_pw(ev, n);
    double e_j = 0, bubble_j = 0;
    int ndev = 0;
    size_t i = 0;
    while (i < n) {
        int32_t dev = ev[i].dev;
        ndev++;
        /* Active powers for this device: a small multiset (streams run few
         * tasks at once), kept as counts per distinct value. */
        double vals[64];
        int cnt[64];
        int nv = 0;
        int64_t prev = t0_ns, busy = 0;
        double busy_j = 0;
        for (; i < n && ev[i].dev == dev; i++) {
            double cur = 0;
            for (int k = 0; k < nv; k++)
                if (cnt[k] > 0 && vals[k] > cur)
                    cur = vals[k];
            int64_t t = t0_ns + (int64_t)(ev[i].at >> 1);
            if (nv > 0 && cur > 0) {
                e_j += cur * (double)(t - prev) * 1e-9;
                busy_j += cur * (double)(t - prev) * 1e-9;
                busy += t - prev;
            }
            prev = t;
            int k;
            for (k = 0; k < nv; k++)
                if (vals[k] == ev[i].w)
                    break;
            if (k == nv && nv < 64) {
                vals[nv] = ev[i].w;
                cnt[nv++] = 0;
            }
            if (k < nv)
                cnt[k] += (ev[i].at & 1) ? 1 : -1;
            /* Drop values with no active task so the scan stays short. */
            int any = 0;
            for (int q = 0; q < nv; q++)
                any |= cnt[q] > 0;
            if (!any)
                nv = 0;
        }
        e_j += pm.idle_w * (double)((t1_ns - t0_ns) - busy) * 1e-9;
        /* A pipeline stage idles through its bubble, which the model's
         * stretched tasks hold: that share of the busy time at idle power. */
        bubble_j += busy_j - pm.idle_w * (double)busy * 1e-9;
    }
    free(ev);
    free(cls_of_name);
    if (ndev == 0) {
        ndev = 1;
        e_j = pm.idle_w * (double)(t1_ns - t0_ns) * 1e-9;
    } else if (p->bubble_share > 0 && p->bubble_share < 1) {
        e_j -= p->bubble_share * bubble_j;
    }
    energy_figures(p, ndev, e_j, (double)(t1_ns - t0_ns) * 1e-9, out);
    return 0;
}

double rv_power_trace_cap(const rv_graph *g, const rv_hw *hw)
{
    if (g->trace && g->trace->power_limit_w > 0)
        return g->trace->power_limit_w;
    return hw ? hw->default_pl_w : 0;
}
