# aquifer: the two commands a new user needs are `make demo` and `make check`.
# Everything else here is a building block of those two.

BUILD       ?= build
FUZZ_BUILD  ?= build-fuzz
BUILD_TYPE  ?= RelWithDebInfo
FUZZ_SECONDS ?= 15
JOBS        ?= $(shell nproc)
# Tests at once: one more than the cores. The end-to-end tests wait on
# child processes, sockets and disks; at one per core a quarter of the CPU
# sat idle (vmstat), and one more ran the same tests 14% faster.
CTEST_JOBS  ?= $(shell echo $$(( $$(nproc) + 1 )))
DEMO_DIR    ?= demo-data
DEMO_IMAGES ?= 600

.PHONY: all deps build build-only ctest demo check test docs-test install fuzz fuzz-build fuzz-run sanitize sanitize-full asan-build tsan-build tsan-run \
	format format-check layers bench clean

# Each step of `make check` and `make sanitize` is timed by scripts/stage.sh
# into $(AQ_TIMING); scripts/timing_report.py prints the table at the end
# (each stage, then the slowest tests of every CTest run). .ci/run sets
# AQ_TIMING itself so that one table covers the whole run.
AQ_TIMING ?= $(CURDIR)/$(BUILD)/timing.tsv
export AQ_TIMING
STAGE  = bash scripts/stage.sh
REPORT = /usr/bin/python3 scripts/timing_report.py

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: deps build-only

build-only: $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# CTest in CTEST_BUILD (LABELS: a -L regex; default every test), with a JUnit
# file of each test's time for the timing table.
CTEST_BUILD ?= $(BUILD)
CTEST_ARGS  ?=
ctest:
	cd $(CTEST_BUILD) && $(CTEST_ENV) ctest --output-on-failure -j $(CTEST_JOBS) --output-junit $(CURDIR)/$(CTEST_BUILD)/ctest-junit.xml \
	  $(CTEST_ARGS)

# The whole method on the embedded default, end to end; builds only the
# aquifer binary and says how long each part took (scripts/demo.sh).
demo:
	@bash scripts/demo.sh $(BUILD) $(DEMO_DIR) $(JOBS) $(BUILD_TYPE) $(DEMO_IMAGES)

# Every test: unit and integration tests under CTest, then the fuzz targets
# for a short while, then the format check and the layer check; then a table
# of where the time went (printed on failure too).
check:
	@[ -n "$${AQ_TIMING_KEEP:-}" ] || rm -f $(AQ_TIMING)
	@$(STAGE) deps $(MAKE) --no-print-directory deps \
	  && $(STAGE) "build $(BUILD)" $(MAKE) --no-print-directory build-only \
	  && $(STAGE) "ctest $(BUILD)" $(MAKE) --no-print-directory ctest CTEST_BUILD=$(BUILD) \
	  && $(STAGE) "fuzz build" $(MAKE) --no-print-directory fuzz-build \
	  && $(STAGE) "fuzz run" $(MAKE) --no-print-directory fuzz-run \
	  && $(STAGE) format $(MAKE) --no-print-directory format-check \
	  && $(STAGE) layers $(MAKE) --no-print-directory layers; \
	rc=$$?; $(REPORT) $(AQ_TIMING) $(BUILD)/ctest-junit.xml --title "make check"; exit $$rc

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

fuzz: deps fuzz-build fuzz-run

fuzz-build: $(FUZZ_BUILD)/build.ninja
	cmake --build $(FUZZ_BUILD) -j $(JOBS)

FUZZ_TARGETS = fuzz_tfrecord fuzz_example fuzz_recordio fuzz_tar fuzz_jpeg fuzz_region_decode fuzz_image_decode \
	fuzz_index fuzz_manifest fuzz_report fuzz_s3_xml fuzz_s3_request fuzz_layout fuzz_plan fuzz_same_host fuzz_post_form \
	fuzz_header_echo fuzz_block_file fuzz_node_stats

# Every target for FUZZ_SECONDS, JOBS at a time (scripts/fuzz_run.sh).
fuzz-run:
	@bash scripts/fuzz_run.sh $(FUZZ_BUILD) $(FUZZ_SECONDS) $(JOBS) $(FUZZ_TARGETS)

# The sanitizers (docs/testing.md says which suite runs where, and why).
# `make sanitize` (CI): every unit test, and the end-to-end tests labelled
# `asan` (the C++ paths only they reach: the CLI, the mount's FUSE adapter,
# hostile and real S3 clients, damaged images, the cluster's fault and
# erasure paths) under AddressSanitizer, UndefinedBehaviorSanitizer and
# LeakSanitizer (a Debug build in build-asan); then the threaded code
# (pipeline, thread pool, HTTP server, store, S3 handler, in-process nodes
# and cluster) under ThreadSanitizer. `make sanitize-full` runs every CTest
# test under ASan instead. TSan uses clang, which also checks the lock
# annotations (-Wthread-safety); GCC 12's TSan runtime crashes at startup on
# kernels with 28+ bits of mmap ASLR.
# AQ_SANITIZED: the few end-to-end tests whose scale is only about time use
# less data there (the same code paths).
ASAN_ENV = UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 AQ_SANITIZED=1
TSAN_TESTS = pipeline_test common_test http_test store_test server_test node_test mount_fs_test ec_test

sanitize:
	@[ -n "$${AQ_TIMING_KEEP:-}" ] || rm -f $(AQ_TIMING)
	@$(STAGE) deps $(MAKE) --no-print-directory deps \
	  && $(STAGE) "build build-asan" $(MAKE) --no-print-directory asan-build \
	  && $(STAGE) "ctest build-asan (unit + asan)" $(MAKE) --no-print-directory ctest CTEST_BUILD=build-asan \
	       CTEST_ENV="$(ASAN_ENV)" CTEST_ARGS="-L 'unit|asan'" \
	  && $(STAGE) "build build-tsan" $(MAKE) --no-print-directory tsan-build \
	  && $(STAGE) "tsan tests" $(MAKE) --no-print-directory tsan-run; \
	rc=$$?; $(REPORT) $(AQ_TIMING) build-asan/ctest-junit.xml --title "make sanitize"; exit $$rc

sanitize-full: deps asan-build
	$(MAKE) --no-print-directory ctest CTEST_BUILD=build-asan CTEST_ENV="$(ASAN_ENV)"
	$(MAKE) --no-print-directory tsan-build tsan-run

build-asan/build.ninja:
	cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DAQ_SANITIZE=address,undefined -DAQ_BUILD_BENCH=OFF

asan-build: build-asan/build.ninja
	cmake --build build-asan -j $(JOBS)

build-tsan/build.ninja:
	CC=clang CXX=clang++ cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAQ_SANITIZE=thread \
	  -DAQ_BUILD_BENCH=OFF

tsan-build: build-tsan/build.ninja
	cmake --build build-tsan -j $(JOBS) --target $(TSAN_TESTS)

tsan-run:
	@set -e; for t in $(TSAN_TESTS); do \
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
