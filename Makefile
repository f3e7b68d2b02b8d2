# The README's commands. CMake does the work; this file only names it.
#
#   make compare   install what is missing, build (release), run the main comparison
#   make test      install what is missing, build (release), run every test
#   make asan-test the same tests under AddressSanitizer + UndefinedBehaviorSanitizer
#   make cross-check / make micro   regenerate results/loadgen.md / results/micro.md
#   make abuse     slowhttptest's slow-client attacks against every model -> results/abuse/
#
# Binaries land in build/<preset>/bin; build/bin points at build/release/bin.

PRESET ?= release
JOBS ?= $(shell nproc)

.PHONY: all deps build test asan-test compare cross-check micro abuse format clean

all: build

deps:
	@scripts/install-deps

build: deps
	cmake --preset $(PRESET) >/dev/null
	cmake --build --preset $(PRESET) -j $(JOBS)
	@if [ "$(PRESET)" = release ]; then ln -sfn release/bin build/bin; fi

test: build
	ctest --preset $(PRESET) -j $(JOBS)

asan-test:
	$(MAKE) test PRESET=asan

compare: build
	harness/compare

# cm-load against wrk on the same targets -> results/loadgen.md
cross-check: build
	harness/cross-check --no-build

# cm-micro's primitives -> results/micro.md
micro: build
	harness/micro/report

# slowhttptest (slowloris, slow read) against every model, a fresh server each -> results/abuse/
abuse: build
	harness/abuse

format:
	find common servers blocking asio_coro libuv_callbacks uring_coro harness \
	  \( -name '*.cpp' -o -name '*.hpp' \) -print0 | xargs -0 clang-format -i

clean:
	rm -rf build
