/* The what-if models on real traces: direction and magnitude against
 * measured pairs (data loader), published curves (Zeus V100 power caps,
 * NVIDIA's ResNet-50 AMP speedup) and the models' own invariants
 * (monotone sweeps). Skips (77) without RV_SHARED_TRACES. */
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <CUnit/Basic.h>

#include "graph/rv_graph.h"
#include "reader/rv_kineto.h"
#include "simulate/rv_report.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_util.h"

static const char *traces;

typedef struct loaded {
    rv_trace *tr;
    rv_graph *g;
    rv_sim *s; /* the baseline simulation */
    double measured_us, simulated_us;
} loaded;

static loaded r50w0, r50w4, nccl2;

static int load(const char *rel, loaded *l)
{
    char path[1024];
    rv_error err;
    rv_sim *s = NULL;
    rv_iter_figures f;
    snprintf(path, sizeof(path), "%s/%s", traces, rel);
    if (rv_kineto_read_file(path, NULL, &l->tr, &err) != 0) {
        fprintf(stderr, "%s: %s\n", path, err.message);
        return -1;
    }
    if (rv_graph_build(l->tr, NULL, &l->g, &err) != 0 || rv_sim_run(l->g, 0, &s, &err) != 0 ||
        rv_report_iteration(l->g, s, RV_ITER_MEDIAN, &f, &err) != 0) {
        fprintf(stderr, "%s: %s\n", path, err.message);
        rv_sim_free(s);
        return -1;
    }
    l->measured_us = f.measured_us;
    l->simulated_us = f.simulated_us;
    l->s = s;
    return 0;
}

static void unload(loaded *l)
{
    rv_sim_free(l->s);
    rv_graph_free(l->g);
    rv_trace_free(l->tr);
}

typedef struct result {
    double us;        /* predicted median iteration */
    double energy_j;  /* per iteration */
    double power_w;   /* average, per GPU */
    double samples_s; /* predicted throughput, 0 when unknown */
    double mfu;       /* predicted mfu, 0 when unknown */
    json_t *applied;
} result;

/* Runs doc on l through the one what-if pipeline (rv_run); 0 or the error. */
static int predict(const loaded *l, const char *doc, result *r)
{
    rv_whatif *w = NULL;
    rv_run_result *res = NULL;
    rv_run_opts opts = {.iteration = RV_ITER_MEDIAN};
    rv_error err;
    memset(r, 0, sizeof(*r));
    rv_error_clear(&err);
    int rc = rv_whatif_parse_text(doc, &w, &err);
    if (!rc)
        rc = rv_run(l->g, l->s, w, &opts, &res, &err);
    if (!rc) {
        r->us = res->sum.predicted_us;
        r->energy_j = res->sum.energy_j;
        r->power_w = res->pred_energy.avg_power_per_gpu_w;
        r->applied = json_incref(res->applied);
        r->samples_s = json_number_value(
            json_object_get(json_object_get(res->metrics, "throughput"), "predicted"));
        r->mfu =
            json_number_value(json_object_get(json_object_get(res->metrics, "mfu"), "predicted"));
    }
    if (rc)
        fprintf(stderr, "\n  %s: %s (%s)\n", doc, err.message, err.field);
    rv_run_result_free(res);
    rv_whatif_free(w);
    return rc;
}

static void release(result *r)
{
    json_decref(r->applied);
    r->applied = NULL;
}

/* The numeric member of the first applied entry that has it ("gpu"'s
 * entry comes before the optimizations'). */
static double applied_num(const result *r, const char *key)
{
    size_t i;
    json_t *o;
    json_array_foreach(r->applied, i, o)
    {
        if (json_object_get(o, key))
            return json_number_value(json_object_get(o, key));
    }
    return 0;
}

static void test_empty_is_replay(void)
{
    result r;
    CU_ASSERT_EQUAL_FATAL(predict(&r50w0, "{}", &r), 0);
    CU_ASSERT_DOUBLE_EQUAL(r.us, r50w0.simulated_us, 1e-6);
    CU_ASSERT_EQUAL(json_array_size(r.applied), 0);
    release(&r);
}

