/* Precision as a class of traces (issue 15 item 8), on the public traces.
 *
 * The detector reads the precision each kernel ran in from real kernel
 * names (cuBLAS, cuDNN, CUTLASS, Tensile, flash attention, ATen) and from
 * the launching op's "Input type" (Triton). Through rv_run, the one
 * pipeline the CLI and the API use: AMP leaves kernels already at the
 * target alone (an already-bf16 H100 trace gets ~1.0x), refuses a dtype
 * the GPU lacks (bf16 or fp8 on V100) naming the field, and still answers
 * for a GPU outside the hardware table with Daydream's ratios and a
 * warning (the AMD MI250 trace).
 *
 * Built with -DRV_PREC_RUN_ONLY only the rv_run cases are compiled: they
 * use the public API alone, so they also link against an engine from
 * before rv_precision.h, which is how they were shown to fail there.
 * Skips (77) without RV_SHARED_TRACES. */
#include <CUnit/Basic.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "graph/rv_graph.h"
#include "hw/rv_hw.h"
#include "reader/rv_kineto.h"
#include "run/rv_run.h"
#include "simulate/rv_sim.h"
#include "whatif/rv_whatif.h"
#include "common/rv_test_trace.h"
#include "common/rv_test_util.h"
#ifndef RV_PREC_RUN_ONLY
#include "graph/rv_precision.h"
#include "reader/rv_snapshot.h"
#endif

static const char *traces;

#define V100_RESNET "kineto/resnet50-v100-workers4.pt.trace.json.gz"
#define H100_BERT   "tracelens/h100-bert-small-forward.json.gz"
#define H100_VIT    "tracelens/h100-falconsai-vit-forward.json.gz"
#define MI250       "hta/edge/amd-mi250-rocm62.json.gz"
#define TRITON      "hta/edge/triton-driver-launch.json.gz"
#define A100_FIVE   "hta/a100-rank0-of-16-five-streams.json.gz"
#define V100_SMALL  "hta/v100-1rank-ns-resolution.json.gz"
#define NO_GPU      "hta/edge/legacy-categories.json.gz"
#define A100_FP16   "hta/cuda-event-sync.json.gz"

typedef rv_test_loaded loaded;

static int load(const char *rel, loaded *l)
{
    return rv_test_load(traces, rel, l);
}

static void unload(loaded *l)
{
    rv_test_unload(l);
}

/* Runs doc on l: 0 and *out (new), or the error code with *err filled. */
static int run(const loaded *l, const char *doc, rv_run_result **out, rv_error *err)
{
    rv_whatif *w = NULL;
    rv_run_opts o = {.iteration = RV_ITER_MEDIAN};
    *out = NULL;
    rv_error_clear(err);
    int rc = rv_whatif_parse_text(doc, &w, err);
    if (!rc)
        rc = rv_run(l->g, l->s, w, &o, out, err);
    rv_whatif_free(w);
    return rc;
}

/* The amp entry of r's applied list (borrowed), NULL when none. */
static json_t *amp_entry(const rv_run_result *r)
{
    size_t i;
    json_t *a;
    json_array_foreach(r->applied, i, a)
    {
        const char *m = json_string_value(json_object_get(a, "model"));
        if (m && strcmp(m, "amp") == 0)
            return a;
    }
    return NULL;
}

/* A number of the amp entry; NAN when the entry or the member is absent. */
static double amp_num(const rv_run_result *r, const char *key)
{
    json_t *a = amp_entry(r);
    json_t *v = a ? json_object_get(a, key) : NULL;
    return json_is_number(v) ? json_number_value(v) : NAN;
}

static int has_warning(const rv_run_result *r, const char *code)
{
    for (size_t i = 0; i < r->nwarnings; i++)
        if (strcmp(r->warnings[i].code, code) == 0)
            return 1;
    return 0;
}

/* ------------------------------------------------ through rv_run */

