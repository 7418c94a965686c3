# aquifer: the two commands a new user needs are `make demo` and `make check`.
# Everything else here is a building block of those two.

BUILD       ?= build
FUZZ_BUILD  ?= build-fuzz
BUILD_TYPE  ?= RelWithDebInfo
FUZZ_SECONDS ?= 15
JOBS        ?= $(shell nproc)
DEMO_DIR    ?= demo-data

.PHONY: all deps build demo check test docs-test install fuzz sanitize format format-check layers bench clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The whole method on the embedded default, end to end; builds only the
# aquifer binary and says how long each part took (scripts/demo.sh).
demo:
	@bash scripts/demo.sh $(BUILD) $(DEMO_DIR) $(JOBS) $(BUILD_TYPE)

# Every test: unit and integration tests under CTest, then the fuzz targets
# for a short while, then the format check and the layer check.
check: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory fuzz
	$(MAKE) --no-print-directory format-check
	$(MAKE) --no-print-directory layers

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# The aquifer binary and the Python package under PREFIX (bin/, and
# lib/python3.X/dist-packages/, which Debian's python3 searches for /usr/local).
PREFIX ?= /usr/local
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

# The shell examples of README.md and docs/ as a reader runs them (also a
# CTest test, so part of make check).
docs-test: build
	/usr/bin/python3 tests/docs/run_docs.py . $(BUILD)

$(FUZZ_BUILD)/build.ninja:
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAQ_FUZZ=ON \
	  -DAQ_BUILD_TESTS=OFF -DAQ_BUILD_BENCH=OFF

fuzz: deps $(FUZZ_BUILD)/build.ninja
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	@rm -rf $(FUZZ_BUILD)/seeds && /usr/bin/python3 fuzz/make_seeds.py $(FUZZ_BUILD)/seeds
	@set -e; for t in fuzz_tfrecord fuzz_example fuzz_recordio fuzz_jpeg fuzz_region_decode fuzz_image_decode fuzz_index fuzz_report fuzz_s3_xml fuzz_s3_request fuzz_layout; do \
	  mkdir -p $(FUZZ_BUILD)/corpus/$$t; \
	  echo "fuzz: $$t for $(FUZZ_SECONDS)s"; \
	  $(FUZZ_BUILD)/fuzz/$$t -max_total_time=$(FUZZ_SECONDS) -max_len=65536 -rss_limit_mb=2048 -print_final_stats=0 -artifact_prefix=$(FUZZ_BUILD)/ \
	    $(FUZZ_BUILD)/corpus/$$t $(FUZZ_BUILD)/seeds/$$t > $(FUZZ_BUILD)/$$t.log 2>&1 \
	    || { tail -40 $(FUZZ_BUILD)/$$t.log; exit 1; }; \
	  grep -E "^#[0-9]+.*DONE" $(FUZZ_BUILD)/$$t.log | tail -1; \
	done

# The whole suite again under AddressSanitizer, UndefinedBehaviorSanitizer
# and LeakSanitizer (a Debug build in build-asan), then the threaded code
# (pipeline, thread pool, HTTP server, store, S3 handler, in-process nodes
# and cluster) under ThreadSanitizer. TSan uses clang, which also checks the
# lock annotations (-Wthread-safety); GCC 12's TSan runtime crashes at
# startup on kernels with 28+ bits of mmap ASLR.
sanitize: deps
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DAQ_SANITIZE=address,undefined -DAQ_BUILD_BENCH=OFF
	cmake --build build-asan -j $(JOBS)
	cd build-asan && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 ctest --output-on-failure -j $(JOBS)
	CC=clang CXX=clang++ cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAQ_SANITIZE=thread \
	  -DAQ_BUILD_BENCH=OFF
	cmake --build build-tsan -j $(JOBS) --target pipeline_test common_test http_test store_test server_test node_test
	@set -e; for t in pipeline_test common_test http_test store_test server_test node_test; do \
	  echo "tsan: $$t"; TSAN_OPTIONS=halt_on_error=1 build-tsan/$$t --gtest_brief=1; done

FORMAT_FILES = $(shell git ls-files '*.cc' '*.h')

format:
	clang-format -i $(FORMAT_FILES)

format-check:
	@clang-format --dry-run --Werror $(FORMAT_FILES) && echo "format: clean"

# Every #include between src/ layers against the graph in docs/architecture.md.
layers:
	@/usr/bin/python3 scripts/check-layers.py

bench: build
	$(BUILD)/crc32c_bench

clean:
	rm -rf $(BUILD) $(FUZZ_BUILD) build-asan build-tsan build-tsa $(DEMO_DIR)