/* MODELS.md D, measured pair: num_workers 0 -> 4 is 176.3 -> 126.6 ms. */
static void test_dataloader_pair(void)
{
    result r;
    CU_ASSERT_EQUAL_FATAL(
        predict(&r50w0, "{\"optimizations\":[{\"kind\":\"dataloader\",\"workers\":4}]}", &r), 0);
    double err = r.us / r50w4.measured_us - 1;
    printf("\n    dataloader workers 0->4: predicted %.1f ms, measured %.1f ms, error %+.1f%%\n",
           r.us / 1e3, r50w4.measured_us / 1e3, err * 100);
    CU_ASSERT(fabs(err) <= 0.10);
    CU_ASSERT(applied_num(&r, "load_us_per_iteration") > 50e3); /* ~69 ms of loading */
    release(&r);
    /* The contention term (0.25 per busy loader core, fitted on this very
     * pair, so not an independent check) must move the prediction up. */
    double plain = r.us;
    CU_ASSERT_EQUAL_FATAL(
        predict(&r50w0,
                "{\"optimizations\":[{\"kind\":\"dataloader\",\"workers\":4,\"contention\":0.25}]}",
                &r),
        0);
    printf("    with contention 0.25: %.1f ms (%+.1f%%)\n", r.us / 1e3,
           (r.us / r50w4.measured_us - 1) * 100);
    CU_ASSERT(r.us > plain);
    release(&r);
    /* A 2x faster in-process loader saves about half the 69 ms. */
    CU_ASSERT_EQUAL_FATAL(
        predict(&r50w0, "{\"optimizations\":[{\"kind\":\"dataloader\",\"speedup\":2}]}", &r), 0);
    double saved = r50w0.simulated_us - r.us;
    CU_ASSERT(saved > 25e3 && saved < 45e3);
    release(&r);
    /* Workers on a trace that already had them: a clear refusal. */
    CU_ASSERT_EQUAL(
        predict(&r50w4, "{\"optimizations\":[{\"kind\":\"dataloader\",\"workers\":8}]}", &r),
        RV_ERR_UNSUPPORTED);
    release(&r);
}

/* Zeus V100 (250 W PCIe) ResNet-50 batch 32: t(cap) / t(250 W). */
static int zeus_ratios(double caps[], double ratio[], int max)
{
    char path[1024], line[512];
    snprintf(path, sizeof(path), "%s/ground-truth/summary_power_v100.csv", traces);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    int n = 0;
    double t250 = 0;
    double t[16], c[16];
    while (fgets(line, sizeof(line), f) && n < 16) {
        char ds[64], net[64], opt[64];
        int bs;
        double cap, tpe, pw;
        if (sscanf(line, "%63[^,],%63[^,],%d,%63[^,],%lf,%lf,%lf", ds, net, &bs, opt, &cap, &tpe,
                   &pw) != 7)
            continue;
        if (strcmp(net, "resnet50") || bs != 32)
            continue;
        c[n] = cap;
        t[n++] = tpe;
        if (cap == 250)
            t250 = tpe;
    }
    fclose(f);
    int m = 0;
    for (int i = 0; i < n && m < max && t250 > 0; i++) {
        caps[m] = c[i];
        ratio[m++] = t[i] / t250;
    }
    return m;
}

static void test_power_curve(void)
{
    double caps[16], meas[16];
    int n = zeus_ratios(caps, meas, 16);
    CU_ASSERT_FATAL(n >= 6);
    result base;
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, "{\"gpu\":\"V100-PCIe\",\"power_limit_w\":250}", &base),
                          0);
    printf("\n    cap W  measured  predicted  error\n");
    for (int i = 0; i < n; i++) {
        char doc[128];
        result r;
        snprintf(doc, sizeof(doc), "{\"gpu\":\"V100-PCIe\",\"power_limit_w\":%g}", caps[i]);
        CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &r), 0);
        double pred = r.us / base.us;
        printf("    %5.0f  %8.3f  %9.3f  %+5.1f%%\n", caps[i], meas[i], pred,
               (pred / meas[i] - 1) * 100);
        if (caps[i] >= 0.4 * 250)
            CU_ASSERT(fabs(pred / meas[i] - 1) <= 0.10);
        /* The average power never exceeds the cap. */
        CU_ASSERT(r.power_w <= caps[i] + 1e-6);
        release(&r);
    }
    release(&base);
    /* Sweep 100..400 W on the trace's own GPU (300 W): time never grows
     * with the cap; energy per iteration is lowest below the default cap. */
    double prev = 1e30, e_min = 1e30, e_min_cap = 0, e300 = 0;
    for (int cap = 100; cap <= 400; cap += 25) {
        char doc[64];
        result r;
        snprintf(doc, sizeof(doc), "{\"power_limit_w\":%d}", cap);
        CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &r), 0);
        CU_ASSERT(r.us <= prev + 1e-6);
        prev = r.us;
        if (r.energy_j < e_min) {
            e_min = r.energy_j;
            e_min_cap = cap;
        }
        if (cap == 300)
            e300 = r.energy_j;
        release(&r);
    }
    printf("    energy minimum at %.0f W (%.2f J vs %.2f J at 300 W)\n", e_min_cap, e_min, e300);
    CU_ASSERT(e_min_cap >= 125 && e_min_cap <= 250);
    CU_ASSERT(e_min < 0.95 * e300);
    /* Below the GPU's minimum limit: a named error. */
    result r;
    CU_ASSERT_EQUAL(predict(&r50w4, "{\"power_limit_w\":50}", &r), RV_ERR_INVALID);
    release(&r);
}

/* With the CPU out of the way (cpu_speed 20), AMP on V100 should speed the
 * GPU-bound step up like NVIDIA's measured 3.2x for ResNet-50 (DLE). */
