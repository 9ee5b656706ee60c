# The two commands a newcomer types: `make run` and `make test`.
# Everything else is CMake; this file only wraps it.

BUILD     ?= build
SANBUILD  ?= build/sanitize
JOBS      ?= $(shell nproc 2>/dev/null || echo 2)
SAMPLE    ?= data/samples/resnet50-v100-workers0.pt.trace.json.gz

.PHONY: all deps build build-san run test test-fast bench fuzz format tidy clean

all: build

deps:
	@sh scripts/install-deps.sh build

build: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
	@cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

build-san:
	@cmake -S . -B $(SANBUILD) -DCMAKE_BUILD_TYPE=Debug -DRV_ASAN=ON -DRV_UBSAN=ON >/dev/null
	@cmake --build $(SANBUILD) -j $(JOBS) -- --no-print-directory

run: build
	@sh scripts/run.sh $(BUILD) $(SAMPLE)

# Every test, twice: an optimized build, then ASan+UBSan.
test:
	@sh scripts/install-deps.sh test
	@$(MAKE) --no-print-directory build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	@$(MAKE) --no-print-directory build-san
	@cd $(SANBUILD) && ctest --output-on-failure -j $(JOBS) -LE slow

test-fast: build
	@cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Parse speed and memory, simulator speed, CLI what-if end to end
# (figures in docs/internals/kineto-reader.md and graph.md).
bench: build
	@sh bench/run.sh $(BUILD)
	@sh bench/run_sim.sh $(BUILD)
	@sh bench/run_cli.sh $(BUILD)

fuzz:
	@cmake -S . -B build/fuzz -DCMAKE_C_COMPILER=clang -DRV_FUZZ=ON -DBUILD_TESTING=OFF >/dev/null
	@cmake --build build/fuzz -j $(JOBS)

format:
	@clang-format -i $$(git ls-files '*.c' '*.h')

tidy: build
	@clang-tidy -p $(BUILD) --quiet $$(git ls-files 'engine/*.c' 'cli/*.c' 'server/*.c')

clean:
	@rm -rf $(BUILD)
