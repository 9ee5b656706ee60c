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
    ENVIRONMENT "RV_SHARED_TRACES=${RV_SHARED_TRACES};RV_SOURCE_DIR=${CMAKE_SOURCE_DIR};RV_BIN_DIR=${CMAKE_BINARY_DIR}/bin;UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1;ASAN_OPTIONS=detect_leaks=1")
  if(T_LABELS)
    set_tests_properties(${T_NAME} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()
