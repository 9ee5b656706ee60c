# Engine parts of the trace store: snapshot serialization, host-overhead
# statistics, SHA-256. Included from tests/engine/CMakeLists.txt.
rv_add_test(NAME test_snapshot SOURCES test_snapshot.c LIBS rv_engine rv_test_util ZLIB::ZLIB)
rv_add_test(NAME test_overhead SOURCES test_overhead.c LIBS rv_engine rv_test_util m)
