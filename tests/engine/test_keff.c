/* Tensor-core shares by size (engine/cost/rv_keff.c): kappa(F) rises with a
 * kernel's FLOPs towards the fp32 share, is 1 where no tensor-core kernels
 * of the generation were measured, and a moved roofline never drops below
 * the fp32 peak (docs/models/kernels.md). Needs no traces. */
#include <CUnit/Basic.h>
#include <math.h>

#include "cost/rv_keff.h"
#include "cost/rv_kmodel.h"
#include "hw/rv_hw.h"
#include "common/rv_test_util.h"

static void test_rises_with_size(void)
{
    static const char *const gpus[] = {"A100-SXM4-80GB", "H100-SXM5", "H200-SXM"};
    static const int dts[] = {RV_DT_TF32, RV_DT_BF16, RV_DT_FP16};
    for (size_t i = 0; i < 3; i++) {
        const rv_hw *hw = rv_hw_lookup(gpus[i]);
        CU_ASSERT_PTR_NOT_NULL_FATAL(hw);
        double prev = 0;
        for (int e = 6; e <= 12; e++) {
            double k = rv_keff_tc_share_at(hw, dts[i], pow(10, e));
            CU_ASSERT(k > prev && k < 1);
            prev = k;
        }
        /* No size: the median over sizes. */
        CU_ASSERT_DOUBLE_EQUAL(rv_keff_tc_share_at(hw, dts[i], 0), rv_keff_tc_share(hw, dts[i]),
                               1e-12);
    }
    /* H200 is the H100's chip: the same curve. */
    CU_ASSERT_DOUBLE_EQUAL(rv_keff_tc_share_at(rv_hw_lookup("H200-SXM"), RV_DT_BF16, 3e9),
                           rv_keff_tc_share_at(rv_hw_lookup("H100-SXM5"), RV_DT_BF16, 3e9), 1e-12);
}

static void test_unmeasured_is_one(void)
{
    const rv_hw *v100 = rv_hw_lookup("V100-SXM2"), *a100 = rv_hw_lookup("A100-SXM4-80GB");
    CU_ASSERT_PTR_NOT_NULL_FATAL(v100);
    CU_ASSERT_PTR_NOT_NULL_FATAL(a100);
    CU_ASSERT_EQUAL(rv_keff_tc_share_at(v100, RV_DT_FP16, 1e9), 1);
    CU_ASSERT_EQUAL(rv_keff_tc_share_at(a100, RV_DT_BF16, 1e9), 1);
    CU_ASSERT_EQUAL(rv_keff_tc_share_at(a100, RV_DT_FP32, 1e9), 1);
    CU_ASSERT_EQUAL(rv_keff_tc_share_at(NULL, RV_DT_TF32, 1e9), 1);
}

static void test_never_below_fp32(void)
{
    const rv_hw *a100 = rv_hw_lookup("A100-SXM4-80GB");
    CU_ASSERT_PTR_NOT_NULL_FATAL(a100);
    /* A small compute-bound kernel: its kappa is under fp32 / TF32 peak, so
     * it takes the fp32 roofline; a large one is faster than that. */
    double small = 1e6, large = 1e11;
    CU_ASSERT(rv_keff_tc_share_at(a100, RV_DT_TF32, small) * rv_hw_peak(a100, RV_DT_TF32) <
              rv_hw_peak(a100, RV_DT_FP32));
    CU_ASSERT_DOUBLE_EQUAL(rv_kmodel_move_roofline_s(a100, RV_DT_TF32, small, 1),
                           rv_kmodel_roofline_s(a100, RV_DT_FP32, small, 1), 1e-15);
    CU_ASSERT(rv_kmodel_move_roofline_s(a100, RV_DT_TF32, large, 1) <
              rv_kmodel_roofline_s(a100, RV_DT_FP32, large, 1));
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    CU_pSuite s = CU_add_suite("keff", NULL, NULL);
    CU_add_test(s, "tensor-core share rises with size", test_rises_with_size);
    CU_add_test(s, "unmeasured shares are 1", test_unmeasured_is_one);
    CU_add_test(s, "never below the fp32 peak", test_never_below_fp32);
    return rv_test_run() ? 1 : 0;
}
