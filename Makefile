# tern — the two commands of the Quick start are `make run` and `make test`.
BUILD ?= build
ASAN_BUILD ?= build-asan
JOBS ?= $(shell nproc)
MODEL ?= ../shared/models/stories260K.gguf
DEB_PACKAGES = g++ cmake ninja-build pkg-config libgtest-dev libgmock-dev \
               nlohmann-json3-dev libpcre2-dev libcurl4-openssl-dev libssl-dev python3 \
               chromium haproxy curl python3-yaml clang libclang-rt-dev
# haproxy, curl: scripts/cluster.sh and its test (tests/cluster); python3-yaml:
# the check of the Kubernetes manifests (deploy/k8s); clang, libclang-rt-dev:
# the libFuzzer targets (fuzz/).
# node and npm (end-to-end tests with the OpenAI client) are installed from
# Debian only when no node/npm is on the PATH already. chromium: the browser
# test of the dashboard (tests/dashboard, driven by playwright-core from npm).

.PHONY: all build run test deps configure asan-test tsan-test soak fuzz fuzz-build fuzz-smoke clean

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
# default model (Ctrl-C stops it). MODEL defaults to the test data's
# stories260K beside the checkout (`make run MODEL=path/to/model.gguf` for
# another). stories260K has no chat template of its own, so chat requests
# use the built-in ChatML one.
PORT ?= 8080
run: build
	@if [ ! -f "$(MODEL)" ]; then \
	  echo "make run: model $(MODEL) not found; give one with make run MODEL=path/to/model.gguf" >&2; \
	  exit 1; \
	fi
	@echo "./$(BUILD)/tern generate -m $(MODEL) -p \"Once upon a time\" -n 64 --temp 0"
	@./$(BUILD)/tern generate -m "$(MODEL)" -p "Once upon a time" -n 64 --temp 0
	@echo
	@echo "Starting tern serve (it prints a curl line to try; Ctrl-C stops it)"
	@exec ./$(BUILD)/tern serve -m "$(MODEL)" --port $(PORT) --chat-template chatml

test: deps configure
	cmake --build $(BUILD) -j $(JOBS)
	cd $(BUILD) && ctest --output-on-failure -j 1
	$(MAKE) asan-test
	$(MAKE) tsan-test
	$(MAKE) fuzz-smoke

# The GGUF robustness test (truncations, byte flips) and the Jinja fuzz and
# limit tests under ASan + UBSan (the HTTP and request parsers run under both
# sanitizers in fuzz-smoke).
asan-test:
	cmake -S . -B $(ASAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTERN_SANITIZE=ON >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS) --target gguf_tests jinja_tests
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ./$(ASAN_BUILD)/gguf_tests --gtest_filter='*Robust*'
	ASAN_OPTIONS=detect_leaks=1 UBSAN_OPTIONS=print_stacktrace=1 \
	  ./$(ASAN_BUILD)/jinja_tests --gtest_filter='*Fuzz*:*Limit*'

# The threaded core under ThreadSanitizer (make test runs it): one binary,
# tsan_tests (CMakeLists.txt), in its own build folder, compiled -O2 -g1
# (line numbers in reports; 29% less compile time than -g; -O1 cannot build
# the AVX-512 kernels, whose intrinsics need constant-folded lanes). It runs the
# thread pool tests, the engine tests where clients add, abort and shut down
# from other threads while steps run, and every socket-server and API-server
# test (streams, aborts, slow, stalled and vanishing clients, shutdown). The
# 1,000-connection test is left out: TSan does not get 1,000 connection
# threads started within its wait (it runs in the plain build); the
# 32-connection eviction test covers the same code. The engine's
# output-equality tests stay in the plain build (one thread touches the
# model; under TSan they only run slower). Its cost on a fresh clone:
# docs/reliability.md.
TSAN_BUILD ?= build-tsan
TSAN_TESTS = ThreadPool*:HttpServer*:ApiServer*:EngineModelTest.SixtyFourTogetherMatchAlone:$\
  EngineModelTest.AbortFinishesWithAbortAndFreesKv:EngineModelTest.WaitForOutputsWakesWhenAStepDelivers:$\
  EngineModelTest.ShutdownAbortsRunningRequests:EngineModelTest.ConcurrentClientsAndAbortsEachGetOneFinalOutput
tsan-test:
	cmake -S . -B $(TSAN_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O2 -g1 -DNDEBUG" -DTERN_TSAN=ON >/dev/null
	cmake --build $(TSAN_BUILD) -j $(JOBS) --target tsan_tests
	cd $(TSAN_BUILD) && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ./tsan_tests \
	  --gtest_filter='$(TSAN_TESTS)-*ThousandTrickling*'

# Soak with faults (tests/soak): 2,000 streaming requests, 64 concurrent,
# mixed lengths, 20% disconnecting mid-stream, a 256 KiB KV budget forcing
# preemptions, prefix caching; outputs must equal solo runs, the KV cache
# drain to 0, RSS grow < 5% after warm-up, /health answer within 100 ms.
SOAK_REQUESTS ?= 2000
soak: deps configure
	cmake --build $(BUILD) -j $(JOBS) --target tern
	TERN_BINARY=$(BUILD)/tern SOAK_REQUESTS=$(SOAK_REQUESTS) bash tests/soak/run.sh

# libFuzzer targets (fuzz/): the GGUF reader, every tokenizer type, the HTTP
# parser, the OpenAI request parser, Jinja, the JSON-schema/GBNF/regex
# compilers; clang with ASan + UBSan in its own build folder.
FUZZ_BUILD ?= build-fuzz
FUZZ_SECONDS ?= 600
FUZZ_TARGETS ?= gguf tokenizer http_parser request_parser jinja grammar
fuzz-build:
	cmake -S . -B $(FUZZ_BUILD) -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
	  -DCMAKE_CXX_COMPILER=clang++ -DTERN_FUZZ=ON >/dev/null
	cmake --build $(FUZZ_BUILD) -j $(JOBS) --target $(addprefix fuzz_,$(FUZZ_TARGETS))

# Each target for FUZZ_SECONDS (default 10 minutes).
fuzz: fuzz-build
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_TARGETS)

# The fixed short budget of `make test`: 5 s per target (replays every
# regression input first).
fuzz-smoke: fuzz-build
	FUZZ_SECONDS=5 bash fuzz/run.sh $(FUZZ_BUILD) $(FUZZ_TARGETS)

clean:
	rm -rf $(BUILD) $(ASAN_BUILD) $(FUZZ_BUILD) $(TSAN_BUILD)
