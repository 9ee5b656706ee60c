/* Unit tests for the what-if request document and the pure models. */
#include <math.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "trace/rv_coll.h"
#include "hw/rv_hw.h"
#include "simulate/rv_power.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_util.h"

/* Parses text and expects failure naming field. */
static void expect_bad(const char *text, const char *field)
{
    rv_whatif *w = NULL;
    rv_error err;
    rv_error_clear(&err);
    int rc = rv_whatif_parse_text(text, &w, &err);
    CU_ASSERT_EQUAL(rc, RV_ERR_INVALID);
    CU_ASSERT_PTR_NULL(w);
    if (strcmp(err.field, field) != 0)
        fprintf(stderr, "\n  %s -> field '%s' (%s), want '%s'\n", text, err.field, err.message,
                field);
    CU_ASSERT_STRING_EQUAL(err.field, field);
}

static void expect_ok(const char *text)
{
    rv_whatif *w = NULL;
    rv_error err;
    rv_error_clear(&err);
    int rc = rv_whatif_parse_text(text, &w, &err);
    if (rc)
        fprintf(stderr, "\n  %s -> %s: %s\n", text, err.field, err.message);
    CU_ASSERT_EQUAL(rc, 0);
    rv_whatif_free(w);
}

static void test_parse_valid(void)
{
    rv_whatif *w = NULL;
    rv_error err;
    CU_ASSERT_EQUAL(rv_whatif_parse_text("{}", &w, &err), 0);
    CU_ASSERT(rv_whatif_is_empty(w));
    CU_ASSERT_EQUAL(rv_whatif_schedule(w), RV_SCHED_EARLIEST_START);
    rv_whatif_free(w);
    expect_ok("{\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"bf16\"},"
              "{\"kind\":\"fused_optimizer\"},"
              "{\"kind\":\"kernel_fusion\",\"select\":{\"name\":\"elementwise\"}},"
              "{\"kind\":\"restructure_batchnorm\"},{\"kind\":\"dataloader\",\"workers\":4},"
              "{\"kind\":\"dataloader\",\"speedup\":2.0},{\"kind\":\"cpu_speed\",\"factor\":1.5},"
              "{\"kind\":\"scale\",\"select\":{\"kind\":\"kernel\",\"name\":\"gemm|conv\","
              "\"layer\":\"conv\",\"phase\":\"backward\",\"stream\":7},\"factor\":0.5},"
              "{\"kind\":\"remove\",\"select\":{\"kind\":\"memcpy\"}},"
              "{\"kind\":\"insert\",\"after\":{\"name\":\"relu\"},\"duration_us\":5},"
              "{\"kind\":\"vdnn\"},{\"kind\":\"gist\"},{\"kind\":\"recompute\",\"share\":0.5},"
              "{\"kind\":\"gradient_accumulation\",\"steps\":4}],"
              "\"distributed\":{\"workers\":8,\"gpus_per_node\":8,\"intra_node_gbps\":900,"
              "\"inter_node_gbps\":100,\"latency_us\":5,\"algorithm\":\"ring\",\"bucket_mb\":25,"
              "\"p3\":false,\"blueconnect\":false,\"dgc_density\":null,\"tensor_fusion_mb\":null,"
              "\"tensor_partition_mb\":null},\"power_limit_w\":300,\"schedule\":\"fifo\"}");
    CU_ASSERT_EQUAL(rv_whatif_parse_text("{\"schedule\":\"priority\"}", &w, &err), 0);
    CU_ASSERT_EQUAL(rv_whatif_schedule(w), RV_SCHED_PRIORITY);
    CU_ASSERT(!rv_whatif_is_empty(w));
    rv_whatif_free(w);
}