static void test_amp(void)
{
    result base, r, d;
    const char *cpu = "{\"kind\":\"cpu_speed\",\"factor\":20}";
    char doc[256];
    snprintf(doc, sizeof(doc), "{\"optimizations\":[%s]}", cpu);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &base), 0);
    snprintf(doc, sizeof(doc), "{\"optimizations\":[{\"kind\":\"amp\"},%s]}", cpu);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &r), 0);
    snprintf(doc, sizeof(doc), "{\"optimizations\":[{\"kind\":\"amp\",\"model\":\"daydream\"},%s]}",
             cpu);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &d), 0);
    printf("\n    AMP GPU-bound speedup: roofline %.2fx, daydream %.2fx (DLE V100: 3.26x)\n",
           base.us / r.us, base.us / d.us);
    CU_ASSERT(base.us / r.us > 2.3 && base.us / r.us < 4.0);
    CU_ASSERT(base.us / d.us > 2.0 && base.us / d.us < 3.5);
    CU_ASSERT(applied_num(&r, "casts_inserted") > 0);
    release(&base);
    release(&r);
    release(&d);
    /* On the real, CPU-bound step AMP changes little (Daydream 6.2). */
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, "{\"optimizations\":[{\"kind\":\"amp\"}]}", &r), 0);
    CU_ASSERT(fabs(r.us / r50w4.simulated_us - 1) < 0.05);
    release(&r);
    /* fp16 needs the GradScaler (unscale + inf check over the gradients,
     * then the scale update: two kernels per step); bf16 does not. On the
     * A100 row both dtypes have the same peaks, so the difference is the
     * scaler: small, but there. */
    result f16, b16;
    snprintf(
        doc, sizeof(doc),
        "{\"gpu\":\"A100-SXM4-80GB\",\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"fp16\"},%s]}",
        cpu);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &f16), 0);
    snprintf(
        doc, sizeof(doc),
        "{\"gpu\":\"A100-SXM4-80GB\",\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"bf16\"},%s]}",
        cpu);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &b16), 0);
    printf("    A100 AMP: fp16 %.2f ms (GradScaler), bf16 %.2f ms\n", f16.us / 1e3, b16.us / 1e3);
    CU_ASSERT_EQUAL(applied_num(&f16, "grad_scaler_inserted"), 2 * 6); /* 6 steps */
    CU_ASSERT_EQUAL(applied_num(&b16, "grad_scaler_inserted"), 0);
    CU_ASSERT(f16.us > b16.us && f16.us < 1.03 * b16.us);
    release(&f16);
    release(&b16);
    /* V100 has no fp8 (nor bf16): refused, not "sped up" (test_precision). */
    CU_ASSERT_EQUAL(
        predict(&r50w4, "{\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"fp8\"}]}", &r),
        RV_ERR_UNSUPPORTED);
    release(&r);
}

static void test_fusions(void)
{
    result r;
    CU_ASSERT_EQUAL_FATAL(
        predict(&r50w4, "{\"optimizations\":[{\"kind\":\"fused_optimizer\"}]}", &r), 0);
    double before = applied_num(&r, "optimizer_gpu_us_before");
    double after = applied_num(&r, "optimizer_gpu_us_after");
    printf("\n    fused optimizer: %.1f -> %.1f ms/step, optimizer GPU %.1f -> %.1f us total\n",
           r50w4.simulated_us / 1e3, r.us / 1e3, before, after);
    CU_ASSERT(after < 0.6 * before);
    CU_ASSERT(applied_num(&r, "launches_removed") > 1000);
    CU_ASSERT(r.us < r50w4.simulated_us && r.us > 0.85 * r50w4.simulated_us);
    release(&r);

    CU_ASSERT_EQUAL_FATAL(
        predict(&r50w4, "{\"optimizations\":[{\"kind\":\"restructure_batchnorm\"}]}", &r), 0);
    double gain = 1 - r.us / r50w4.simulated_us;
    printf("    restructured batchnorm: %.1f%% faster (Daydream on DenseNet: 12.7%%)\n",
           gain * 100);
    CU_ASSERT(gain > 0.03 && gain < 0.25);
    release(&r);

    CU_ASSERT_EQUAL_FATAL(predict(&r50w4,
                                  "{\"optimizations\":[{\"kind\":\"kernel_fusion\",\"select\":"
                                  "{\"kind\":\"kernel\",\"name\":\"elementwise\"}}]}",
                                  &r),
                          0);
    CU_ASSERT(applied_num(&r, "kernels_removed") > 0);
    CU_ASSERT(applied_num(&r, "selected_gpu_us_after") < applied_num(&r, "selected_gpu_us_before"));
    CU_ASSERT(r.us < r50w4.simulated_us);
    release(&r);
}