/* A dtype the GPU lacks is refused, naming the dtype field and the GPU.
 * Before: bf16 on V100 returned an answer with 1,872 GEMMs "scaled", fp8
 * cut the GEMM time 4x. */
static void check_refused(const char *doc, const char *dtype)
{
    loaded l;
    rv_run_result *r;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(load(V100_RESNET, &l), 0);
    int rc = run(&l, doc, &r, &err);
    printf("\n    V100 amp %s: rc %d, field '%s': %s", dtype, rc, err.field,
           rc ? err.message : "-");
    CU_ASSERT_EQUAL(rc, RV_ERR_UNSUPPORTED);
    CU_ASSERT_STRING_EQUAL(err.field, "optimizations[0].dtype");
    CU_ASSERT_PTR_NOT_NULL(strstr(err.message, "V100"));
    CU_ASSERT_PTR_NOT_NULL(strstr(err.message, dtype));
    rv_run_result_free(r);
    unload(&l);
}

static void test_bf16_on_v100_refused(void)
{
    check_refused("{\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"bf16\"}]}", "bf16");
    /* Daydream's rule does not make the hardware any different. */
    check_refused(
        "{\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"bf16\",\"model\":\"daydream\"}]}",
        "bf16");
}

static void test_fp8_on_v100_refused(void)
{
    check_refused("{\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"fp8\"}]}", "fp8");
}

/* fp16 on the fp32 V100 trace, GPU-bound (cpu_speed 20): every kernel was
 * fp32, none is at the target; the speedup stays in the range
 * docs/models/amp.md gives (NVIDIA measures 3.26x with a larger batch). */
