# tern — the two commands of the Quick start are `make run` and `make test`.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
MODEL ?= ../shared/models/stories260K.gguf
DEB_PACKAGES = g++ cmake ninja-build pkg-config libgtest-dev libgmock-dev \
               nlohmann-json3-dev libpcre2-dev libcurl4-openssl-dev libssl-dev python3 \
               chromium haproxy curl python3-yaml
# haproxy, curl: scripts/cluster.sh and its test (tests/cluster); python3-yaml:
# the check of the Kubernetes manifests (deploy/k8s).
# node and npm (end-to-end tests with the OpenAI client) are installed from
# Debian only when no node/npm is on the PATH already. chromium: the browser
# test of the dashboard (tests/dashboard, driven by playwright-core from npm).

.PHONY: all build run test deps configure asan-test clean

all: build

# Installs only the Debian packages that are missing (needs root or sudo).
deps:
	@missing=$$(for p in $(DEB_PACKAGES); do dpkg-query -W -f='$${Status}\n' $$p 2>/dev/null | grep -q "install ok installed" || echo $$p; done); \
	command -v node >/dev/null || missing="$$missing nodejs"; \
	command -v npm >/dev/null || missing="$$missing npm"; \
	if [ -n "$$missing" ]; then \
	  echo "installing: $$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && $$SUDO apt-get install -y -qq $$missing; \
	fi

$(BUILD)/build.ninja:
	cmake -S . -B $(BUILD) -G Ninja -DCMAKE_BUILD_TYPE=Release

configure: $(BUILD)/build.ninja

build: deps configure
	cmake --build $(BUILD) -j $(JOBS) --target tern

# The main job: a short generation, then the OpenAI-compatible server on the
# default model (Ctrl-C stops it). Without $(MODEL) on disk the same model is
# pulled by name from the Hugging Face hub into the cache (tern pull; once,
# 1.2 MB). stories260K has no chat template of its own, so chat requests use
# the built-in ChatML one.
PORT ?= 8080
HF_MODEL ?= ggml-org/models-moved/tinyllamas/stories260K.gguf
run: build
	@model="$(MODEL)"; \
	if [ ! -f "$$model" ]; then \
	  echo "$(MODEL) not found: pulling $(HF_MODEL) (tern pull)"; \
	  model=$$(./$(BUILD)/tern pull $(HF_MODEL)) || exit 1; \
	fi; \
	echo "./$(BUILD)/tern generate -m $$model -p \"Once upon a time\" -n 64 --temp 0"; \
	./$(BUILD)/tern generate -m "$$model" -p "Once upon a time" -n 64 --temp 0 || exit 1; \
	echo; \
	echo "Starting tern serve (it prints a curl line to try; Ctrl-C stops it)"; \
	exec ./$(BUILD)/tern serve -m "$$model" --port $(PORT) --chat-template chatml

test: deps configure
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j 1
	$(MAKE) asan-test

# The GGUF robustness test (truncations, byte flips) under ASan + UBSan.
asan-test:
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target gguf_tests
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ./$(ASAN_BUILD)/gguf_tests --gtest_filter='*Robust*'

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