static void test_generic(void)
{
    result base, r;
    const char *cpu = "{\"kind\":\"cpu_speed\",\"factor\":20}";
    char doc[512];
    snprintf(doc, sizeof(doc), "{\"optimizations\":[%s]}", cpu);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &base), 0);
    /* A 20x faster CPU makes the step GPU-bound: close to the GPU time. */
    CU_ASSERT(base.us < 0.9 * r50w4.simulated_us && base.us > 0.6 * r50w4.simulated_us);
    /* Halving every kernel on the GPU-bound step: about 2x. */
    snprintf(doc, sizeof(doc),
             "{\"optimizations\":[%s,{\"kind\":\"scale\",\"select\":{\"kind\":\"kernel\"},"
             "\"factor\":0.5}]}",
             cpu);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &r), 0);
    CU_ASSERT(base.us / r.us > 1.6 && base.us / r.us < 2.05);
    release(&r);
    /* Backward-only selection scales less than everything. */
    snprintf(doc, sizeof(doc),
             "{\"optimizations\":[%s,{\"kind\":\"scale\",\"select\":{\"kind\":\"kernel\","
             "\"phase\":\"backward\"},\"factor\":0.5}]}",
             cpu);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &r), 0);
    CU_ASSERT(base.us / r.us > 1.2 && base.us / r.us < 1.6);
    release(&r);
    /* Removing all convolution kernels removes real work. */
    snprintf(doc, sizeof(doc),
             "{\"optimizations\":[%s,{\"kind\":\"remove\",\"select\":{\"kind\":\"kernel\","
             "\"name\":\"conv|gemm|scudnn|wgrad|dgrad\"}}]}",
             cpu);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &r), 0);
    CU_ASSERT(r.us < 0.7 * base.us);
    CU_ASSERT(json_number_value(json_object_get(json_array_get(r.applied, 1), "tasks_removed")) >
              500);
    release(&r);
    /* Inserting 50 us after every batchnorm forward kernel (53 per step)
     * adds about 2.6 ms on the GPU-bound step. */
    snprintf(doc, sizeof(doc),
             "{\"optimizations\":[%s,{\"kind\":\"insert\",\"after\":{\"kind\":\"kernel\","
             "\"name\":\"bn_fw\"},\"duration_us\":50}]}",
             cpu);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &r), 0);
    double added = r.us - base.us;
    double n = json_number_value(json_object_get(json_array_get(r.applied, 1), "tasks_inserted"));
    printf("\n    insert: %.0f tasks, +%.2f ms per step\n", n, added / 1e3);
    CU_ASSERT(n > 0);
    CU_ASSERT(added > 0.5 * 50 * (n / 6) && added < 1.5 * 50 * (n / 6) + 500);
    release(&r);
    release(&base);
    /* A faster CPU helps the CPU-bound step a lot; a slower one hurts. */
    CU_ASSERT_EQUAL_FATAL(
        predict(&r50w4, "{\"optimizations\":[{\"kind\":\"cpu_speed\",\"factor\":0.5}]}", &r), 0);
    CU_ASSERT(r.us > 1.5 * r50w4.simulated_us);
    release(&r);
    /* The schedule policy is accepted and reported. */
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, "{\"schedule\":\"fifo\"}", &r), 0);
    CU_ASSERT(fabs(r.us / r50w4.simulated_us - 1) < 0.05);
    release(&r);
}

