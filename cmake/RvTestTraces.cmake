# The public traces folder the tests read (RV_TEST_TRACES, passed to every
# test as RV_SHARED_TRACES): one folder of links, rebuilt at each configure
# (rerun cmake after changing a shipped trace),
# holding under their shared relative names
#   1. every file of tests/data/public (what the repository ships),
#   2. data/samples' ResNet-50 trace as kineto/resnet50-v100-workers0...,
#   3. every other file of RV_SHARED_TRACES (the large and optional sets,
#      ../shared/traces beside the checkout) when that folder exists.
# A clean clone without ../shared so runs on 1 and 2; the cases that need a
# file only the shared folder has skip. Point RV_SHARED_TRACES at a missing
# folder (cmake -DRV_SHARED_TRACES=/nonexistent) to see what a clean clone runs.
set(RV_TEST_TRACES "${CMAKE_BINARY_DIR}/tests/traces")

function(rv_test_traces_link src rel)
  set(dst "${RV_TEST_TRACES}/${rel}")
  if(EXISTS "${dst}")
    return()
  endif()
  get_filename_component(dir "${dst}" DIRECTORY)
  file(MAKE_DIRECTORY "${dir}")
  # Hard links (a copy across file systems): to every reader, tar and
  # stat included, they are plain files.
  file(CREATE_LINK "${src}" "${dst}" COPY_ON_ERROR)
endfunction()

file(REMOVE_RECURSE "${RV_TEST_TRACES}")
file(MAKE_DIRECTORY "${RV_TEST_TRACES}")
set(_rv_public "${CMAKE_SOURCE_DIR}/tests/data/public")
file(GLOB_RECURSE _rv_files RELATIVE "${_rv_public}" "${_rv_public}/*")
foreach(rel IN LISTS _rv_files)
  rv_test_traces_link("${_rv_public}/${rel}" "${rel}")
endforeach()
rv_test_traces_link("${CMAKE_SOURCE_DIR}/data/samples/resnet50-v100-workers0.pt.trace.json.gz"
                    "kineto/resnet50-v100-workers0.pt.trace.json.gz")
if(IS_DIRECTORY "${RV_SHARED_TRACES}")
  file(GLOB_RECURSE _rv_files RELATIVE "${RV_SHARED_TRACES}" "${RV_SHARED_TRACES}/*")
  foreach(rel IN LISTS _rv_files)
    rv_test_traces_link("${RV_SHARED_TRACES}/${rel}" "${rel}")
  endforeach()
  message(STATUS "Test traces: tests/data/public, data/samples and ${RV_SHARED_TRACES}")
else()
  message(STATUS "Test traces: tests/data/public and data/samples only "
                 "(${RV_SHARED_TRACES} is missing: cases on the large traces skip)")
endif()
# Rerun when a shipped trace is added or removed.
set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS "${_rv_public}")
