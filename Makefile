# zero: the two commands of the README (`make demo`, `make test`) and the targets they use.
# CMake does the building; this file only wraps it.
BUILD   ?= build
ASAN    ?= build-asan
TSAN    ?= build-tsan
# the MPI tests under ASan on 2 ranks in CI (the other world sizes run without sanitizers);
# make test-asan ASAN_MPI_REGEX=np runs them all, ASAN_MPI_REGEX='np[23]$$' adds the odd world
ASAN_MPI_REGEX ?= \.np2$$
TSAN_TESTS ?= test_comm_async test_comm test_device
# test_comm_async on 2 and 3 ranks, test_comm on 2 (under TSan it is slow), the device layer's streams
TSAN_REGEX ?= ^(mpi\.(test_comm_async\.np[23]|test_comm\.np2)|unit\.test_device)$$
FUZZ_SECONDS ?= 12
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=
PREFIX  ?= /usr/local

.PHONY: all deps build test test-asan test-tsan fuzz lint demo bench install clean

all: build

deps:
	@bash scripts/deps.sh

$(BUILD)/CMakeCache.txt:
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=Release $(CMAKE_FLAGS) >/dev/null

build: $(BUILD)/CMakeCache.txt
	cmake --build $(BUILD) -j $(JOBS)

test: deps
	$(MAKE) build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

# Unit tests and the MPI tests on 2 ranks under AddressSanitizer + UndefinedBehaviorSanitizer
# (CI runs this after `make test`); leaks that OpenMPI's own libraries keep for the process's life are suppressed
# (tests/sanitizers/lsan.supp; its plugins stay loaded so that their frames have names), ours are not.
test-asan: deps
	cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DZERO_SANITIZE=ON -DZERO_CUDA=OFF >/dev/null
	cmake --build $(ASAN) -j $(JOBS)
	cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -L unit
	cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1:verify_asan_link_order=0 \
		LSAN_OPTIONS=suppressions=$(CURDIR)/tests/sanitizers/lsan.supp LD_PRELOAD=$(abspath $(ASAN))/tests/libzero_nodlclose.so \
		ctest --output-on-failure -j $(JOBS) -L mpi -R "$(ASAN_MPI_REGEX)"

# The communicator's MPI tests under ThreadSanitizer with the in-node progress thread on
# (ZERO_COMM_ASYNC=1): test_comm_async loads the thread from the caller's side; test_comm runs every
# collective through it. And the device layer's test: the fake device's stream threads. Races inside OpenMPI's own (uninstrumented) libraries are suppressed.
test-tsan: deps
	cmake -S . -B $(TSAN) -DCMAKE_BUILD_TYPE=Debug -DZERO_SANITIZE_THREAD=ON -DZERO_CUDA=OFF >/dev/null
	cmake --build $(TSAN) -j $(JOBS) --target $(TSAN_TESTS)
	cd $(TSAN) && ZERO_COMM_ASYNC=1 TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$(CURDIR)/tests/sanitizers/tsan.supp" \
		ctest --output-on-failure -j $(JOBS) -R "$(TSAN_REGEX)"

# libFuzzer over every parser of untrusted input (tests/fuzz: eleven targets), FUZZ_SECONDS each (CI: 12).
fuzz:
	@bash scripts/deps.sh ci
	bash scripts/fuzz.sh $(FUZZ_SECONDS)

# clang-format and clang-tidy over scripts/format-checked.txt (after `make build`: tidy reads its
# compile commands).
lint: build
	@bash scripts/deps.sh ci
	bash scripts/lint.sh

# libzero, its headers, zero.pc, the CMake package, `zero`, zero(1), bash completion (docs/INSTALL.md).
install: build
	cmake --install $(BUILD) --prefix $(PREFIX)

demo: deps
	$(MAKE) build
	bash scripts/demo.sh $(BUILD)

bench: deps
	$(MAKE) build
	bash scripts/bench.sh $(BUILD)

clean:
	rm -rf $(BUILD) $(ASAN) $(TSAN) build-fuzz