static void test_distributed(void)
{
    result r;
    /* Workers 1..1024 at 100 Gb/s between 8-GPU nodes: never faster. */
    double prev = 0;
    printf("\n    workers  step ms\n");
    for (int n = 1; n <= 1024; n *= 2) {
        char doc[128];
        snprintf(doc, sizeof(doc), "{\"distributed\":{\"workers\":%d}}", n);
        CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &r), 0);
        printf("    %7d  %7.1f\n", n, r.us / 1e3);
        CU_ASSERT(r.us >= prev - 1);
        prev = r.us;
        release(&r);
    }
    /* Bandwidth 1..800 Gb/s at 64 workers: never slower. */
    prev = 1e30;
    double t1 = 0, t800 = 0;
    for (double b = 1; b <= 800; b *= 2) {
        char doc[128];
        snprintf(doc, sizeof(doc), "{\"distributed\":{\"workers\":64,\"inter_node_gbps\":%g}}", b);
        CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &r), 0);
        CU_ASSERT(r.us <= prev + 1);
        prev = r.us;
        if (b == 1)
            t1 = r.us;
        t800 = r.us;
        release(&r);
    }
    /* Magnitude at 1 Gb/s: 2 * 63/64 * ~98 MiB / (0.8 * 125 MB/s) ~ 2 s of
     * communication per step; at 512 Gb/s it hides behind compute. */
    CU_ASSERT(t1 > 1.5e6 && t1 < 3.5e6);
    CU_ASSERT(t800 < 1.3 * r50w4.simulated_us);
    /* The estimated gradient size is ResNet-50's 25.6 M fp32 parameters. */
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, "{\"distributed\":{\"workers\":16}}", &r), 0);
    double mb = applied_num(&r, "gradient_mb");
    printf("    estimated gradients: %.1f MiB (ResNet-50: 97.5 MiB)\n", mb);
    CU_ASSERT(mb > 80 && mb < 115);
    release(&r);
    /* Slow network: hierarchical and BlueConnect beat the flat ring; DGC
     * beats both; a parameter server at 10 Gb/s is slower than 100 Gb/s. */
    result ring, hier, blue, dgc;
    CU_ASSERT_EQUAL_FATAL(
        predict(&r50w4, "{\"distributed\":{\"workers\":64,\"inter_node_gbps\":10}}", &ring), 0);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4,
                                  "{\"distributed\":{\"workers\":64,\"inter_node_gbps\":10,"
                                  "\"algorithm\":\"hierarchical\"}}",
                                  &hier),
                          0);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4,
                                  "{\"distributed\":{\"workers\":64,\"inter_node_gbps\":10,"
                                  "\"blueconnect\":true}}",
                                  &blue),
                          0);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4,
                                  "{\"distributed\":{\"workers\":64,\"inter_node_gbps\":10,"
                                  "\"dgc_density\":0.001}}",
                                  &dgc),
                          0);
    printf("    64 workers @10 Gb/s: ring %.0f, hierarchical %.0f, blueconnect %.0f, dgc %.0f ms\n",
           ring.us / 1e3, hier.us / 1e3, blue.us / 1e3, dgc.us / 1e3);
    CU_ASSERT(hier.us <= ring.us);
    CU_ASSERT(blue.us <= ring.us);
    CU_ASSERT(dgc.us < 0.5 * ring.us);
    release(&ring);
    release(&hier);
    release(&blue);
    release(&dgc);
    result ps10, ps100, p3;
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4,
                                  "{\"distributed\":{\"workers\":4,\"gpus_per_node\":1,"
                                  "\"inter_node_gbps\":10,\"algorithm\":\"parameter_server\"}}",
                                  &ps10),
                          0);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4,
                                  "{\"distributed\":{\"workers\":4,\"gpus_per_node\":1,"
                                  "\"inter_node_gbps\":100,\"algorithm\":\"parameter_server\"}}",
                                  &ps100),
                          0);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4,
                                  "{\"distributed\":{\"workers\":4,\"gpus_per_node\":1,"
                                  "\"inter_node_gbps\":10,\"p3\":true}}",
                                  &p3),
                          0);
    printf("    PS 4 workers: 10 Gb/s %.0f ms, 100 Gb/s %.0f ms, P3 @10 Gb/s %.0f ms\n",
           ps10.us / 1e3, ps100.us / 1e3, p3.us / 1e3);
    CU_ASSERT(ps100.us < ps10.us);
    CU_ASSERT(p3.us <= ps10.us * 1.001);
    release(&ps10);
    release(&ps100);
    release(&p3);
}

static double gpu_bound_with(const char *opt)
{
    char doc[512];
    result r;
    snprintf(doc, sizeof(doc), "{\"optimizations\":[{\"kind\":\"cpu_speed\",\"factor\":20}%s%s]}",
             opt ? "," : "", opt ? opt : "");
    if (predict(&r50w4, doc, &r) != 0)
        return -1;
    release(&r);
    return r.us;
}

/* Memory savers cost time on the GPU-bound step; direction and size. */
static void test_memory_savers(void)
{
    double base = gpu_bound_with(NULL);
    double rc1 = gpu_bound_with("{\"kind\":\"recompute\"}");
    double rc5 = gpu_bound_with("{\"kind\":\"recompute\",\"share\":0.5}");
    double gist = gpu_bound_with("{\"kind\":\"gist\"}");
    double v12 = gpu_bound_with("{\"kind\":\"vdnn\"}");
    double v400 = gpu_bound_with("{\"kind\":\"vdnn\",\"pcie_gbps\":3200}");
    double ga = gpu_bound_with("{\"kind\":\"gradient_accumulation\",\"steps\":4}");
    printf("\n    GPU-bound step %.1f ms: recompute %+.0f%%, half %+.0f%%, gist %+.0f%%, "
           "vdnn PCIe3 %+.0f%%, vdnn 400 GB/s %+.0f%%, grad-accum x4 %+.1f%%\n",
           base / 1e3, (rc1 / base - 1) * 100, (rc5 / base - 1) * 100, (gist / base - 1) * 100,
           (v12 / base - 1) * 100, (v400 / base - 1) * 100, (ga / base - 1) * 100);
    /* Recomputing the whole forward pass costs about one forward (a third
     * of the step); half of it about half that. */
    CU_ASSERT(rc1 > 1.15 * base && rc1 < 1.5 * base);
    CU_ASSERT(rc5 > base && rc5 < rc1);
    CU_ASSERT(gist > base && gist < 1.2 * base);
    CU_ASSERT(v12 > 1.2 * base);
    CU_ASSERT(v400 < v12 && v400 < 1.15 * base);
    CU_ASSERT(ga < base && ga > 0.9 * base);
}

