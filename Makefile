# The two commands a newcomer types: `make run` and `make test`.
# Everything else is CMake; this file only wraps it.

BUILD     ?= build
SANBUILD  ?= build/sanitize
TSANBUILD ?= build/tsan
# Not build/fuzz: that is where $(BUILD) keeps the fuzz/ folder's own files.
FUZZBUILD ?= build/libfuzzer
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
SAMPLE    ?= data/samples/resnet50-v100-workers0.pt.trace.json.gz
# WERROR=ON|OFF sets RV_WERROR for $(BUILD); unset keeps what is cached.
WERROR    ?=
# One line per `make test` stage: name, seconds, result.
STAGELOG  ?= $(BUILD)/make-test-stages.txt
STAGE      = sh .ci/stage.sh $(STAGELOG)

.PHONY: all deps build build-service build-san build-tsan run test test-stages test-fast bench fuzz fuzz-run \
        format check-format tidy clean
# The stages of `make test` run one after another (cmake parallelizes the
# builds itself with JOBS).
.NOTPARALLEL:

all: build

deps:
	@sh scripts/install-deps.sh build

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	       $(if $(WERROR),-DRV_WERROR=$(WERROR)) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

# Only what `make run` starts (reverie, reveried: CMake target `service`),
# none of the test programs.
build-service: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	       $(if $(WERROR),-DRV_WERROR=$(WERROR)) >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) --target service -- --no-print-directory

build-san:
	@cmake -S . -B $(SANBUILD) -DCMAKE_BUILD_TYPE=Debug -DRV_ASAN=ON -DRV_UBSAN=ON >/dev/null
	@cmake --build $(SANBUILD) -j $(JOBS) -- --no-print-directory

