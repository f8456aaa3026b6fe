# zero: the two commands of the README (`make demo`, `make test`) and the targets they use.
# CMake does the building; this file only wraps it.
BUILD   ?= build
ASAN    ?= build-asan
JOBS    ?= $(shell nproc)
CMAKE_FLAGS ?=
PREFIX  ?= /usr/local

.PHONY: all deps build test test-asan demo bench install clean

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

# Unit tests under AddressSanitizer + UndefinedBehaviorSanitizer (CI runs this after `make test`).
test-asan: deps
	cmake -S . -B $(ASAN) -DCMAKE_BUILD_TYPE=Debug -DZERO_SANITIZE=ON -DZERO_CUDA=OFF >/dev/null
	cmake --build $(ASAN) -j $(JOBS)
	cd $(ASAN) && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j $(JOBS) -L unit

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
	rm -rf $(BUILD) $(ASAN)