static void test_fp16_on_v100(void)
{
    loaded l;
    rv_run_result *base, *r;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(load(V100_RESNET, &l), 0);
    CU_ASSERT_EQUAL_FATAL(
        run(&l, "{\"optimizations\":[{\"kind\":\"cpu_speed\",\"factor\":20}]}", &base, &err), 0);
    int rc = run(&l,
                 "{\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"fp16\"},"
                 "{\"kind\":\"cpu_speed\",\"factor\":20}]}",
                 &r, &err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    double sp = base->sum.predicted_us / r->sum.predicted_us;
    printf("\n    V100 fp16, GPU-bound: %.2fx; gemm scaled %.0f, already at target %.0f, non-float "
           "kept %.0f, optimizer kept %.0f",
           sp, amp_num(r, "gemm_scaled"), amp_num(r, "already_at_target"),
           amp_num(r, "non_float_kept"), amp_num(r, "optimizer_kept"));
    CU_ASSERT(sp > 2.3 && sp < 4.0);
    CU_ASSERT(amp_num(r, "gemm_scaled") > 1000);
    CU_ASSERT_EQUAL(amp_num(r, "already_at_target"), 0);
    /* BatchNorm's num_batches_tracked += 1 runs on int64: not autocast. */
    CU_ASSERT(amp_num(r, "non_float_kept") > 0);
    /* SGD's step works on the fp32 master weights. */
    CU_ASSERT(amp_num(r, "optimizer_kept") > 0);
    rv_run_result_free(base);
    rv_run_result_free(r);
    unload(&l);
}

/* bf16 inference on H100 asked to run in bf16 (or fp16, the same width):
 * nothing to gain. Every GEMM is already there. */
static void check_already_bf16(const char *trace, const char *dtype)
{
    loaded l;
    rv_run_result *r;
    rv_error err;
    char doc[128];
    snprintf(doc, sizeof(doc), "{\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"%s\"}]}", dtype);
    CU_ASSERT_EQUAL_FATAL(load(trace, &l), 0);
    CU_ASSERT_EQUAL_FATAL(run(&l, doc, &r, &err), 0);
    printf("\n    %s amp %s: %.4fx, already at target %.0f (%.0f us), GEMM time at target %.2f",
           trace, dtype, r->sum.speedup, amp_num(r, "already_at_target"),
           amp_num(r, "already_at_target_us"), amp_num(r, "gemm_time_at_target"));
    CU_ASSERT(fabs(r->sum.speedup - 1.0) < 0.01);
    CU_ASSERT(amp_num(r, "already_at_target") > 20);
    CU_ASSERT(amp_num(r, "gemm_time_at_target") > 0.99);
    CU_ASSERT_EQUAL(amp_num(r, "gemm_scaled"), 0);
    rv_run_result_free(r);
    unload(&l);
}

static void test_already_bf16_h100(void)
{
    check_already_bf16(H100_BERT, "bf16");
    check_already_bf16(H100_VIT, "bf16");
    check_already_bf16(H100_VIT, "fp16");
}

/* The MI250 trace names its GPU "AMD Radeon Graphics": not in the table.
 * Before, AMP was refused; now Daydream's ratios answer, with a warning,
 * and the Tensile GEMMs count as GEMMs. fp8 has no Daydream ratio. */
static void test_unknown_gpu_daydream(void)
{
    loaded l;
    rv_run_result *r;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(load(MI250, &l), 0);
    const char *dts[] = {"fp16", "bf16"};
    for (int k = 0; k < 2; k++) {
        char doc[128];
        snprintf(doc, sizeof(doc), "{\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"%s\"}]}",
                 dts[k]);
        int rc = run(&l, doc, &r, &err);
        CU_ASSERT_EQUAL(rc, 0);
        if (rc) {
            printf("\n    MI250 amp %s: %s (%s)", dts[k], err.message, err.field);
            continue;
        }
        json_t *a = amp_entry(r);
        const char *method = json_string_value(json_object_get(a, "method"));
        printf("\n    MI250 amp %s: %.4fx, method %s, gemm scaled %.0f, busy %.1f -> %.1f us",
               dts[k], r->sum.speedup, method ? method : "?", amp_num(r, "gemm_scaled"),
               amp_num(r, "scaled_busy_us_before"), amp_num(r, "scaled_busy_us_after"));
        CU_ASSERT(has_warning(r, "amp_daydream_ratios"));
        CU_ASSERT(method && strcmp(method, "daydream") == 0);
        CU_ASSERT(amp_num(r, "gemm_scaled") >= 2); /* the two Cijk_ GEMMs */
        CU_ASSERT(amp_num(r, "scaled_busy_us_after") < 0.5 * amp_num(r, "scaled_busy_us_before"));
        CU_ASSERT(r->sum.speedup >= 1.0);
        rv_run_result_free(r);
    }
    int rc = run(&l, "{\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"fp8\"}]}", &r, &err);
    printf("\n    MI250 amp fp8: rc %d, field '%s'", rc, err.field);
    CU_ASSERT_EQUAL(rc, RV_ERR_UNSUPPORTED);
    CU_ASSERT_STRING_EQUAL(err.field, "gpu");
    rv_run_result_free(r);
    unload(&l);
}

/* A trace that names no GPU at all (legacy categories, no
 * deviceProperties; fp16 kernels): before, refused; now Daydream's ratios
 * with the warning, and its fp16 kernels stay as they are. */
static void test_no_gpu_name(void)
{
    loaded l;
    rv_run_result *r;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(load(NO_GPU, &l), 0);
    int rc = run(&l, "{\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"fp16\"}]}", &r, &err);
    if (rc)
        printf("\n    %s amp fp16: %s (%s)", NO_GPU, err.message, err.field);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    printf("\n    %s amp fp16: %.4fx, already at target %.0f", NO_GPU, r->sum.speedup,
           amp_num(r, "already_at_target"));
    CU_ASSERT(has_warning(r, "amp_daydream_ratios"));
    CU_ASSERT_EQUAL(amp_num(r, "already_at_target"), 4);
    CU_ASSERT(fabs(r->sum.speedup - 1.0) < 1e-3);
    rv_run_result_free(r);
    unload(&l);
}

/* Integer kernels are not autocast: the fp16 A100 trace's 36 us
 * spin_kernel(long) was halved before (1.0054x for nothing). */
static void test_integer_kernels_kept(void)
{
    loaded l;
    rv_run_result *r;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(load(A100_FP16, &l), 0);
    CU_ASSERT_EQUAL_FATAL(
        run(&l, "{\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"fp16\"}]}", &r, &err), 0);
    printf("\n    %s amp fp16: %.4fx, non-float kept %.0f, already at target %.0f", A100_FP16,
           r->sum.speedup, amp_num(r, "non_float_kept"), amp_num(r, "already_at_target"));
    CU_ASSERT(fabs(r->sum.speedup - 1.0) < 1e-3);
    CU_ASSERT_EQUAL(amp_num(r, "non_float_kept"), 1);
    CU_ASSERT_EQUAL(amp_num(r, "already_at_target"), 3);
    rv_run_result_free(r);
    unload(&l);
}

/* An NVIDIA GPU outside the table still has a compute capability: the V100
 * trace with its device renamed is refused bf16 (7.0 < 8.0) and gets fp16
 * through Daydream's ratios. */
static void test_unknown_nvidia_by_compute_capability(void)
{
    loaded l;
    rv_run_result *r;
    rv_error err;
    static const char name[] = "NVIDIA Mystery Board";
    CU_ASSERT_EQUAL_FATAL(load(V100_SMALL, &l), 0);
    uint32_t id = rv_strtab_intern(&l.tr->strings, name, sizeof(name) - 1);
    CU_ASSERT_FATAL(id != UINT32_MAX);
    l.tr->platform_gpu = id;
    for (size_t i = 0; i < l.tr->ndevices; i++)
        l.tr->devices[i].name = id;
    int rc = run(&l, "{\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"bf16\"}]}", &r, &err);
    printf("\n    renamed V100 amp bf16: rc %d, field '%s': %s", rc, err.field,
           rc ? err.message : "-");
    CU_ASSERT_EQUAL(rc, RV_ERR_UNSUPPORTED);
    CU_ASSERT_STRING_EQUAL(err.field, "optimizations[0].dtype");
    CU_ASSERT_PTR_NOT_NULL(strstr(err.message, "7.0"));
    rv_run_result_free(r);
    rc = run(&l, "{\"optimizations\":[{\"kind\":\"amp\",\"dtype\":\"fp16\"}]}", &r, &err);
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    printf("\n    renamed V100 amp fp16: %.4fx", r->sum.speedup);
    CU_ASSERT(has_warning(r, "amp_daydream_ratios"));
    CU_ASSERT(r->sum.speedup > 1.0);
    rv_run_result_free(r);
    unload(&l);
}

#ifndef RV_PREC_RUN_ONLY
/* ------------------------------------------------ the detector */

/* Kernel names as the public traces spell them (file beside each). */
static void test_names(void)
{
    static const struct {
        const char *name;
        int dtype;
    } k[] = {
        /* tracelens/h100-*: bf16 inference on H100. */
        {"sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize64x64x64_warpgroupsize1x1x1_execute_"
         "segment_k_off_kernel__5x_cublas",
         RV_DT_BF16},
        {"void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_"
         "align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_32x32_128x2_tn_align8::Params)",
         RV_DT_BF16},
        {"void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_"
         "32x4_nhwc_align8>(cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_"
         "align8::Params)",
         RV_DT_BF16},
        {"void pytorch_flash::flash_fwd_kernel<pytorch_flash::Flash_fwd_kernel_traits<64, 128, "
         "128, "
         "4, false, false, cutlass::bfloat16_t, pytorch_flash::Flash_kernel_traits<64, 128, 128, "
         "4, "
         "cutlass::bfloat16_t> >, false, false, false, false, false, true, false>(pytorch_flash::"
         "Flash_fwd_params)",
         RV_DT_BF16},
        {"void cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16, __nv_bfloat16, float, "
         "false, true, (cudnnKernelDataType_t)0>(cudnn::engines_precompiled::nchw2nhwc_params_t<"
         "float>, __nv_bfloat16 const*, __nv_bfloat16*)",
         RV_DT_BF16},
        {"void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, "
         "float>(int, float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, "
         "float*, float*, c10::BFloat16*)",
         RV_DT_BF16},
        /* kineto/resnet50-v100-*: fp32 training on V100. */
        {"volta_sgemm_64x64_nt", RV_DT_FP32},
        {"volta_scudnn_128x64_relu_interior_nn_v1", RV_DT_FP32},
        {"void implicit_convolve_sgemm<float, float, 1024, 6, 7, 3, 3, 5, 1, false, true, true>("
         "int, int, int, float const*, int, float*, float const*, kernel_conv_params, unsigned "
         "long long, int, float, float, int, float const*, float const*, bool, int, int)",
         RV_DT_FP32},
        /* hta/edge/amd-mi250-rocm62: Tensile fp32 ("SB": S data, beta). */
        {"Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_"
         "ASEM1_CLR1_CADS0_EPS0_GRVWA2_GRVWB2_GSUAMB_ISA90a_IU1_K1_LBSPPA128_LBSPPB128",
         RV_DT_FP32},
        /* Tensile's naming for fp16/bf16 in and out with fp32 compute, and
         * fp8 (the form hipBLASLt writes on MI300). */
        {"Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB1_APM1", RV_DT_FP16},
        {"Cijk_Ailk_Bjlk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT256x256x64_MI16x16x1", RV_DT_BF16},
        {"Cijk_Alik_Bljk_F8SS_BH_UserArgs_MT128x128x64_MI16x16x1", RV_DT_FP8},
        /* hta/a100-*: cuDNN and CUTLASS tf32 on A100. */
        {"sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_"
         "tilesize128x128x16_"
         "stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn",
         RV_DT_TF32},
        {"void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x64_16x4_tn_align1>(cutlass_80_"
         "tensorop_s1688gemm_256x64_16x4_tn_align1::Params)",
         RV_DT_TF32},
        /* hta/edge/cupti-counters-no-kernels: "hmma" in a tf32 trait. */
        {"void xmma_new::gemm::kernel<xmma_new::implicit_gemm::fprop::Kernel_traits<xmma_new::"
         "Ampere_hmma_tf32_traits<unsigned int, float>, xmma_new::Cta_tile<xmma_new::Ampere, 128, "
         "128, 16, 2, 2, 1, 1, 1>",
         RV_DT_TF32},
        /* hta/edge/legacy-categories and cuda-event-sync: fp16. */
        {"void cutlass::Kernel<cutlass_70_wmma_tensorop_f16_s161616gemm_f16_32x32_64x2_tn_align8>("
         "cutlass_70_wmma_tensorop_f16_s161616gemm_f16_32x32_64x2_tn_align8::Params)",
         RV_DT_FP16},
        {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<c10::Half>, "
         "at::detail::Array<char*, 1> >(int, at::native::FillFunctor<c10::Half>, "
         "at::detail::Array<char*, 1>)",
         RV_DT_FP16},
        /* cuBLAS/cuDNN fp16 and fp8 names of the same families. */
        {"volta_h884gemm_64x64_ldg8_nn", RV_DT_FP16},
        {"turing_fp16_s1688gemm_fp16_128x128_ldg8_f2f_nn", RV_DT_FP16},
        {"sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize128x128x32_stage4_warpsize2x2x1",
         RV_DT_FP16},
        {"sm90_xmma_gemm_e4m3e4m3_e4m3f32_f32_tn_n_tilesize128x128x128_cublas", RV_DT_FP8},
        /* Names that say nothing by themselves (hta/edge/triton-driver-launch,
         * the dgrad of kineto/resnet50-v100). */
        {"triton_poi_fused_add_cos_sin_0", RV_PREC_UNKNOWN},
        {"void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int, int, int, float "
         "const*, int, float const*, int, float*, kernel_grad_params, unsigned long long, int, "
         "unsigned long long, int, float, int, int, int)",
         RV_PREC_UNKNOWN},
    };
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        int d = rv_kname_dtype(k[i].name);
        if (d != k[i].dtype)
            printf("\n    %.60s: %d, want %d", k[i].name, d, k[i].dtype);
        CU_ASSERT_EQUAL(d, k[i].dtype);
    }
    /* Without a marker, the op's "Input type" decides, then ATen's template
     * arguments, then fp32 is assumed. */
    CU_ASSERT_EQUAL(rv_kname_kernel_dtype("triton_poi_fused_add_cos_sin_0", RV_PT_BF16),
                    RV_DT_BF16);
    CU_ASSERT_EQUAL(rv_kname_kernel_dtype("triton_poi_fused_add_cos_sin_0", RV_PT_FP32),
                    RV_DT_FP32);
    CU_ASSERT_EQUAL(rv_kname_kernel_dtype("triton_poi_fused_add_cos_sin_0", RV_PT_NONE),
                    RV_PREC_UNKNOWN);
    /* tracelens/h100-bert: CompareEqFunctor<long>, ReduceOp<bool, ...>. */
    CU_ASSERT_EQUAL(
        rv_kname_kernel_dtype("void at::native::vectorized_elementwise_kernel<4, "
                              "at::native::AUnaryFunctor<long, long, bool, "
                              "at::native::(anonymous namespace)::CompareEqFunctor<long> "
                              ">, std::array<char*, 2ul> >",
                              RV_PT_NONE),
        RV_PREC_NONFLOAT);
    CU_ASSERT_EQUAL(rv_kname_kernel_dtype("void at::native::reduce_kernel<512, 1, "
                                          "at::native::ReduceOp<bool, at::native::func_wrapper_t<"
                                          "bool, at::native::and_kernel_cuda",
                                          RV_PT_NONE),
                    RV_PREC_NONFLOAT);
    /* tracelens/h100-falconsai-vit: a cat of 2-byte elements. */
    CU_ASSERT_EQUAL(rv_kname_kernel_dtype("void at::native::(anonymous namespace)::CatArrayBatched"
                                          "Copy<at::native::(anonymous namespace)::OpaqueType<2u>, "
                                          "unsigned int, 3, 64, 64>",
                                          RV_PT_NONE),
                    RV_DT_FP16);
    /* A marker in the name beats the op's input type. */
    CU_ASSERT_EQUAL(rv_kname_kernel_dtype("volta_sgemm_64x64_nt", RV_PT_BF16), RV_DT_FP32);
    /* Classes: Tensile GEMMs and Triton templates are GEMMs; ATen's
     * "{lambda(float)#1}" is no LAMB optimizer. */
    CU_ASSERT_EQUAL(
        rv_kname_class("Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN"),
        RV_KC_GEMM);
    CU_ASSERT_EQUAL(rv_kname_class("triton_tem_fused_addmm_0"), RV_KC_GEMM);
    CU_ASSERT_EQUAL(rv_kname_class("void at::native::vectorized_elementwise_kernel<4, "
                                   "at::native::threshold_kernel_impl<float>(at::"
                                   "TensorIteratorBase&, float, float)::{lambda(float, float)#1}, "
                                   "at::detail::Array<char*, 3> >"),
                    RV_KC_MEMBOUND);
    CU_ASSERT_EQUAL(rv_kname_class("void multi_tensor_apply_kernel<TensorListMetadata<4>, "
                                   "AdamFunctor<float>, float, float, float, float>"),
                    RV_KC_OPTIMIZER);
}

