# aquifer: the two commands a new user needs are `make demo` and `make check`.
# Everything else here is a building block of those two.

BUILD       ?= build
FUZZ_BUILD  ?= build-fuzz
BUILD_TYPE  ?= RelWithDebInfo
FUZZ_SECONDS ?= 15
JOBS        ?= $(shell nproc)
AQ          := $(BUILD)/aquifer
DEMO_DIR    ?= demo-data

.PHONY: all deps build demo check test fuzz sanitize format format-check layers bench clean

all: build

deps:
	@bash scripts/install-deps.sh

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=$(BUILD_TYPE)

build: deps $(BUILD)/build.ninja
	cmake --build $(BUILD) -j $(JOBS)

# The whole method on the embedded default, end to end: synthesize a small
# ImageNet-like dataset, pack it (TFRecord and RecordIO) and verify both;
# serve it from an embedded storage node and read it back through
# aquifer:// (storage-only bench, then training ResNet-50 on one simulated
# GPU this machine can feed); a readers sweep on the local files; the cache
# model beside what was measured; the sizing answer for 72 such GPUs; a
# one-screen summary and an HTML report at $(DEMO_DIR)/report.html.
DEMO_RESULTS = $(DEMO_DIR)/results
demo: build
	@rm -rf $(DEMO_DIR)
	$(AQ) dataset synth --out $(DEMO_DIR)/images --classes 10 --images 600 --seed 1
	$(AQ) dataset pack $(DEMO_DIR)/images --out $(DEMO_DIR)/tfrecord --format tfrecord --shards 8
	$(AQ) dataset pack $(DEMO_DIR)/images --out $(DEMO_DIR)/recordio --format recordio
	$(AQ) dataset verify $(DEMO_DIR)/tfrecord --num-classes 10
	$(AQ) dataset verify $(DEMO_DIR)/recordio --num-classes 10
	$(AQ) dataset inspect $(DEMO_DIR)/tfrecord --limit 3
	bash scripts/demo-node.sh $(AQ) $(DEMO_DIR) $(DEMO_RESULTS)
	$(AQ) bench sweep --param readers --values 1,2 --out $(DEMO_RESULTS) -- storage $(DEMO_DIR)/tfrecord -d 3 --ramp 1
	$(AQ) model cache --data $(DEMO_DIR)/tfrecord --client-cache $$(awk '/MemTotal/ {print $$2 "k"}' /proc/meminfo) \
	  --result $$(ls $(DEMO_RESULTS)/bench-storage-*.json | head -1) --out $(DEMO_RESULTS)
	$(AQ) size --from $$(ls $(DEMO_RESULTS)/bench-train-*.json | head -1) --gpus 72 --out $(DEMO_RESULTS)
	@echo
	@echo "== demo summary: 600 synthetic images packed, verified, served by a storage node and measured the documents' way =="
	@$(AQ) report $(DEMO_RESULTS) -o $(DEMO_DIR)/report.html --title "aquifer demo"

# Every test: unit and integration tests under CTest, then the fuzz targets
# for a short while, then the format check and the layer check.
check: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)
	$(MAKE) --no-print-directory fuzz
	$(MAKE) --no-print-directory format-check
	$(MAKE) --no-print-directory layers

test: build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

$(FUZZ_BUILD)/build.ninja:
	CC=clang CXX=clang++ cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAQ_FUZZ=ON \
	  -DAQ_BUILD_TESTS=OFF -DAQ_BUILD_BENCH=OFF

fuzz: deps $(FUZZ_BUILD)/build.ninja
	cmake --build $(FUZZ_BUILD) -j $(JOBS)
	@rm -rf $(FUZZ_BUILD)/seeds && /usr/bin/python3 fuzz/make_seeds.py $(FUZZ_BUILD)/seeds
	@set -e; for t in fuzz_tfrecord fuzz_example fuzz_recordio fuzz_jpeg fuzz_region_decode fuzz_image_decode fuzz_index fuzz_report fuzz_s3_xml fuzz_s3_request; do \
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
