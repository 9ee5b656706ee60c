#include "hw/rv_hw.h"

#include <ctype.h>
#include <string.h>
#include <strings.h>

/* Columns: name, vendor, SMs, max MHz, min MHz, HBM GB/s,
 * {fp32, tf32, fp16, bf16, fp8} TFLOPS, default PL, min PL, idle W,
 * NVLink GB/s, PCIe GB/s, launch us.
 * [V] rows come from ../shared/MODELS.md A5 (datasheets, nvidia-smi dumps);
 * [M] rows are datasheet figures from memory and should be checked before
 * anyone relies on them. AMD fp32 is the matrix-core rate (what GEMMs get). */
static const rv_hw rv_hw_rows[] = {
    /* [V] V100 SXM2: 300/100 W, 1530 MHz boost; idle from the Zeus PCIe runs. */
    {"V100-SXM2", "nvidia", 80, 1530, 135, 900, {15.7, 0, 125, 0, 0}, 300, 100, 40, 300, 12, 5},
    /* [M] DGX Station V100: an SXM2-class board with the same 300 W budget. */
    {"V100-DGXS", "nvidia", 80, 1530, 135, 900, {15.7, 0, 125, 0, 0}, 300, 100, 40, 300, 12, 5},
    /* [V] V100 PCIe 250/100 W (the Zeus sweep). */
    {"V100-PCIe", "nvidia", 80, 1380, 135, 900, {14, 0, 112, 0, 0}, 250, 100, 40, 0, 12, 5},
    /* [V] A100 SXM4; [M] idle. */
    {"A100-SXM4-40GB",
     "nvidia",
     108,
     1410,
     210,
     1555,
     {19.5, 156, 312, 312, 0},
     400,
     100,
     55,
     600,
     25,
     4},
    {"A100-SXM4-80GB",
     "nvidia",
     108,
     1410,
     210,
     2039,
     {19.5, 156, 312, 312, 0},
     400,
     100,
     60,
     600,
     25,
     4},
    /* [M] A100 PCIe 80 GB. */
    {"A100-PCIe", "nvidia", 108, 1410, 210, 1935, {19.5, 156, 312, 312, 0}, 300, 150, 50, 0, 25, 4},
    /* [V] H100 SXM5 700/200 W, 1980 MHz, idle 70-100 W. */
    {"H100-SXM5",
     "nvidia",
     132,
     1980,
     345,
     3350,
     {67, 495, 989, 989, 1979},
     700,
     200,
     80,
     900,
     50,
     4},
    /* [M] H100 PCIe. */
    {"H100-PCIe",
     "nvidia",
     114,
     1755,
     345,
     2000,
     {51, 378, 756, 756, 1513},
     350,
     200,
     50,
     0,
     50,
     4},
    /* [M] H800 SXM5: the H100 SXM5's compute, memory and power with NVLink
     * cut to 400 GB/s (the export variant), so distributed answers do not
     * take the H100's 900 GB/s. */
    {"H800-SXM5",
     "nvidia",
     132,
     1980,
     345,
     3350,
     {67, 495, 989, 989, 1979},
     700,
     200,
     80,
     400,
     50,
     4},
    /* [V] H200 SXM; power limits assumed equal to H100. */
    {"H200-SXM",
     "nvidia",
     132,
     1980,
     345,
     4800,
     {67, 495, 989, 989, 1979},
     700,
     200,
     80,
     900,
     50,
     4},
    /* [M] B200 (dense); default limit 1000 W checked against HGX B200 specs
     * (GB200 boards run it at up to 1200 W), minimum limit unchecked. */
    {"B200",
     "nvidia",
     148,
     1965,
     345,
     8000,
     {80, 1100, 2250, 2250, 4500},
     1000,
     400,
     120,
     1800,
     50,
     4},
    /* [M] A40, P100 PCIe, Quadro RTX 6000: the other Zeus GPUs. */
    {"A40", "nvidia", 84, 1740, 210, 696, {37.4, 74.8, 149.7, 149.7, 0}, 300, 100, 30, 0, 25, 4},
    {"P100-PCIe", "nvidia", 56, 1303, 544, 732, {9.3, 0, 18.7, 0, 0}, 250, 125, 30, 0, 12, 6},
    {"RTX6000", "nvidia", 72, 1770, 300, 672, {16.3, 0, 130.5, 0, 0}, 260, 100, 25, 0, 12, 5},
    /* [M] GeForce RTX 2080 Ti: tensor cores at half rate with fp32 accumulation. */
    {"RTX2080Ti", "nvidia", 68, 1545, 300, 616, {13.4, 0, 26.9, 0, 0}, 250, 100, 20, 0, 12, 5},
    /* [M] Quadro GP100: packed fp16, no tensor cores. */
    {"GP100", "nvidia", 56, 1442, 544, 717, {10.3, 0, 20.7, 0, 0}, 235, 125, 30, 0, 12, 6},
    /* [M] Tesla T4 (Turing, 70 W PCIe): fp16 tensor cores, no bf16, no fp8. */
    {"T4", "nvidia", 40, 1590, 300, 320, {8.1, 0, 65, 0, 0}, 70, 60, 10, 0, 12, 5},
    /* [M] AMD Instinct (OAM). */
    {"MI250", "amd", 208, 1700, 500, 3277, {90.5, 0, 362, 362, 0}, 560, 200, 90, 400, 25, 6},
    /* [M] MI210 (CDNA2, one die of an MI250, PCIe): 104 CUs at 1700 MHz,
     * 1638 GB/s, fp32 matrix 45.3, fp16/bf16 181 TFLOPS, 300 W; the
     * NeuSight tables measured it. */
    {"MI210", "amd", 104, 1700, 500, 1638, {45.3, 0, 181, 181, 0}, 300, 100, 40, 300, 25, 6},
    {"MI250X", "amd", 220, 1700, 500, 3277, {95.7, 0, 383, 383, 0}, 560, 200, 90, 400, 25, 6},
    /* MI300X: default limit 750 W checked against the OAM's board power;
     * minimum limit unchecked. */
    {"MI300X",
     "amd",
     304,
     2100,
     500,
     5300,
     {163.4, 653.7, 1307, 1307, 2615},
     750,
     300,
     130,
     896,
     50,
     6},
    /* [M] NVIDIA L4 (Ada, 72 W PCIe): datasheet dense peaks (the sparse
     * figures are twice these), 300 GB/s GDDR6, 58 SMs at 2040 MHz. */
    {"L4", "nvidia", 58, 2040, 210, 300, {30.3, 60, 121, 121, 242}, 72, 40, 16, 0, 25, 4},
    /* [M] NVIDIA A10 (Ampere, 150 W PCIe): dense peaks, 600 GB/s GDDR6,
     * 72 SMs at 1695 MHz, no fp8. */
    {"A10", "nvidia", 72, 1695, 210, 600, {31.2, 62.5, 125, 125, 0}, 150, 100, 20, 0, 25, 4},
};