/* A two-rank trace keeps its NCCL kernels; bandwidth rescales them. */
static void test_multirank(void)
{
    result same, slow, fast;
    CU_ASSERT_EQUAL_FATAL(predict(&nccl2, "{\"distributed\":{\"workers\":2}}", &same), 0);
    /* The trace gives its message sizes, so a modest slow-down hides behind
     * this CPU-bound step; 5 Gb/s cannot. */
    CU_ASSERT_EQUAL_FATAL(
        predict(&nccl2, "{\"distributed\":{\"workers\":2,\"intra_node_gbps\":5}}", &slow), 0);
    CU_ASSERT_EQUAL_FATAL(
        predict(&nccl2, "{\"distributed\":{\"workers\":2,\"intra_node_gbps\":100000}}", &fast), 0);
    double before = applied_num(&same, "comm_us_before");
    double after = applied_num(&same, "comm_us_after");
    printf("\n    2-rank trace: step %.1f ms; comm %.0f us; 5 Gb/s: %.1f ms; fast: %.1f ms\n",
           nccl2.simulated_us / 1e3, before, slow.us / 1e3, fast.us / 1e3);
    CU_ASSERT(applied_num(&same, "collectives_rescaled") > 0);
    /* Newer Kineto names every collective's message ("In msg nelems"). */
    CU_ASSERT_EQUAL(applied_num(&same, "sizes_from_trace"),
                    applied_num(&same, "collectives_rescaled"));
    /* Same network as the baseline assumption: the kernels keep their times. */
    CU_ASSERT_DOUBLE_EQUAL(after, before, before * 0.01 + 1);
    CU_ASSERT(slow.us > same.us);
    CU_ASSERT(fast.us <= same.us);
    release(&same);
    release(&slow);
    release(&fast);
}

/* Twice the batch on the GPU-bound ResNet-50 step (CPU work /20): the
 * step takes longer but less than twice as long (larger kernels run
 * nearer their peak, the optimizer stays), so throughput rises. */
static void test_batch_size(void)
{
    result base, r2, r64, half;
    const char *cpu = "{\"kind\":\"cpu_speed\",\"factor\":20}";
    char doc[256];
    snprintf(doc, sizeof(doc), "{\"optimizations\":[%s]}", cpu);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &base), 0);
    snprintf(doc, sizeof(doc), "{\"optimizations\":[%s,{\"kind\":\"batch_size\",\"factor\":2}]}",
             cpu);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &r2), 0);
    snprintf(doc, sizeof(doc), "{\"optimizations\":[%s,{\"kind\":\"batch_size\",\"to\":64}]}", cpu);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &r64), 0);
    snprintf(doc, sizeof(doc), "{\"optimizations\":[%s,{\"kind\":\"batch_size\",\"factor\":0.5}]}",
             cpu);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &half), 0);
    printf("\n    batch 32 -> 64, GPU-bound: %.1f -> %.1f ms (x%.2f), %.0f -> %.0f samples/s; "
           "batch 16: %.1f ms\n",
           base.us / 1e3, r2.us / 1e3, r2.us / base.us, base.samples_s, r2.samples_s,
           half.us / 1e3);
    CU_ASSERT(applied_num(&r2, "batch_from") == 32);
    CU_ASSERT(r2.us > 1.2 * base.us && r2.us < 2.0 * base.us);
    CU_ASSERT(r2.samples_s > base.samples_s);
    CU_ASSERT_DOUBLE_EQUAL(r64.us, r2.us, 1e-6 * r2.us);
    CU_ASSERT(half.us < base.us && half.us > 0.5 * base.us);
    CU_ASSERT(half.samples_s < base.samples_s);
    /* Larger batches never run a sample slower than smaller ones where
     * the kernels are past the largest size the trace measured (their
     * efficiency saturates); Zeus measures 0.89 and 0.87 of batch 32's
     * time per sample at 128 and 256. mfu counts the new batch's FLOPs. */
    result r128, r256;
    snprintf(doc, sizeof(doc), "{\"optimizations\":[%s,{\"kind\":\"batch_size\",\"to\":128}]}",
             cpu);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &r128), 0);
    snprintf(doc, sizeof(doc), "{\"optimizations\":[%s,{\"kind\":\"batch_size\",\"to\":256}]}",
             cpu);
    CU_ASSERT_EQUAL_FATAL(predict(&r50w4, doc, &r256), 0);
    printf("    per sample at 128: %.3f ms, at 256: %.3f ms; mfu at 32: %.3f, 256: %.3f\n",
           r128.us / 128e3, r256.us / 256e3, base.mfu, r256.mfu);
    /* Most of batch 256's kernels run at sizes the trace never measured:
     * the answer says their efficiency is borrowed. */
    char *w256 = json_dumps(r256.applied, 0);
    CU_ASSERT_PTR_NOT_NULL(w256 && strstr(w256, "batch_extrapolated"));
    free(w256);
    CU_ASSERT(r256.us / 256 <= r128.us / 128 * 1.01);
    CU_ASSERT(r256.us / 256 < base.us / 32);
    CU_ASSERT(r256.mfu > base.mfu && r256.mfu < 1);
    CU_ASSERT(half.mfu > 0 && half.mfu < base.mfu * 1.5);
    release(&r128);
    release(&r256);
    release(&base);
    release(&r2);
    release(&r64);
    release(&half);
    /* factor and to together, or neither: refused. */
    CU_ASSERT_EQUAL(
        predict(&r50w4, "{\"optimizations\":[{\"kind\":\"batch_size\",\"factor\":2,\"to\":64}]}",
                &r2),
        RV_ERR_INVALID);
    release(&r2);
    CU_ASSERT_EQUAL(predict(&r50w4, "{\"optimizations\":[{\"kind\":\"batch_size\"}]}", &r2),
                    RV_ERR_INVALID);
    release(&r2);
}

