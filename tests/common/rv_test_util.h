/* Small helpers shared by the CUnit test executables: whole files, the
 * public traces folder, running the registered suites. Test support only;
 * nothing here is linked into the product. */
#ifndef RV_TEST_UTIL_H
#define RV_TEST_UTIL_H

#include <stddef.h>

/* Whole file as it is on disk. Returns new (malloc'd, with a NUL one byte
 * past *len; caller frees) or NULL when the file cannot be read. */
void *rv_test_read_file(const char *path, size_t *len);

/* Whole file, decompressed when it is gzip (plain files come back as they
 * are). Returns new (malloc'd, with a NUL one byte past *len; caller
 * frees) or NULL when it cannot be read. */
void *rv_test_read_gz(const char *path, size_t *len);

/* The public traces folder (under ctest, the build's merged folder of
 * tests/data/public and the shared traces: cmake/RvTestTraces.cmake):
 * RV_SHARED_TRACES when set and
 * "$RV_SHARED_TRACES/probe" can be read (probe "." checks the folder
 * itself), else NULL. Returns a borrowed pointer into the environment. */
const char *rv_test_shared_traces(const char *probe);

/* Exit status that ctest reads as "skipped" (SKIP_RETURN_CODE in
 * cmake/RvTest.cmake). */
#define RV_TEST_SKIP 77

/* For programs whose every case needs the public traces: returns
 * rv_test_shared_traces(probe), or prints why and exits RV_TEST_SKIP when
 * it is NULL. */
const char *rv_test_require_shared_traces(const char *probe);

/* Whether dir/rel can be read. When it cannot, prints which checks are
 * left out and why, so that a run without the shared folder says what it
 * did not check: a few large traces are not shipped in tests/data/public
 * (see its README) and only the shared folder has them. Call it before the
 * checks on a file that may be absent; a case left with nothing to check is
 * not registered at all. */
int rv_test_have_trace(const char *dir, const char *rel);

/* Runs every registered suite verbosely, then cleans the registry up.
 * Returns the number of failed assertions. */
unsigned rv_test_run(void);

#endif