#define RV_HW_NROWS (sizeof(rv_hw_rows) / sizeof(rv_hw_rows[0]))

const rv_hw *rv_hw_table(size_t *n)
{
    if (n)
        *n = RV_HW_NROWS;
    return rv_hw_rows;
}

static const rv_hw *row(const char *name)
{
    for (size_t i = 0; i < RV_HW_NROWS; i++)
        if (strcmp(rv_hw_rows[i].name, name) == 0)
            return &rv_hw_rows[i];
    return NULL;
}

/* Uppercases s; separators become spaces so that "RTX-2080_Ti" and
 * "RTX 2080 Ti" compare alike while model numbers keep their boundaries. */
static void squash(const char *s, char *out, size_t cap)
{
    size_t n = 0;
    for (; *s && n + 1 < cap; s++)
        out[n++] = (*s == '_') ? ' ' : (char)toupper((unsigned char)*s);
    out[n] = '\0';
}

/* True when key occurs in s and is not followed by another digit. */
static int has_model(const char *s, const char *key)
{
    size_t k = strlen(key);
    for (const char *p = strstr(s, key); p; p = strstr(p + 1, key))
        if (!isdigit((unsigned char)p[k]))
            return 1;
    return 0;
}

const rv_hw *rv_hw_lookup(const char *device_name)
{
    char s[128];
    if (!device_name || !*device_name)
        return NULL;
    for (size_t i = 0; i < RV_HW_NROWS; i++)
        if (strcasecmp(rv_hw_rows[i].name, device_name) == 0)
            return &rv_hw_rows[i];
    squash(device_name, s, sizeof(s));
    int pcie = strstr(s, "PCIE") != NULL;
    if (strstr(s, "MI300"))
        return row("MI300X");
    if (strstr(s, "MI250X"))
        return row("MI250X");
    if (strstr(s, "MI250"))
        return row("MI250");
    if (strstr(s, "MI210"))
        return row("MI210");
    if (has_model(s, "B200") || has_model(s, "GB200"))
        return row("B200");
    if (has_model(s, "H200"))
        return row("H200-SXM");
    /* An H800 PCIe has no NVLink to narrow: it is an H100 PCIe here. */
    if (has_model(s, "H800"))
        return pcie ? row("H100-PCIe") : row("H800-SXM5");
    if (has_model(s, "H100"))
        return pcie ? row("H100-PCIe") : row("H100-SXM5");
    if (has_model(s, "A100") || has_model(s, "A800")) {
        if (pcie)
            return row("A100-PCIe");
        return strstr(s, "80GB") ? row("A100-SXM4-80GB") : row("A100-SXM4-40GB");
    }
    if (has_model(s, "V100")) {
        if (pcie)
            return row("V100-PCIe");
        return strstr(s, "DGXS") ? row("V100-DGXS") : row("V100-SXM2");
    }
    if (has_model(s, "A40"))
        return row("A40");
    if (has_model(s, "GP100"))
        return row("GP100");
    if (has_model(s, "P100"))
        return row("P100-PCIe");
    if ((strstr(s, "RTX6000") || strstr(s, "RTX 6000")) && !strstr(s, "ADA"))
        return row("RTX6000");
    if (strstr(s, "2080TI") || strstr(s, "2080 TI"))
        return row("RTX2080Ti");
    if (has_model(s, "A10"))
        return row("A10"); /* A10 and A10G; A100 was matched above */
    /* "NVIDIA L4": L4 as a word of its own (not L40, L40S). */
    for (const char *p = strstr(s, "L4"); p; p = strstr(p + 1, "L4"))
        if ((p == s || p[-1] == ' ') && !isalnum((unsigned char)p[2]))
            return row("L4");
    /* "Tesla T4", "NVIDIA T4": T4 as a word of its own (not "RTX4000"). */
    for (const char *p = strstr(s, "T4"); p; p = strstr(p + 1, "T4"))
        if ((p == s || p[-1] == ' ' || p[-1] == '-') && !isalnum((unsigned char)p[2]))
            return row("T4");
    return NULL;
}