/* "Input type" entries as Kineto writes them, old and new. */
static void test_input_types(void)
{
#define CODE(s) rv_kname_type_code(s, strlen(s))
    CU_ASSERT_EQUAL(CODE("c10::BFloat16"), RV_PT_BF16);
    CU_ASSERT_EQUAL(CODE("c10::Half"), RV_PT_FP16);
    CU_ASSERT_EQUAL(CODE("float"), RV_PT_FP32);
    CU_ASSERT_EQUAL(CODE("c10::Float8_e4m3fn"), RV_PT_FP8);
    CU_ASSERT_EQUAL(CODE("double"), RV_PT_FP64);
    CU_ASSERT_EQUAL(CODE("long int"), RV_PT_NONFLOAT);
    CU_ASSERT_EQUAL(CODE("bool"), RV_PT_NONFLOAT);
    CU_ASSERT_EQUAL(CODE("Scalar"), RV_PT_NONE);
    CU_ASSERT_EQUAL(CODE(""), RV_PT_NONE);
    CU_ASSERT_EQUAL(CODE("Int"), RV_PT_NONE); /* old Kineto: a scalar */
    /* aten::index_select(c10::BFloat16, Scalar, long int): bf16;
     * aten::add_(double, float, Scalar) runs in fp64;
     * aten::gt(int, Scalar): integer. */
    int c = RV_PT_NONE;
    c = rv_kname_type_merge(c, CODE("c10::BFloat16"));
    c = rv_kname_type_merge(c, CODE("Scalar"));
    c = rv_kname_type_merge(c, CODE("long int"));
    CU_ASSERT_EQUAL(c, RV_PT_BF16);
    c = rv_kname_type_merge(rv_kname_type_merge(RV_PT_NONE, CODE("double")), CODE("float"));
    CU_ASSERT_EQUAL(rv_kname_type_dtype(c), RV_PREC_NONFLOAT);
    c = rv_kname_type_merge(rv_kname_type_merge(RV_PT_NONE, CODE("int")), CODE("Scalar"));
    CU_ASSERT_EQUAL(c, RV_PT_NONFLOAT);
#undef CODE
}