/* The answer bytes of doc on l, with prep (may be NULL: the run makes
 * its own); NULL on error. */
static char *answer_of(const loaded *l, const char *doc, const rv_run_prep *prep)
{
    rv_whatif *w = NULL;
    rv_run_result *res = NULL;
    rv_run_opts opts = {.iteration = RV_ITER_MEDIAN, .prep = prep};
    rv_error err;
    char *out = NULL;
    rv_error_clear(&err);
    if (rv_whatif_parse_text(doc, &w, &err) == 0 && rv_run(l->g, l->s, w, &opts, &res, &err) == 0)
        out = rv_run_render_bytes(res, 1, NULL);
    rv_run_result_free(res);
    rv_whatif_free(w);
    return out;
}

static const char *const prep_docs[] = {
    "{}",
    "{\"power_limit_w\":200}",
    "{\"power_limit_w\":171.5}",
    "{\"optimizations\":[{\"kind\":\"amp\"}]}",
    "{\"optimizations\":[{\"kind\":\"cpu_speed\",\"factor\":2}]}",
    "{\"optimizations\":[{\"kind\":\"batch_size\",\"factor\":2}]}",
    /* Several models, one matching no task ("changed": false), on another
     * GPU: each model's "changed" from the prep's fingerprint and its
     * predecessor's, as a run without a prep finds it. */
    "{\"gpu\":\"H100-SXM5\",\"power_limit_w\":250,\"optimizations\":[{\"kind\":\"scale\","
    "\"select\":{\"name\":\"no_such_kernel_anywhere\"},\"factor\":0.5},{\"kind\":\"cpu_speed\","
    "\"factor\":2},{\"kind\":\"scale\",\"select\":{\"kind\":\"kernel\"},\"factor\":1}]}",
};
#define NPREP_DOCS (sizeof(prep_docs) / sizeof(prep_docs[0]))

typedef struct prep_job {
    const loaded *l;
    const rv_run_prep *prep;
    char *const *want;
    int same; /* answers equal to want */
} prep_job;

static void *prep_worker(void *arg)
{
    prep_job *j = arg;
    for (size_t i = 0; i < NPREP_DOCS; i++) {
        char *got = answer_of(j->l, prep_docs[i], j->prep);
        j->same += got && j->want[i] && strcmp(got, j->want[i]) == 0;
        free(got);
    }
    return NULL;
}

/* The applied models' "changed" flags of an answer, in order, as 't'/'f'. */
static void changed_flags(const char *answer, char *out, size_t cap)
{
    size_t n = 0;
    const char *a = answer ? strstr(answer, "\"applied\"") : NULL;
    for (const char *q = a; q && (q = strstr(q, "\"changed\":")) && n + 1 < cap; q++)
        out[n++] = q[10] == 't' ? 't' : 'f';
    out[n] = '\0';
}

/* Each model says whether it changed the graph, with a prep (whose
 * fingerprint stands for the fresh clone's) and without: the scale that
 * matches nothing and the one by 1 did not. */