static void test_parse_invalid(void)
{
    expect_bad("[]", "");
    expect_bad("{\"bogus\":1}", "bogus");
    expect_bad("{\"optimizations\":{}}", "optimizations");
    expect_bad("{\"optimizations\":[{\"kind\":\"warp_drive\"}]}", "optimizations[0].kind");
    expect_bad("{\"optimizations\":[{}]}", "optimizations[0].kind");
    expect_bad("{\"optimizations\":[{\"kind\":\"amp\"},{\"kind\":\"scale\",\"factor\":-1}]}",
               "optimizations[1].factor");
    expect_bad("{\"optimizations\":[{\"kind\":\"scale\"}]}", "optimizations[0].factor");
    expect_bad("{\"optimizations\":[{\"kind\":\"scale\",\"factor\":\"x\"}]}",
               "optimizations[0].factor");
    expect_bad("{\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"fp64\"}]}",
               "optimizations[0].dtype");
    expect_bad("{\"optimizations\":[{\"kind\":\"amp\",\"color\":1}]}", "optimizations[0].color");
    expect_bad("{\"optimizations\":[{\"kind\":\"cpu_speed\",\"factor\":0}]}",
               "optimizations[0].factor");
    expect_bad("{\"optimizations\":[{\"kind\":\"dataloader\"}]}", "optimizations[0].workers");
    expect_bad("{\"optimizations\":[{\"kind\":\"dataloader\",\"workers\":-2}]}",
               "optimizations[0].workers");
    expect_bad("{\"optimizations\":[{\"kind\":\"scale\",\"factor\":1,"
               "\"select\":{\"kind\":\"tpu\"}}]}",
               "optimizations[0].select.kind");
    expect_bad("{\"optimizations\":[{\"kind\":\"scale\",\"factor\":1,"
               "\"select\":{\"name\":\"(\"}}]}",
               "optimizations[0].select.name");
    expect_bad("{\"optimizations\":[{\"kind\":\"scale\",\"factor\":1,"
               "\"select\":{\"phase\":\"lunch\"}}]}",
               "optimizations[0].select.phase");
    expect_bad("{\"optimizations\":[{\"kind\":\"scale\",\"factor\":1,"
               "\"select\":{\"stream\":-3}}]}",
               "optimizations[0].select.stream");
    expect_bad("{\"optimizations\":[{\"kind\":\"scale\",\"factor\":1,"
               "\"select\":{\"colour\":\"red\"}}]}",
               "optimizations[0].select.colour");
    expect_bad("{\"optimizations\":[{\"kind\":\"kernel_fusion\"}]}", "optimizations[0].select");
    expect_bad("{\"optimizations\":[{\"kind\":\"gradient_accumulation\",\"steps\":0}]}",
               "optimizations[0].steps");
    expect_bad("{\"distributed\":{}}", "distributed.workers");
    expect_bad("{\"distributed\":{\"workers\":0}}", "distributed.workers");
    expect_bad("{\"distributed\":{\"workers\":8,\"algorithm\":\"mesh\"}}", "distributed.algorithm");
    expect_bad("{\"distributed\":{\"workers\":8,\"inter_node_gbps\":0}}",
               "distributed.inter_node_gbps");
    expect_bad("{\"distributed\":{\"workers\":8,\"dgc_density\":2}}", "distributed.dgc_density");
    expect_bad("{\"distributed\":{\"workers\":8,\"p3\":\"yes\"}}", "distributed.p3");
    expect_bad("{\"distributed\":{\"workers\":8,\"hops\":3}}", "distributed.hops");
    expect_bad("{\"power_limit_w\":-5}", "power_limit_w");
    expect_bad("{\"power_limit_w\":1e9}", "power_limit_w");
    expect_bad("{\"schedule\":\"random\"}", "schedule");
    expect_bad("{\"gpu\":\"Voodoo 3\"}", "gpu");
    rv_whatif *w = NULL;
    rv_error err;
    CU_ASSERT_EQUAL(rv_whatif_parse_text("{\"optimizations\":[", &w, &err), RV_ERR_PARSE);
}