/* The reader keeps each op's input type; a kernel finds its op through
 * the call that launched it (both Kineto id schemes: the A100 trace's
 * kernels carry their correlation as External id), and a snapshot keeps
 * the codes. */
static void check_triton(const char *trace, const char *prefix, int want)
{
    loaded l;
    rv_prec_ctx c;
    size_t n = 0, from_op = 0;
    CU_ASSERT_EQUAL_FATAL(load(trace, &l), 0);
    CU_ASSERT_EQUAL_FATAL(rv_prec_ctx_init(&c, l.g), 0);
    for (size_t i = 0; i < l.g->ntasks; i++) {
        /* Kernels the trace lost the launch of have no op to ask. */
        if (l.g->tasks[i].kind != RV_TASK_GPU || l.g->tasks[i].launch < 0 ||
            strncmp(rv_task_name(l.g, i), prefix, strlen(prefix)) != 0)
            continue;
        int src, d = rv_prec_of_task(&c, i, &src);
        n++;
        from_op += src == RV_PS_INPUT_TYPE && d == want;
    }
    printf("\n    %s: %zu launched %s kernels, %zu typed by their op", trace, n, prefix, from_op);
    CU_ASSERT(n > 0);
    CU_ASSERT_EQUAL(from_op, n);
    rv_prec_ctx_free(&c);

    uint8_t *snap = NULL;
    size_t len = 0, typed = 0, same = 1;
    rv_trace *back = NULL;
    rv_error err;
    CU_ASSERT_EQUAL_FATAL(rv_snapshot_encode(l.tr, 1, &snap, &len, &err), 0);
    CU_ASSERT_EQUAL_FATAL(rv_snapshot_decode(snap, len, &back, &err), 0);
    for (size_t i = 0; i < l.tr->nevents; i++) {
        typed += l.tr->events[i].in_type != RV_PT_NONE;
        same &= back->events[i].in_type == l.tr->events[i].in_type;
    }
    CU_ASSERT(typed > 0);
    CU_ASSERT(same);
    free(snap);
    rv_trace_free(back);
    unload(&l);
}

