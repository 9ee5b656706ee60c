# Sanitizer settings for every test process (and the programs it starts):
# UBSan stops at the first report; a ThreadSanitizer report fails the test
# (exit 66) after the run.
set(RV_SANITIZER_ENV
    "UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1;ASAN_OPTIONS=detect_leaks=1;TSAN_OPTIONS=second_deadlock_stack=1:exitcode=66")

# rv_add_test(NAME name SOURCES a.c ... LIBS lib ... [LABELS l ...] [TIMEOUT s])
# One CUnit executable per suite. Exit code 77 means "skipped" (no database,
# no GPU, no shared traces), so CI without them stays green.
function(rv_add_test)
  cmake_parse_arguments(T "" "NAME;TIMEOUT" "SOURCES;LIBS;LABELS" ${ARGN})
  add_executable(${T_NAME} ${T_SOURCES})
  target_link_libraries(${T_NAME} PRIVATE ${T_LIBS} PkgConfig::CUNIT)
  target_include_directories(${T_NAME} PRIVATE ${CMAKE_SOURCE_DIR}/tests)
  set_target_properties(${T_NAME} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME ${T_NAME} COMMAND ${T_NAME} WORKING_DIRECTORY ${CMAKE_SOURCE_DIR})
  if(NOT T_TIMEOUT)
    set(T_TIMEOUT 300)
  endif()
  set_tests_properties(${T_NAME} PROPERTIES
    SKIP_RETURN_CODE 77
    TIMEOUT ${T_TIMEOUT}
    ENVIRONMENT "RV_SHARED_TRACES=${RV_TEST_TRACES};RV_SOURCE_DIR=${CMAKE_SOURCE_DIR};RV_BIN_DIR=${CMAKE_BINARY_DIR}/bin;${RV_SANITIZER_ENV}")
  if(T_LABELS)
    set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
