# Thin wrapper: `make demo` and `make test` do the whole set-up.
BUILD   ?= build
JOBS    ?= $(shell nproc 2>/dev/null || echo 2)
CMAKE_ARGS ?=

.PHONY: all deps configure build demo test clean

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

test: build
	cd $(BUILD) && ctest --output-on-failure --timeout 300 -j $(JOBS)

clean:
	rm -rf $(BUILD)