static void test_input_type_lookup(void)
{
    check_triton(TRITON, "triton_", RV_DT_FP32);
    check_triton(A100_FIVE, "triton_", RV_DT_FP32);
}

/* Which GPU has which dtype: the table's peaks, T4 included. */
static void test_gpu_support(void)
{
    static const struct {
        const char *gpu;
        int fp16, bf16, fp8;
    } t[] = {
        {"Tesla V100-DGXS-32GB", 1, 0, 0},
        {"Tesla V100-SXM2-32GB", 1, 0, 0},
        {"Tesla P100-PCIE-16GB", 1, 0, 0},
        {"Quadro GP100", 1, 0, 0},
        {"NVIDIA GeForce RTX 2080 Ti", 1, 0, 0},
        {"Quadro RTX 6000", 1, 0, 0},
        {"Tesla T4", 1, 0, 0},
        {"NVIDIA A100-SXM4-80GB", 1, 1, 0},
        {"NVIDIA A40", 1, 1, 0},
        {"NVIDIA H100 80GB HBM3", 1, 1, 1},
        {"NVIDIA H200", 1, 1, 1},
        {"AMD Instinct MI250X", 1, 1, 0},
        {"AMD Instinct MI300X", 1, 1, 1},
    };
    char why[200];
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
        const rv_hw *hw = rv_hw_lookup(t[i].gpu);
        CU_ASSERT_PTR_NOT_NULL(hw);
        if (!hw) {
            printf("\n    %s: not in the table", t[i].gpu);
            continue;
        }
        CU_ASSERT_EQUAL(rv_prec_gpu_has(hw, NULL, RV_DT_FP16, why, sizeof(why)), t[i].fp16);
        CU_ASSERT_EQUAL(rv_prec_gpu_has(hw, NULL, RV_DT_BF16, why, sizeof(why)), t[i].bf16);
        CU_ASSERT_EQUAL(rv_prec_gpu_has(hw, NULL, RV_DT_FP8, why, sizeof(why)), t[i].fp8);
    }
    CU_ASSERT_STRING_EQUAL(rv_hw_lookup("Tesla T4")->name, "T4");
    CU_ASSERT_PTR_NULL(rv_hw_lookup("NVIDIA RTX A4000"));
    CU_ASSERT_PTR_NULL(rv_hw_lookup("NVIDIA T400"));
    /* Neither a row nor a trace: cannot tell. */
    CU_ASSERT_EQUAL(rv_prec_gpu_has(NULL, NULL, RV_DT_BF16, why, sizeof(why)), -1);
}
#endif

int main(void)
{
    traces = rv_test_require_shared_traces(V100_RESNET);
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("precision", NULL, NULL);
#ifndef RV_PREC_RUN_ONLY
    CU_add_test(s, "kernel names", test_names);
    CU_add_test(s, "op input types", test_input_types);
    CU_add_test(s, "kernels typed by their op", test_input_type_lookup);
    CU_add_test(s, "GPU support per dtype", test_gpu_support);
#endif
    CU_add_test(s, "bf16 on V100 refused", test_bf16_on_v100_refused);
    CU_add_test(s, "fp8 on V100 refused", test_fp8_on_v100_refused);
    CU_add_test(s, "fp16 on V100", test_fp16_on_v100);
    CU_add_test(s, "already-bf16 H100 gains nothing", test_already_bf16_h100);
    CU_add_test(s, "unknown GPU: Daydream's ratios", test_unknown_gpu_daydream);
    CU_add_test(s, "trace without a GPU name", test_no_gpu_name);
    CU_add_test(s, "integer kernels kept", test_integer_kernels_kept);
    CU_add_test(s, "unknown NVIDIA GPU: compute capability",
                test_unknown_nvidia_by_compute_capability);
    return rv_test_run() ? 1 : 0;
}