build-tsan:
	@cmake -S . -B $(TSANBUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DRV_TSAN=ON >/dev/null
	@cmake --build $(TSANBUILD) -j $(JOBS) -- --no-print-directory

run: build-service
	@sh scripts/run.sh $(BUILD) $(SAMPLE)

# Every stage runs even when an earlier one fails (make -k); the summary
# at the end lists each stage's time and result, and any failure fails
# `make test`:
#   format      clang-format --dry-run -Werror on every tracked .c/.h
#   build       the optimized build with -Werror (RV_WERROR=ON)
#   tests       every test on it
#   tidy        clang-tidy (.clang-tidy) on engine/ store/ server/ cli/
#   san         ASan+UBSan build and every test but the slow ones
#   tsan        ThreadSanitizer build, the server, database and store tests
#   fuzz-run    `make fuzz`, then each libFuzzer target for FUZZTIME s (fuzz-run)
test:
	@sh scripts/install-deps.sh test
	@mkdir -p $(dir $(STAGELOG)) && rm -f $(STAGELOG)
	@start=$$(date +%s); $(MAKE) --no-print-directory -k test-stages; rc=$$?; \
	 echo; echo "make test stages:"; cat $(STAGELOG); \
	 printf '  %-14s %5d s\n' total $$(($$(date +%s) - start)); \
	 if [ $$rc -ne 0 ]; then echo "make test: FAILED"; exit 1; fi

test-stages: stage-format stage-tests stage-tidy stage-tests-san stage-tests-tsan stage-fuzz-run

stage-format:
	@$(STAGE) format $(MAKE) --no-print-directory check-format
stage-build:
	@$(STAGE) build-werror $(MAKE) --no-print-directory build WERROR=ON
stage-tests: stage-build
	@$(STAGE) tests sh -c 'cd $(BUILD) && ctest --output-on-failure -j $(JOBS)'
stage-tidy: stage-build
	@$(STAGE) tidy sh .ci/tidy.sh $(BUILD)
stage-build-san:
	@$(STAGE) build-san $(MAKE) --no-print-directory build-san
stage-tests-san: stage-build-san
	@$(STAGE) tests-san sh -c 'cd $(SANBUILD) && ctest --output-on-failure -j $(JOBS) -LE slow'
stage-build-tsan:
	@$(STAGE) build-tsan $(MAKE) --no-print-directory build-tsan
# The dashboard's browser test (label web) is left out: its server paths
# are the API and contract tests' too, and Chromium under a TSan server
# would take most of the time budget.
stage-tests-tsan: stage-build-tsan
	@$(STAGE) tests-tsan sh -c 'cd $(TSANBUILD) && ctest --output-on-failure -j $(JOBS) -L "server|db|store|threads" -LE web'
stage-build-fuzz:
	@$(STAGE) build-fuzz $(MAKE) --no-print-directory fuzz
stage-fuzz-run: stage-build-fuzz
	@$(STAGE) fuzz-run $(MAKE) --no-print-directory fuzz-run

test-fast: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Parse speed and memory, simulator speed, CLI what-if end to end
# (figures in docs/internals/kineto-reader.md and graph.md).
bench: build
	@sh bench/run.sh $(BUILD)
	@sh bench/run_sim.sh $(BUILD)
	@sh bench/run_cli.sh $(BUILD)

# Every libFuzzer target in fuzz/ (clang): $(FUZZBUILD)/bin/fuzz_<name>.
fuzz:
	@cmake -S . -B $(FUZZBUILD) -DCMAKE_C_COMPILER=clang -DRV_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
	@cmake --build $(FUZZBUILD) -j $(JOBS)

# Runs every fuzz/fuzz_<name>.c target for FUZZTIME seconds, one after
# another, from a scratch copy of fuzz/corpus/<name> in
# $(FUZZBUILD)/run/<name>/ (libFuzzer adds what it finds to its corpus
# folder: never the checked-in one). -timeout makes a hang a failure well
# inside the run. Any crash, leak, timeout or out-of-memory fails it and
# prints the reproducer and how to replay it.
FUZZTIME ?= 30
fuzz-run: fuzz
	@fail=0; total=$$(date +%s); \
	 for src in fuzz/fuzz_*.c; do \
	   name=$${src#fuzz/fuzz_}; name=$${name%.c}; \
	   bin=$(FUZZBUILD)/bin/fuzz_$$name; run=$(FUZZBUILD)/run/$$name; \
	   if [ ! -x $$bin ]; then echo "fuzz-run: $$name: no $$bin"; fail=1; continue; fi; \
	   rm -rf $$run && mkdir -p $$run/corpus $$run/artifacts || exit 1; \
	   cp -R fuzz/corpus/$$name/. $$run/corpus/ || exit 1; \
	   seeds=$$(ls $$run/corpus | wc -l); start=$$(date +%s); \
	   $$bin -max_total_time=$(FUZZTIME) -rss_limit_mb=2048 -timeout=10 \
	         -artifact_prefix=$$run/artifacts/ $$run/corpus >$$run/log 2>&1; rc=$$?; \
	   secs=$$(($$(date +%s) - start)); \
	   repro=$$(ls -d $$run/artifacts/crash-* $$run/artifacts/leak-* $$run/artifacts/timeout-* \
	                  $$run/artifacts/oom-* 2>/dev/null | head -n 1); \
	   if [ $$rc -ne 0 ] || [ -n "$$repro" ]; then \
	     fail=1; tail -n 40 $$run/log; \
	     echo "fuzz-run: $$name FAILED after $$secs s (exit $$rc); log $$run/log"; \
	     [ -n "$$repro" ] && echo "  reproducer: $$repro" && echo "  replay: $$bin $$repro"; \
	   else \
	     runs=$$(sed -n 's/^Done \([0-9]*\) runs.*/\1/p' $$run/log); \
	     printf 'fuzz-run: %-9s %4d s  %10s runs  corpus %d -> %d\n' $$name $$secs "$$runs" \
	            $$seeds $$(ls $$run/corpus | wc -l); \
	   fi; \
	 done; \
	 echo "fuzz-run: $$(($$(date +%s) - total)) s in all"; \
	 exit $$fail

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

# Fails on any file clang-format would change (`make format` fixes them).
check-format:
	@git ls-files -z '*.c' '*.h' | xargs -0 clang-format --dry-run -Werror

# Prints every clang-tidy finding once; fails when there is any.
tidy: build
	@sh .ci/tidy.sh $(BUILD)

clean:
	@rm -rf $(BUILD)
