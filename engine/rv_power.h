/* Power-limit model (../shared/MODELS.md section A).
 *
 * A kernel of class c has a clock-insensitive share gamma_c and an uncapped
 * power demand P^_c. Under a cap the firmware lowers the SM clock to the
 * highest f with P_idle + (P^_c - P_idle) * h(f/f0) <= cap, where h(x) = x^3
 * above the voltage knee and x_knee^2 * x below it. Time then scales as
 * (1 - gamma) * f0/f + gamma. Every prediction is a ratio against the cap the
 * trace ran at. Pure functions; no allocation. */
#ifndef RV_POWER_H
#define RV_POWER_H

#include "rv_hw.h"
#include "rv_select.h"

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

#endif
