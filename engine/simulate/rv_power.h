/* Power-limit model (../shared/MODELS.md section A).
 *
 * A kernel of class c has a clock-insensitive share gamma_c and an uncapped
 * power demand P^_c. Under a cap the firmware lowers the SM clock to the
 * highest f with P_idle + (P^_c - P_idle) * h(f/f0) <= cap, where h(x) = x^3
 * above the voltage knee and x_knee^2 * x below it. Time then scales as
 * (1 - gamma) * f0/f + gamma. Every prediction is a ratio against the cap the
 * trace ran at. The model is pure functions; rv_power_energy integrates it
 * over a simulated window. */
#ifndef RV_POWER_H
#define RV_POWER_H

#include <stdint.h>

#include "graph/rv_graph.h"
#include "hw/rv_hw.h"
#include "graph/rv_select.h"
#include "simulate/rv_sim.h"

typedef struct rv_power_model {
    double tdp_w;                    /* default power limit of the GPU */
    double min_pl_w;                 /* lowest settable limit */
    double idle_w;                   /* P_idle */
    double x_min;                    /* lowest relative clock (min/max SM clock) */
    double x_knee;                   /* voltage knee, relative clock (0.85) */
    double demand_frac[RV_KC_COUNT]; /* P^ per class, as a fraction of TDP */
    double gamma[RV_KC_COUNT];       /* clock-insensitive share per class */
} rv_power_model;

/* Defaults for a GPU (hw may be NULL: a 300 W V100-like board). */
void rv_power_init(rv_power_model *m, const rv_hw *hw);

/* Uncapped power demand of a kernel class, W. */
double rv_power_demand_w(const rv_power_model *m, int kclass);

/* Relative clock x = f/f0 in [x_min, 1] that a kernel demanding demand_w
 * gets under cap_w. */
double rv_power_clock(const rv_power_model *m, double demand_w, double cap_w);

/* Power drawn at relative clock x by a kernel demanding demand_w. */
double rv_power_draw_w(const rv_power_model *m, double demand_w, double x);

/* (1 - gamma) / x + gamma: kernel time at clock x relative to full clock. */
double rv_power_time_factor(double gamma, double x);

/* t(cap_new) / t(cap_trace) for a kernel of class kclass. */
double rv_power_slowdown(const rv_power_model *m, int kclass, double cap_trace_w, double cap_new_w);

/* Power a kernel of class kclass draws under cap_w (<= cap), W. */
double rv_power_kernel_w(const rv_power_model *m, int kclass, double cap_w);

/* What an energy figure assumes: the GPU (NULL: the V100-like default),
 * the cap it runs at, how many data-parallel ranks one simulated rank
 * stands for, how many GPUs its work is split over (tensor x pipeline
 * degrees; each taken to run like the simulated one), the share of the
 * simulated busy time that is pipeline bubble (drawn at idle power), and
 * the samples per iteration (0 unknown). Zeroed fields: one GPU, no
 * bubble. */
typedef struct rv_energy_params {
    const rv_hw *hw;
    double cap_w;
    int ranks;
    int replica_gpus;    /* 0 or 1: the trace's GPUs alone */
    double bubble_share; /* in [0, 1) */
    int batch_size;
} rv_energy_params;

typedef struct rv_energy {
    /* The GPUs the trace's work runs on: those that ran work in the
     * window, times replica_gpus. energy_per_gpu_j and avg_power_per_gpu_w
     * are one of them. */
    double energy_j;
    double avg_power_w;
    double power_limit_w; /* the cap the figure assumes */
    int ngpus;
    double energy_per_gpu_j;
    double avg_power_per_gpu_w;
    /* The whole job: those GPUs times the data-parallel ranks one trace
     * stands for (the workers of a data-parallel what-if, or the world
     * size). */
    int ranks;
    int job_gpus;
    double job_energy_j;
    double job_avg_power_w;
    double samples_per_j; /* batch_size * ranks / job_energy_j; 0 when batch_size unknown */
} rv_energy;

/* Energy of the simulated window [t0, t1) of g under p (borrowed).
 * Returns 0, RV_ERR_INVALID for an empty window, RV_ERR_NOMEM. */
int rv_power_energy(const rv_graph *g, const rv_sim *s, const rv_energy_params *p, int64_t t0_ns,
                    int64_t t1_ns, rv_energy *out);

/* The cap the trace ran at: its metadata, else hw's default limit, else 0. */
double rv_power_trace_cap(const rv_graph *g, const rv_hw *hw);

#endif
