# The README's commands. CMake does the work; this file only names it.
#
#   make compare   install what is missing, build (release), run the main comparison
#   make test      install what is missing, build (release), run every test
#   make asan-test the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make tsan-test the conformance, model (uring) and core unit tests under ThreadSanitizer
#   make fuzz      build the Session fuzz target (clang, libFuzzer) and run it FUZZ_SECONDS (60)
#   make cross-check / make micro   regenerate results/loadgen.md / results/micro.md
#   make cost      regenerate results/cost.md: server CPU and system calls per request
#   make abuse     slowhttptest's slow-client attacks against every model -> results/abuse/
#   make waiting-cost   RSS per waiting request and per idle connection, every model -> results/waiting-cost/
#
# Binaries land in build/<preset>/bin; build/bin points at build/release/bin.

PRESET ?= release
JOBS ?= $(shell nproc)
# Tests mostly wait (on timers, sockets, a server's header timeout), so ctest runs three per CPU;
# the few that push load declare PROCESSORS 2 in their CMakeLists and take two slots.
TEST_JOBS ?= $(shell echo $$(( $$(nproc) * 3 )))
FUZZ_SECONDS ?= 60
# The fuzzer's working corpus: the committed seeds are copied in, new inputs land here, never in
# common/fuzz/corpus. A crash is saved in $(FUZZ_WORK)/artifacts/ and fails the target.
FUZZ_WORK := build/fuzz/work

.PHONY: all deps build test asan-test tsan-test fuzz compare cross-check micro cost abuse waiting-cost format clean

all: build

deps:
	@scripts/install-deps

build: deps
	cmake --preset $(PRESET) >/dev/null
	cmake --build --preset $(PRESET) -j $(JOBS)
	@if [ "$(PRESET)" = release ]; then ln -sfn release/bin build/bin; fi

test: build
	ctest --preset $(PRESET) -j $(TEST_JOBS)

asan-test:
	$(MAKE) test PRESET=asan

# The tsan preset leaves the harness out and its test preset runs the labels conformance, uring
# and unit (so: the core, cm-server's CLI, every model), less two tests that cannot pass under
# TSan (its description in CMakePresets.json says why). A race fails the test (TSan exits 66).
tsan-test:
	$(MAKE) test PRESET=tsan

fuzz: deps
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz -j $(JOBS)
	mkdir -p $(FUZZ_WORK)/corpus $(FUZZ_WORK)/artifacts
	cp common/fuzz/corpus/* $(FUZZ_WORK)/corpus/
	build/fuzz/bin/session_fuzz $(FUZZ_WORK)/corpus -dict=common/fuzz/http.dict \
	  -max_len=10000 -timeout=10 -max_total_time=$(FUZZ_SECONDS) -print_final_stats=1 \
	  -artifact_prefix=$(FUZZ_WORK)/artifacts/

compare: build
	harness/compare

# cm-load against wrk on the same targets -> results/loadgen.md
cross-check: build
	harness/cross-check --no-build

# cm-micro's primitives -> results/micro.md
micro: build
	harness/micro/report

# server CPU and system calls per request, every model, nginx and node -> results/cost.md
cost: build
	harness/cost

# slowhttptest (slowloris, slow read) against every model, a fresh server each -> results/abuse/
abuse: build
	harness/abuse

# RSS per waiting request: 10,000 on one loop for every async model and the Go and Tokio peers,
# 512 threads for the blocking model, and the CPU each spends while they wait (5 s, nothing due);
# then the same per idle keep-alive connection (--idle; nginx and node too)
# -> results/waiting-cost/ (one JSON each, with provenance, and README.md)
WAITING_COST_STANDING_S ?= 5
waiting-cost: build
	@mkdir -p results/waiting-cost
	harness/waiting-cost --model blocking --threads 512 --waiting 512 --standing-s $(WAITING_COST_STANDING_S) --json results/waiting-cost/blocking.json
	for m in $$(build/bin/cm-server --list-models | awk '$$1 != "blocking" {print $$1}'); do \
	  harness/waiting-cost --model $$m --threads 1 --waiting 10000 --standing-s $(WAITING_COST_STANDING_S) --json results/waiting-cost/$$m.json || exit 1; \
	  harness/waiting-cost --model $$m --threads 1 --waiting 10000 --timers wheel --standing-s $(WAITING_COST_STANDING_S) --json results/waiting-cost/$$m-wheel.json || exit 1; \
	done
	for p in go tokio; do \
	  harness/waiting-cost --model $$p --threads 1 --waiting 10000 --standing-s $(WAITING_COST_STANDING_S) --json results/waiting-cost/$$p.json || exit 1; \
	done
	harness/waiting-cost --model blocking --idle --threads 512 --waiting 512 --standing-s $(WAITING_COST_STANDING_S) --json results/waiting-cost/blocking-idle.json
	for m in $$(build/bin/cm-server --list-models | awk '$$1 != "blocking" {print $$1}') nginx node go tokio; do \
	  harness/waiting-cost --model $$m --idle --threads 1 --waiting 10000 --standing-s $(WAITING_COST_STANDING_S) --json results/waiting-cost/$$m-idle.json || exit 1; \
	done
	harness/waiting-cost --summary results/waiting-cost

format:
	find common servers blocking asio_coro libuv_callbacks uring_coro harness \
	  \( -name '*.cpp' -o -name '*.hpp' \) -print0 | xargs -0 clang-format -i

clean:
	rm -rf build
