/* The hardware table: peak rates, clocks and power limits of the GPUs the
 * what-if models know, and a lookup from the device name a trace carries.
 *
 * Figures are dense (no sparsity) datasheet peaks; sources and confidence
 * are noted beside each row in rv_hw.c and in ../shared/MODELS.md section A5.
 * The table is static and immutable: lookups return borrowed pointers that
 * stay valid for the life of the process. */
#ifndef RV_HW_H
#define RV_HW_H

#include <stddef.h>

typedef enum rv_dtype {
    RV_DT_FP32 = 0,
    RV_DT_TF32,
    RV_DT_FP16,
    RV_DT_BF16,
    RV_DT_FP8,
    RV_DT_COUNT
} rv_dtype;

typedef struct rv_hw {
    const char *name;           /* canonical, e.g. "V100-SXM2" */
    const char *vendor;         /* "nvidia" | "amd" */
    int sms;                    /* SMs (NVIDIA) or CUs (AMD) */
    double max_sm_mhz;          /* boost clock */
    double min_sm_mhz;          /* lowest clock the firmware may pick under a cap */
    double hbm_gbps;            /* memory bandwidth, GB/s */
    double tflops[RV_DT_COUNT]; /* dense peak per dtype; 0 = no fast path */
    double default_pl_w;        /* default power limit (TDP) */
    double min_pl_w;            /* lowest settable power limit */
    double idle_w;              /* power with no kernel running */
    double nvlink_gbps;         /* per-GPU link bandwidth, bidirectional GB/s; 0 = none */
    double pcie_gbps;           /* host link, one direction GB/s */
    double launch_us;           /* typical kernel launch overhead (CPU side) */
} rv_hw;

/* Memory bandwidth, GB/s, the models assume when the trace's GPU is not in
 * the table: the V100's HBM2 (900 GB/s, V100 datasheet; the V100 rows of
 * rv_hw.c), the board the power model also falls back to (300 W). */
#define RV_HW_DEFAULT_HBM_GBPS 900.0

/* Finds the row for a device name as written in traces ("Tesla V100-DGXS-32GB",
 * "NVIDIA A100-SXM4-80GB", "AMD Instinct MI250X") or a canonical name
 * ("A100-SXM4-80GB"). Case-insensitive. NULL when unknown. */
const rv_hw *rv_hw_lookup(const char *device_name);

/* The whole table (borrowed); *n receives the row count. */
const rv_hw *rv_hw_table(size_t *n);

/* Peak for a dtype, falling back to the nearest slower path the GPU has
 * (fp8 -> fp16, bf16 -> fp16, tf32 -> fp32). TFLOPS. */
double rv_hw_peak(const rv_hw *hw, int dtype);

/* "fp32" | "tf32" | "fp16" | "bf16" | "fp8" -> rv_dtype; -1 if unknown. */
int rv_dtype_parse(const char *s);
const char *rv_dtype_name(int dtype);

/* Bytes per element of a dtype (tf32 is stored as fp32). */
double rv_dtype_bytes(int dtype);

#endif
