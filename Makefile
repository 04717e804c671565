# Thin wrapper: `make demo` and `make test` do the whole set-up.
BUILD   ?= build
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps configure build demo test wheel bench bench-gpu fuzz clean

all: build

deps:
	@./scripts/deps.sh

configure: deps
	@cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_ARGS) >/dev/null

build: configure
	@cmake --build $(BUILD) -j $(JOBS)

demo: build
	rm -rf $(BUILD)/demo-job
	$(BUILD)/bin/ztrain run examples/fashion-mnist-async.json --job-dir $(BUILD)/demo-job

# The tests also use Prometheus and Chromium (scripts/deps.sh --test).
test: build
	@./scripts/deps.sh --test
	cd $(BUILD) && ctest --output-on-failure --timeout 300 -j $(JOBS)

# One self-contained wheel (and the same tree as a tarball) in dist/:
# every binary and library it needs beyond glibc inside. WHEEL_CUDA=1 adds
# the GPU module and CUDA's libraries.
wheel: build
	@./scripts/deps.sh --wheel
	python3 scripts/wheel.py $(BUILD) dist $(if $(WHEEL_CUDA),--cuda,)

# Benchmarks (figures in the README). BENCH_PEERS=1 also installs the peers
# they compare against: Open MPI and PyTorch (gloo) from Debian.
bench: build
	@[ -z "$(BENCH_PEERS)" ] || ./scripts/deps.sh --bench
	$(BUILD)/bench/ps_bench $(BUILD)/bin/ztrain-paramserver
	python3 bench/allreduce_bench.py $(BUILD)
	$(BUILD)/bench/ar_bench $(BUILD)/bin/ztrain-reducer --fusion
	python3 bench/train_bench.py $(BUILD)/bin
	python3 bench/tune_bench.py $(BUILD)/bin
	python3 bench/auth_bench.py $(BUILD) --quick
	$(BUILD)/bench/transport_bench
	python3 bench/storm_bench.py $(BUILD)
	python3 bench/torch_bench.py $(BUILD)/bin

# On a machine with a CUDA GPU (and PyTorch for the peer): the GPU figures.
bench-gpu: build
	for b in 64 256 1024; do $(BUILD)/bench/gpu_bench $$b; python3 bench/gpu_torch_bench.py $$b; done

# libFuzzer targets (clang): the message decoder, the job-spec loader, the
# parameter server's and the reducer's handlers, and the sealed framing.
FUZZ_SECONDS ?= 60
fuzz: deps
	@CC=clang cmake -S . -B build-fuzz -DZT_FUZZ=ON -DZT_WITH_CUDA=OFF -DCMAKE_BUILD_TYPE=Debug >/dev/null
	@cmake --build build-fuzz -j $(JOBS) --target fuzz_msg fuzz_spec fuzz_ps fuzz_reducer fuzz_fileserver fuzz_coord fuzz_evaluator fuzz_stream fuzz_zmtp
	build-fuzz/bin/fuzz_msg -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048
	build-fuzz/bin/fuzz_spec -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -max_len=4096
	build-fuzz/bin/fuzz_ps -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -max_len=2048
	build-fuzz/bin/fuzz_reducer -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -max_len=2048
	build-fuzz/bin/fuzz_fileserver -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -max_len=1024
	build-fuzz/bin/fuzz_coord -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -max_len=1024
	build-fuzz/bin/fuzz_evaluator -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -max_len=1024
	build-fuzz/bin/fuzz_stream -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -max_len=2048
	build-fuzz/bin/fuzz_zmtp -max_total_time=$(FUZZ_SECONDS) -rss_limit_mb=2048 -max_len=32768

clean:
	rm -rf $(BUILD)