static void test_hw_lookup(void)
{
    const rv_hw *h = rv_hw_lookup("Tesla V100-DGXS-32GB");
    CU_ASSERT_PTR_NOT_NULL_FATAL(h);
    CU_ASSERT_EQUAL(h->sms, 80);
    CU_ASSERT_DOUBLE_EQUAL(h->default_pl_w, 300, 1e-9);
    CU_ASSERT_STRING_EQUAL(rv_hw_lookup("Tesla V100-PCIE-16GB")->name, "V100-PCIe");
    CU_ASSERT_STRING_EQUAL(rv_hw_lookup("Tesla V100-SXM2-32GB")->name, "V100-SXM2");
    CU_ASSERT_STRING_EQUAL(rv_hw_lookup("NVIDIA A100-SXM4-80GB")->name, "A100-SXM4-80GB");
    CU_ASSERT_STRING_EQUAL(rv_hw_lookup("NVIDIA A100-SXM4-40GB")->name, "A100-SXM4-40GB");
    CU_ASSERT_STRING_EQUAL(rv_hw_lookup("NVIDIA H100 80GB HBM3")->name, "H100-SXM5");
    CU_ASSERT_STRING_EQUAL(rv_hw_lookup("NVIDIA H100 PCIe")->name, "H100-PCIe");
    CU_ASSERT_STRING_EQUAL(rv_hw_lookup("NVIDIA H200")->name, "H200-SXM");
    CU_ASSERT_STRING_EQUAL(rv_hw_lookup("NVIDIA B200")->name, "B200");
    CU_ASSERT_STRING_EQUAL(rv_hw_lookup("AMD Instinct MI250X")->name, "MI250X");
    CU_ASSERT_STRING_EQUAL(rv_hw_lookup("NVIDIA GeForce RTX 2080 Ti")->name, "RTX2080Ti");
    CU_ASSERT_STRING_EQUAL(rv_hw_lookup("a40")->name, "A40");
    CU_ASSERT_PTR_NULL(rv_hw_lookup("NVIDIA RTX A4000"));
    CU_ASSERT_PTR_NULL(rv_hw_lookup(""));
    /* Peaks: V100 has no bf16 tensor path, so bf16 runs at fp32 speed. */
    CU_ASSERT_DOUBLE_EQUAL(rv_hw_peak(h, RV_DT_BF16), 15.7, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(rv_hw_peak(h, RV_DT_FP8), 125, 1e-9);
    CU_ASSERT_DOUBLE_EQUAL(rv_hw_peak(rv_hw_lookup("H100-SXM5"), RV_DT_FP8), 1979, 1e-9);
    size_t n;
    const rv_hw *t = rv_hw_table(&n);
    for (size_t i = 0; i < n; i++) {
        CU_ASSERT(t[i].min_pl_w < t[i].default_pl_w);
        CU_ASSERT(t[i].idle_w < t[i].min_pl_w);
        CU_ASSERT(rv_hw_peak(&t[i], RV_DT_FP16) >= rv_hw_peak(&t[i], RV_DT_FP32));
        CU_ASSERT(rv_hw_lookup(t[i].name) == &t[i]);
    }
}

/* MODELS.md A3 fit table: one P^ = 225 W, gamma = 0.15 on a 250 W V100
 * PCIe with 40 W idle reproduces the Zeus ResNet-50 slowdowns. */
static void test_power_formula(void)
{
    rv_power_model m;
    rv_power_init(&m, rv_hw_lookup("V100-PCIe"));
    const double caps[] = {225, 200, 175, 150, 125, 100};
    const double model[] = {1.000, 1.042, 1.094, 1.183, 1.487, 2.044};
    for (int i = 0; i < 6; i++) {
        double x = rv_power_clock(&m, 225, caps[i]);
        double t = rv_power_time_factor(0.15, x) / rv_power_time_factor(0.15, 1.0);
        CU_ASSERT_DOUBLE_EQUAL(t, model[i], 0.01);
        /* The chosen clock never draws more than the cap. */
        CU_ASSERT(rv_power_draw_w(&m, 225, x) <= caps[i] + 1e-6);
    }
    /* Monotone: a lower cap never speeds a kernel up; collectives ignore it. */
    for (int c = 0; c < RV_KC_COUNT; c++) {
        double prev = 0;
        for (double cap = 400; cap >= 100; cap -= 25) {
            double s = rv_power_slowdown(&m, c, 250, cap);
            CU_ASSERT(s >= prev - 1e-12);
            prev = s;
        }
    }
    CU_ASSERT_DOUBLE_EQUAL(rv_power_slowdown(&m, RV_KC_COMM, 250, 100), 1.0, 1e-12);
    CU_ASSERT(rv_power_slowdown(&m, RV_KC_GEMM, 250, 100) >
              rv_power_slowdown(&m, RV_KC_MEMBOUND, 250, 100));
}

static void test_collectives(void)
{
    rv_net net = {.n = 8,
                  .g = 8,
                  .intra_bps = 150e9,
                  .inter_bps = 12.5e9,
                  .alpha_s = 5e-6,
                  .efficiency = 1.0};
    double s = 100e6;
    /* Ring: 2(n-1)alpha + 2(n-1)/n S/B. */
    CU_ASSERT_DOUBLE_EQUAL(rv_coll_time(&net, RV_COLL_ALLREDUCE, RV_ALGO_RING, s),
                           14 * 5e-6 + 1.75 * s / 150e9, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(rv_coll_busbw_factor(RV_COLL_ALLGATHER, 4), 0.75, 1e-12);
    /* Monotone in ranks and in bandwidth, for every algorithm. */
    for (int a = 0; a < 4; a++) {
        double prev = 0;
        for (int n = 1; n <= 1024; n *= 2) {
            net.n = n;
            double t = rv_coll_time(&net, RV_COLL_ALLREDUCE, a, s);
            CU_ASSERT(t >= prev);
            prev = t;
        }
        net.n = 64;
        prev = 1e30;
        for (double gbps = 1; gbps <= 800; gbps *= 2) {
            net.inter_bps = gbps * 1e9 / 8;
            double t = rv_coll_time(&net, RV_COLL_ALLREDUCE, a, s);
            CU_ASSERT(t <= prev);
            prev = t;
        }
        net.inter_bps = 12.5e9;
    }
    /* Hierarchical beats a flat ring on latency across many nodes. */
    net.n = 256;
    CU_ASSERT(rv_coll_time(&net, RV_COLL_ALLREDUCE, RV_ALGO_HIERARCHICAL, 1e5) <
              rv_coll_time(&net, RV_COLL_ALLREDUCE, RV_ALGO_RING, 1e5));
    /* DGC at 0.1% density moves far less than a dense ring at 8 ranks, and
     * loses once density exceeds 1/n. */
    net.n = 8;
    CU_ASSERT(rv_coll_dgc(&net, s, 0.001) < rv_coll_time(&net, RV_COLL_ALLREDUCE, 0, s) / 20);
    CU_ASSERT(rv_coll_dgc(&net, s, 0.5) > rv_coll_time(&net, RV_COLL_ALLREDUCE, 0, s));
    /* Colocated PS moves 2(n-1)/n S like the ring. */
    net.n = 4;
    net.g = 1;
    CU_ASSERT_DOUBLE_EQUAL(rv_coll_ps(&net, 4096000.0 * 10) - 20 * 5e-6,
                           2 * 0.75 * 4096000.0 * 10 / 12.5e9, 1e-9);
    double ti, tx;
    net.n = 16;
    net.g = 8;
    rv_coll_blueconnect(&net, s, &ti, &tx);
    CU_ASSERT(ti > 0 && tx > ti);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("whatif_unit", NULL, NULL);
    CU_add_test(s, "parse_valid", test_parse_valid);
    CU_add_test(s, "parse_invalid", test_parse_invalid);
    CU_add_test(s, "hw_lookup", test_hw_lookup);
    CU_add_test(s, "power_formula", test_power_formula);
    CU_add_test(s, "collectives", test_collectives);
    return rv_test_run() ? 1 : 0;
}
