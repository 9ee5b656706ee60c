# What-if models (issue 3). Included from tests/engine/CMakeLists.txt.
# test_whatif_unit: the request document, hardware table, power and
# collective formulas (no data needed). test_whatif_real: every model on
# the shared real traces (skips with 77 when RV_SHARED_TRACES is absent).
rv_add_test(NAME test_whatif_unit SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_whatif_unit.c
            LIBS rv_engine rv_test_util LABELS engine whatif)
rv_add_test(NAME test_whatif_real SOURCES ${CMAKE_CURRENT_LIST_DIR}/test_whatif_real.c
            LIBS rv_engine rv_test_util LABELS engine whatif traces TIMEOUT 900)