double rv_hw_peak(const rv_hw *hw, int dtype)
{
    if (!hw || dtype < 0 || dtype >= RV_DT_COUNT)
        return 0;
    /* Without a fast path a dtype runs on the next slower one: fp8 on the
     * fp16 units, tf32/fp16 on plain fp32, bf16 on fp32 (Volta/Turing have
     * no bf16 tensor cores). */
    static const int fallback[RV_DT_COUNT] = {-1, RV_DT_FP32, RV_DT_FP32, RV_DT_FP32, RV_DT_FP16};
    int d = dtype;
    while (d >= 0 && hw->tflops[d] <= 0)
        d = fallback[d];
    return d >= 0 ? hw->tflops[d] : 0;
}

static const char *const dtype_names[RV_DT_COUNT] = {"fp32", "tf32", "fp16", "bf16", "fp8"};

int rv_dtype_parse(const char *s)
{
    if (!s)
        return -1;
    for (int i = 0; i < RV_DT_COUNT; i++)
        if (strcmp(s, dtype_names[i]) == 0)
            return i;
    return -1;
}

const char *rv_dtype_name(int dtype)
{
    return dtype >= 0 && dtype < RV_DT_COUNT ? dtype_names[dtype] : "unknown";
}

double rv_dtype_bytes(int dtype)
{
    switch (dtype) {
    case RV_DT_FP16:
    case RV_DT_BF16: return 2;
    case RV_DT_FP8: return 1;
    default: return 4;
    }
}