static void test_changed_flags(void)
{
    const char *doc = prep_docs[NPREP_DOCS - 1];
    rv_run_prep *prep = NULL;
    rv_error err;
    char a[16], b[16];
    CU_ASSERT_EQUAL_FATAL(rv_run_prep_new(r50w0.g, r50w0.s, RV_ITER_MEDIAN, &prep, &err), 0);
    char *own = answer_of(&r50w0, doc, NULL), *shared = answer_of(&r50w0, doc, prep);
    changed_flags(own, a, sizeof(a));
    changed_flags(shared, b, sizeof(b));
    /* gpu, scale (no match), cpu_speed, scale by 1, power_limit */
    CU_ASSERT_STRING_EQUAL(a, "tftft");
    CU_ASSERT_STRING_EQUAL(b, "tftft");
    free(own);
    free(shared);
    /* A first model that changes nothing compares with the prep's own. */
    shared = answer_of(&r50w0,
                       "{\"optimizations\":[{\"kind\":\"scale\",\"select\":{\"name\":"
                       "\"no_such_kernel_anywhere\"},\"factor\":0.5}]}",
                       prep);
    changed_flags(shared, b, sizeof(b));
    CU_ASSERT_STRING_EQUAL(b, "f");
    free(shared);
    /* The power model tells itself what it moved: the trace's own 300 W
     * moves nothing, 250 W does, and a later model still compares with
     * the graph as the power model left it. */
    static const struct {
        const char *doc, *want;
    } power[] = {
        {"{\"power_limit_w\":300}", "f"},
        {"{\"power_limit_w\":250}", "t"},
        {"{\"power_limit_w\":300,\"optimizations\":[{\"kind\":\"dataloader\","
         "\"speedup\":2}]}",
         "ft"},
        {"{\"power_limit_w\":250,\"optimizations\":[{\"kind\":\"dataloader\","
         "\"speedup\":2}]}",
         "tt"},
        {"{\"power_limit_w\":250,\"optimizations\":[{\"kind\":\"dataloader\","
         "\"speedup\":1}]}",
         "tf"},
    };
    for (size_t i = 0; i < sizeof(power) / sizeof(power[0]); i++) {
        own = answer_of(&r50w0, power[i].doc, NULL);
        shared = answer_of(&r50w0, power[i].doc, prep);
        CU_ASSERT_PTR_NOT_NULL(own);
        CU_ASSERT_PTR_NOT_NULL(shared);
        changed_flags(own, a, sizeof(a));
        changed_flags(shared, b, sizeof(b));
        CU_ASSERT_STRING_EQUAL(a, power[i].want);
        CU_ASSERT_STRING_EQUAL(b, power[i].want);
        free(own);
        free(shared);
    }
    rv_run_prep_free(prep);
}

/* One rv_run_prep shared by runs on two threads (as the server's cached
 * graphs do) gives the very bytes of runs that make their own. */
static void test_shared_prep(void)
{
    const loaded *ls[] = {&r50w0, &nccl2};
    for (size_t k = 0; k < 2; k++) {
        char *want[NPREP_DOCS];
        rv_run_prep *prep = NULL;
        rv_error err;
        for (size_t i = 0; i < NPREP_DOCS; i++) {
            want[i] = answer_of(ls[k], prep_docs[i], NULL);
            CU_ASSERT_PTR_NOT_NULL(want[i]);
        }
        CU_ASSERT_EQUAL_FATAL(rv_run_prep_new(ls[k]->g, ls[k]->s, RV_ITER_MEDIAN, &prep, &err), 0);
        prep_job a = {ls[k], prep, want, 0}, b = a;
        pthread_t ta, tb;
        int sa = pthread_create(&ta, NULL, prep_worker, &a) == 0;
        int sb = pthread_create(&tb, NULL, prep_worker, &b) == 0;
        if (sa)
            pthread_join(ta, NULL);
        else
            prep_worker(&a);
        if (sb)
            pthread_join(tb, NULL);
        else
            prep_worker(&b);
        CU_ASSERT_EQUAL(a.same, (int)NPREP_DOCS);
        CU_ASSERT_EQUAL(b.same, (int)NPREP_DOCS);
        rv_run_prep_free(prep);
        for (size_t i = 0; i < NPREP_DOCS; i++)
            free(want[i]);
    }
}

int main(void)
{
    traces = rv_test_shared_traces("kineto/resnet50-v100-workers0.pt.trace.json.gz");
    if (!traces) {
        printf("skipped: RV_SHARED_TRACES not set or without the ResNet-50 traces\n");
        return 77;
    }
    if (load("kineto/resnet50-v100-workers0.pt.trace.json.gz", &r50w0) ||
        load("kineto/resnet50-v100-workers4.pt.trace.json.gz", &r50w4) ||
        load("hta/a100-2rank-nccl.json.gz", &nccl2))
        return 1;
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 2;
    CU_pSuite s = CU_add_suite("whatif_real", NULL, NULL);
    CU_add_test(s, "empty_is_replay", test_empty_is_replay);
    CU_add_test(s, "dataloader_pair", test_dataloader_pair);
    CU_add_test(s, "power_curve", test_power_curve);
    CU_add_test(s, "amp", test_amp);
    CU_add_test(s, "fusions", test_fusions);
    CU_add_test(s, "generic", test_generic);
    CU_add_test(s, "changed_flags", test_changed_flags);
    CU_add_test(s, "distributed", test_distributed);
    CU_add_test(s, "multirank", test_multirank);
    CU_add_test(s, "memory_savers", test_memory_savers);
    CU_add_test(s, "batch_size", test_batch_size);
    CU_add_test(s, "shared_prep", test_shared_prep);
    unsigned fails = rv_test_run();
    unload(&r50w0);
    unload(&r50w4);
    unload(&nccl2);
    return fails ? 1 : 0;
}
