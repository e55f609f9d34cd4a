# SPDX-License-Identifier: MIT
# cexec - std::execution for C.  See README.md.
#
#   make                 static + shared library (build/)
#   make test            every Criterion suite, one binary, one Synthesis line
#   make test-asan       the same suite under -fsanitize=address,undefined (build-asan/)
#   make test-tsan       standalone stress programs under ThreadSanitizer (build-tsan/)
#   make bench           benchmarks against serial C, oneTBB, OpenMP, libuv (bench/results/*.csv)
#   make examples        build examples/*.c
#   make demo            the inclusive-scan benchmark: cexec vs serial, oneTBB, OpenMP
#   make run-examples    build and run every example
#   make mpi             the optional MPI component, libcexec_mpi.a (mk/mpi.mk, docs/mpi.md)
#   make install PREFIX=/usr/local
#   make CC=clang        any of the above with clang
#   make clean

CC      ?= cc
PREFIX  ?= /usr/local
BUILD   ?= build
SAN     ?=

# The version lives in include/cexec/version.h; the soname's number is the
# ABI version (docs/abi.md), also the symbol version node in src/libcexec.map.
VERSION := $(shell sed -n 's/^\#define CEXEC_VERSION_STRING "\(.*\)"/\1/p' include/cexec/version.h)
ABI     := 0
SONAME  := libcexec.so.$(ABI)
SYMBOLS := src/libcexec.map

WARN    := -Wall -Wextra -Werror -Wshadow -Wconversion -Wstrict-prototypes -Wmissing-prototypes
CSTD    := -std=c17 -D_GNU_SOURCE
OPT     ?= -O2 -g
CK_CFLAGS := -D__x86_64__
ifeq ($(shell uname -m),aarch64)
CK_CFLAGS :=
endif

CFLAGS_ALL  = $(CSTD) $(WARN) $(OPT) -fPIC -pthread -Iinclude -Isrc $(CK_CFLAGS) $(SAN) $(JE_DEFS) $(CFLAGS)
LDFLAGS_ALL = -pthread $(SAN) $(LDFLAGS)
# Tests build with the library's warnings; -Isrc for the white-box tests
# of internal structures (deque, inbox, fiber, stack).
TEST_CFLAGS = $(CSTD) $(WARN) $(OPT) -pthread -Iinclude -Isrc -Itests $(SAN) -DBXF_STATIC_LIB=1 $(CFLAGS)

# src/ has a folder per layer (src/README.md); scripts/check-layers.sh
# checks that includes only point down.
# src/mpi/ is the optional MPI component (mk/mpi.mk), never in libcexec.
SRC      := $(filter-out src/mpi/%,$(wildcard src/*/*.c))
OBJ      := $(SRC:src/%.c=$(BUILD)/obj/%.o)

# The jemalloc allocator uses a private copy of Debian's libjemalloc_pic.a
# whose symbols are all made local but the three cexec calls (renamed
# exi_je_*): linking cexec never replaces the application's malloc.
# Sanitizer builds, and CEXEC_JEMALLOC=malloc, route it to malloc/free
# instead (ASan and valgrind cannot see jemalloc's mallocx).
#
# The copy reads its options from CEXEC_MCONF and /etc/cexec.mconf, never
# the application's MALLOC_CONF or /etc/malloc.conf (the two strings are
# patched in the object).  libcexec.a holds it; libcexec.so cannot (its
# initial-exec TLS would make the library impossible to dlopen), so there
# the copy is libcexec-jemalloc.so, which the shared library finds at first
# use and pkg-config cexec links (src/allocators/jemalloc.c).
JE_SONAME := libcexec-jemalloc.so.$(ABI)
ifeq ($(SAN)$(CEXEC_JEMALLOC),)
JE_OBJ   := $(BUILD)/obj/jemalloc_private.o
JE_SO    := $(BUILD)/libcexec-jemalloc.so
SO_OBJ   := $(filter-out $(BUILD)/obj/allocators/jemalloc.o,$(OBJ)) $(BUILD)/obj/allocators/jemalloc_dyn.o
else
JE_OBJ   :=
JE_SO    :=
SO_OBJ   := $(OBJ)
JE_DEFS  := -DCEXEC_JEMALLOC_VIA_MALLOC
endif
LIB_OBJ  := $(OBJ) $(JE_OBJ)
LIBS     := -lck -lm -ldl
# tests/ mirrors src/: a folder per layer, shared fixtures in tests/common/.
# stress/, soak/ and context/ hold standalone programs (their own targets).
TEST_DIRS := common base allocators core adaptors compose resources task algorithms testing
TESTS    := $(foreach d,$(TEST_DIRS),$(wildcard tests/$(d)/*.c))
TEST_OBJ := $(TESTS:tests/%.c=$(BUILD)/tests/%.o)
# examples/mpi_*.c need MPI: mk/mpi.mk builds them (make mpi-examples).
EXAMPLES := $(filter-out examples/mpi_%,$(wildcard examples/*.c))
EX_BIN   := $(EXAMPLES:examples/%.c=$(BUILD)/examples/%)
# scripts/deps.sh installs (as root) or names the packages of one purpose;
# each stamp runs it once per build dir.  Building the library needs only
# the build purpose; each test tool is asked for by the target that uses it.
DEPS_OK  := $(BUILD)/.deps-build
TEST_DEPS := $(BUILD)/.deps-test

.PHONY: all test check-example-tests check-failing-tests check-nonroot check-layers check-header-examples check-headers check-symbols check-install check-spdx man test-asan test-tsan stress examples run-examples demo bench install uninstall clean deps check-clang

all: $(BUILD)/libcexec.a $(BUILD)/libcexec.so $(JE_SO)

$(BUILD)/.deps-%: scripts/deps.sh
	@mkdir -p $(BUILD)
	@scripts/deps.sh $*
	@touch $@

deps:
	@scripts/deps.sh build

$(BUILD)/obj/%.o: src/%.c | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(BUILD)/obj/jemalloc_private.o: | $(DEPS_OK)
	@mkdir -p $(BUILD)/je
	@pic=$$(ls /usr/lib/*/libjemalloc_pic.a /usr/lib/libjemalloc_pic.a 2>/dev/null | head -n 1); \
	    [ -n "$$pic" ] || { echo "libjemalloc_pic.a not found (scripts/deps.sh installs libjemalloc-dev)" >&2; exit 1; }; \
	    cd $(BUILD)/je && rm -f *.o && ar x "$$pic"
	ld -r -o $(BUILD)/je/all.o $$(ls $(BUILD)/je/*.pic.o | grep -v jemalloc_cpp)
	objcopy --redefine-sym mallocx=exi_je_mallocx --redefine-sym sdallocx=exi_je_sdallocx \
	    --redefine-sym mallctl=exi_je_mallctl --keep-global-symbol=exi_je_mallocx \
	    --keep-global-symbol=exi_je_sdallocx --keep-global-symbol=exi_je_mallctl $(BUILD)/je/all.o $(BUILD)/je/renamed.o
	perl -0777 -pe 's/\0MALLOC_CONF\0/\0CEXEC_MCONF\0/g; s/\0\/etc\/malloc\.conf\0/\0\/etc\/cexec.mconf\0/g' \
	    $(BUILD)/je/renamed.o > $(BUILD)/je/patched.o
	@for s in CEXEC_MCONF /etc/cexec.mconf; do strings -a $(BUILD)/je/patched.o | grep -qx "$$s" || \
	    { echo "jemalloc_private.o: the configuration string $$s was not patched in" >&2; exit 1; }; done
	@if strings -a $(BUILD)/je/patched.o | grep -qx -e MALLOC_CONF -e /etc/malloc.conf; then \
	    echo "jemalloc_private.o: it still reads the application's configuration" >&2; exit 1; fi
	mv $(BUILD)/je/patched.o $@

$(BUILD)/obj/allocators/jemalloc_dyn.o: src/allocators/jemalloc.c | $(DEPS_OK)
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_ALL) -DCEXEC_JEMALLOC_DYNAMIC -DCEXEC_JEMALLOC_SONAME='"$(JE_SONAME)"' -MMD -MP -c $< -o $@

$(BUILD)/libcexec.a: $(LIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libcexec.so: $(SO_OBJ) $(SYMBOLS)
	$(CC) -shared -Wl,-soname,$(SONAME) -Wl,--version-script=$(SYMBOLS) -o $@ $(SO_OBJ) $(LDFLAGS_ALL) $(LIBS)

# The private jemalloc as a library of its own: only exi_je_* exported.
$(BUILD)/libcexec-jemalloc.so: $(JE_OBJ) src/libcexec-jemalloc.map
	$(CC) -shared -Wl,-soname,$(JE_SONAME) -Wl,--version-script=src/libcexec-jemalloc.map -o $@ $(JE_OBJ) -pthread -lm -ldl

$(BUILD)/tests/%.o: tests/%.c | $(TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(TEST_CFLAGS) -MMD -MP -c $< -o $@

# Programs whose end is what a suite tests (tests/exit/: the parallel
# scheduler's exit handler): the suite runs each in a child process, so
# they are built with the test binary.
EXIT_SRC := $(wildcard tests/exit/*.c)
EXIT_BIN := $(EXIT_SRC:tests/exit/%.c=$(BUILD)/exit/%)

$(BUILD)/exit/%: tests/exit/%.c $(BUILD)/libcexec.a
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT) -pthread -Iinclude $(SAN) $(CFLAGS) -o $@ $< $(BUILD)/libcexec.a $(LDFLAGS_ALL) $(LIBS)

$(BUILD)/tests/cexec_tests: $(TEST_OBJ) $(BUILD)/libcexec.a | $(EXIT_BIN)
	$(CC) -o $@ $(TEST_OBJ) $(BUILD)/libcexec.a $(LDFLAGS_ALL) -lcriterion $(LIBS)

# Tests that must fail (tests/testing/failing/, C and C++): each checks
# that an assertion of <cexec/testing.h> fails a Criterion test with its
# message; scripts/check-failing-tests.sh runs them in make test.
FAILING_SRC := $(wildcard tests/testing/failing/*.c) $(wildcard tests/testing/failing/*.cpp)
FAILING_OBJ := $(patsubst tests/%,$(BUILD)/tests/%.o,$(basename $(FAILING_SRC)))
TEST_CXXFLAGS = -std=c++17 -Wall -Wextra -Werror -Wshadow $(OPT) -pthread -Iinclude $(SAN) $(CXXFLAGS)

$(BUILD)/tests/%.o: tests/%.cpp | $(TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CXX) $(TEST_CXXFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/tests/failing_tests: $(FAILING_OBJ) $(BUILD)/libcexec.a
	$(CXX) -o $@ $(FAILING_OBJ) $(BUILD)/libcexec.a $(LDFLAGS_ALL) -lcriterion $(LIBS)

# The examples' own Criterion tests (examples/testing/): how a user tests
# code built on cexec, run in make test.
EXAMPLE_TESTS := $(BUILD)/examples/testing/deadline_test

$(BUILD)/examples/testing/deadline_test: examples/testing/deadline_test.c examples/deadline/request.c examples/deadline/request.h $(BUILD)/libcexec.a | $(TEST_DEPS)
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT) -pthread -Iinclude $(SAN) $(CFLAGS) -o $@ examples/testing/deadline_test.c examples/deadline/request.c $(BUILD)/libcexec.a $(LDFLAGS_ALL) -lcriterion $(LIBS)

check-example-tests: $(EXAMPLE_TESTS)
	@for t in $(EXAMPLE_TESTS); do ASAN_OPTIONS="leak_check_at_exit=0 $(ASAN_OPTIONS)" $$t --jobs 2 || exit 1; done

check-failing-tests: $(BUILD)/tests/failing_tests
	@scripts/check-failing-tests.sh --self-test
	@ASAN_OPTIONS="leak_check_at_exit=0 $(ASAN_OPTIONS)" scripts/check-failing-tests.sh $< $(FAILING_SRC)

# One binary holds every suite, so the run ends with one Synthesis line.
# Leaks are checked inside each test body (expect_no_leaks calls
# __lsan_do_recoverable_leak_check); the exit-time check is off because
# Criterion's runner keeps a few bytes of its own at exit.
test: check-spdx check-layers check-header-examples check-headers check-symbols man check-failing-tests check-example-tests $(BUILD)/tests/cexec_tests
	ASAN_OPTIONS="leak_check_at_exit=0 $(ASAN_OPTIONS)" $(BUILD)/tests/cexec_tests --jobs 2 $(TEST_ARGS)

test-asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all" test \
	    TEST_ARGS="$(TEST_ARGS)"

# Stress programs: their own main(), exactly-once checks; run under TSan in CI.
# stress_util.c (the harness and what the programs share) is linked into each.
STRESS_UTIL := tests/stress/stress_util.c
STRESS     := $(filter-out $(STRESS_UTIL),$(wildcard tests/stress/*.c))
STRESS_BIN := $(STRESS:tests/stress/%.c=$(BUILD)/stress/%)

$(BUILD)/stress/%: tests/stress/%.c $(STRESS_UTIL) tests/stress/stress.h tests/stress/stress_util.h $(BUILD)/libcexec.a
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT) -pthread -Iinclude -Isrc $(CK_CFLAGS) $(SAN) $(CFLAGS) -o $@ $< $(STRESS_UTIL) $(BUILD)/libcexec.a $(LDFLAGS_ALL) $(LIBS)

stress: $(STRESS_BIN)
	@for p in $(STRESS_BIN); do echo "== $$p"; TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" $$p || exit 1; done

test-tsan: | $(BUILD)/.deps-clang
	$(MAKE) BUILD=build-tsan CC=clang OPT="-O1 -g" SAN="-fsanitize=thread" stress

$(BUILD)/examples/%: examples/%.c $(BUILD)/libcexec.a
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT) -pthread -Iinclude $(SAN) $(CFLAGS) -o $@ $< $(BUILD)/libcexec.a $(LDFLAGS_ALL) $(LIBS)

# The deadline service's request pipeline is a file of its own, which its
# test (examples/testing/) compiles too.
$(BUILD)/examples/deadline_service: examples/deadline_service.c examples/deadline/request.c examples/deadline/request.h $(BUILD)/libcexec.a
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT) -pthread -Iinclude $(SAN) $(CFLAGS) -o $@ examples/deadline_service.c examples/deadline/request.c $(BUILD)/libcexec.a $(LDFLAGS_ALL) $(LIBS)

examples: $(EX_BIN)

# Builds and runs every example (each checks its own result).
RUN_EXAMPLES := hello_world retry pool_stats fib inclusive_scan spawn_scope algorithms task_hello task_pipeline requests service deadline_service manual_scheduler fanout
run-examples: $(RUN_EXAMPLES:%=$(BUILD)/examples/%)
	@for d in $(RUN_EXAMPLES); do echo "== $$d"; $(BUILD)/examples/$$d || exit 1; done

# The README's first command: the inclusive-scan benchmark (1e8 doubles)
# against serial C, oneTBB and OpenMP, as a short table.
demo: $(BUILD)/bench/bench
	@mkdir -p bench/results
	$(BUILD)/bench/bench --demo $(DEMO_ARGS)

# Benchmarks against oneTBB, OpenMP and libuv (scripts/deps.sh bench installs
# them); only the bench binary links them, never the library.
BENCH_OBJ := $(BUILD)/bench/bench.o $(BUILD)/bench/algos.o $(BUILD)/bench/harness.o $(BUILD)/bench/baselines_omp.o \
             $(BUILD)/bench/baselines_tbb.o $(BUILD)/bench/baselines_fiber.o $(BUILD)/bench/tasks.o \
             $(BUILD)/bench/pool.o $(BUILD)/bench/timers.o $(BUILD)/bench/baselines_uv.o \
             $(BUILD)/bench/ex_fib.o $(BUILD)/bench/ex_scan.o
BENCH_CFLAGS = $(CSTD) -Wall -Wextra -Werror -O3 -march=native -g -pthread -Iinclude -Isrc $(CFLAGS)

$(BUILD)/bench/%.o: bench/%.c bench/harness.h bench/baselines.h bench/bench.h | $(BUILD)/.deps-bench
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -fopenmp -MMD -MP -c $< -o $@
$(BUILD)/bench/baselines_tbb.o: bench/baselines_tbb.cpp bench/baselines.h | $(BUILD)/.deps-bench
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -Wall -Wextra -Werror -O3 -march=native -g -pthread -c $< -o $@
$(BUILD)/bench/baselines_fiber.o: bench/baselines_fiber.cpp bench/baselines.h | $(BUILD)/.deps-bench
	@mkdir -p $(dir $@)
	$(CXX) -std=c++17 -Wall -Wextra -Werror -O3 -march=native -g -pthread -c $< -o $@
$(BUILD)/bench/ex_%.o: examples/%.c | $(BUILD)/.deps-bench
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -DCEXEC_EXAMPLE_NO_MAIN -MMD -MP -c $< -o $@
$(BUILD)/bench/ex_scan.o: examples/inclusive_scan.c | $(BUILD)/.deps-bench
	@mkdir -p $(dir $@)
	$(CC) $(BENCH_CFLAGS) -DCEXEC_EXAMPLE_NO_MAIN -MMD -MP -c $< -o $@
$(BUILD)/bench/bench: $(BENCH_OBJ) $(BUILD)/libcexec.a
	$(CXX) -o $@ $(BENCH_OBJ) $(BUILD)/libcexec.a -fopenmp -ltbb -lboost_fiber -lboost_context -luv $(LIBS) -pthread

bench: $(BUILD)/bench/bench
	@mkdir -p bench/results
	$(BUILD)/bench/bench $(BENCH_ARGS)

# Includes and calls between src/'s layers point down only (src/README.md).
check-layers: $(LIB_OBJ)
	@scripts/check-layers.sh --self-test
	@scripts/check-layers.sh $(BUILD)/obj

# Every code example in a public header is an excerpt of examples/ (which
# run-examples compiles and runs).
check-header-examples:
	@scripts/check-header-examples.sh --self-test
	@scripts/check-header-examples.sh

# Every public header compiles on its own as C17, C++17 and C++20, and
# the public macros work from C++ (tests/cxx/macros.cpp, g++ and clang++).
check-headers: $(BUILD)/libcexec.a | $(TEST_DEPS)
	@scripts/check-headers.sh --self-test
	@CC="$(CC)" CXX="$(CXX)" SAN="$(SAN)" LIBS="$(LIBS)" scripts/check-headers.sh $(BUILD)

# The API reference: man pages (section 3) generated from the public
# headers' comments; an undocumented public function fails it.
man:
	@scripts/gen-man.sh --self-test
	@scripts/gen-man.sh $(BUILD)/man $(VERSION)

# Every file carries its licence tag (LICENSE: MIT).
check-spdx:
	@scripts/check-spdx.sh --self-test
	@scripts/check-spdx.sh

# make install into a scratch prefix, a program built against it with
# pkg-config (shared and static), make uninstall (used by CI).
check-install: all
	@scripts/check-install.sh

# make and make install as an unprivileged user with only the build
# packages (scripts/check-nonroot.sh; as root it builds as nobody).
check-nonroot:
	@scripts/check-nonroot.sh

# The shared library exports ex_* and nothing internal, versioned
# (src/libcexec.map, docs/abi.md).
check-symbols: $(BUILD)/libcexec.so
	@scripts/check-symbols.sh --self-test
	@scripts/check-symbols.sh $(BUILD)/libcexec.so $(ABI)

# Warning-free with clang as well (used by CI).
check-clang: | $(BUILD)/.deps-clang
	$(MAKE) BUILD=build-clang CC=clang CXX=clang++ all examples $(BUILD)-clang/tests/cexec_tests \
	    $(BUILD)-clang/tests/failing_tests

cexec.pc: cexec.pc.in cexec-static.pc.in
	@mkdir -p $(BUILD)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' cexec.pc.in > $(BUILD)/cexec.pc
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' cexec-static.pc.in > $(BUILD)/cexec-static.pc

install: all cexec.pc man
	install -d $(DESTDIR)$(PREFIX)/include/cexec/detail $(DESTDIR)$(PREFIX)/lib/pkgconfig
	install -m 644 $(filter-out include/cexec/mpi%,$(wildcard include/cexec/*.h)) include/cexec/*.hpp $(DESTDIR)$(PREFIX)/include/cexec/
	install -m 644 include/cexec/detail/*.h $(DESTDIR)$(PREFIX)/include/cexec/detail/
	install -m 644 $(BUILD)/libcexec.a $(DESTDIR)$(PREFIX)/lib/
	install -m 755 $(BUILD)/libcexec.so $(DESTDIR)$(PREFIX)/lib/libcexec.so.$(VERSION)
	ln -sf libcexec.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(SONAME)
	ln -sf $(SONAME) $(DESTDIR)$(PREFIX)/lib/libcexec.so
	install -m 755 $(BUILD)/libcexec-jemalloc.so $(DESTDIR)$(PREFIX)/lib/libcexec-jemalloc.so.$(VERSION)
	ln -sf libcexec-jemalloc.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(JE_SONAME)
	ln -sf $(JE_SONAME) $(DESTDIR)$(PREFIX)/lib/libcexec-jemalloc.so
	install -m 644 $(BUILD)/cexec.pc $(BUILD)/cexec-static.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/
	install -d $(DESTDIR)$(PREFIX)/share/doc/cexec $(DESTDIR)$(PREFIX)/share/man/man3
	install -m 644 $(BUILD)/man/man3/*.3 $(DESTDIR)$(PREFIX)/share/man/man3/
	install -m 644 LICENSE THIRD-PARTY-NOTICES $(DESTDIR)$(PREFIX)/share/doc/cexec/
	@# The MPI component (mk/mpi.mk) only when `make mpi` built it.
	@if [ -f $(MPI_LIB) ]; then \
	    echo "install: the MPI component (libcexec_mpi.a, cexec/mpi*.h, cexec-mpi.pc)"; \
	    sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' cexec-mpi.pc.in > $(BUILD)/cexec-mpi.pc && \
	    install -m 644 include/cexec/mpi.h include/cexec/mpi_algorithms.h $(DESTDIR)$(PREFIX)/include/cexec/ && \
	    install -m 644 $(MPI_LIB) $(DESTDIR)$(PREFIX)/lib/ && \
	    install -m 644 $(BUILD)/cexec-mpi.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/; \
	fi

# Removes what install put in place (and the directories it made, if empty).
uninstall:
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/include/cexec/,$(notdir $(wildcard include/cexec/*.h include/cexec/*.hpp)))
	rm -f $(addprefix $(DESTDIR)$(PREFIX)/include/cexec/detail/,$(notdir $(wildcard include/cexec/detail/*.h)))
	rm -f $(DESTDIR)$(PREFIX)/lib/libcexec.a $(DESTDIR)$(PREFIX)/lib/libcexec.so.$(VERSION)
	rm -f $(DESTDIR)$(PREFIX)/lib/$(SONAME) $(DESTDIR)$(PREFIX)/lib/libcexec.so
	rm -f $(DESTDIR)$(PREFIX)/lib/libcexec-jemalloc.so.$(VERSION) $(DESTDIR)$(PREFIX)/lib/$(JE_SONAME) $(DESTDIR)$(PREFIX)/lib/libcexec-jemalloc.so
	rm -f $(DESTDIR)$(PREFIX)/lib/pkgconfig/cexec.pc $(DESTDIR)$(PREFIX)/lib/pkgconfig/cexec-static.pc
	rm -f $(DESTDIR)$(PREFIX)/lib/libcexec_mpi.a $(DESTDIR)$(PREFIX)/lib/pkgconfig/cexec-mpi.pc
	rm -f $(DESTDIR)$(PREFIX)/share/doc/cexec/LICENSE $(DESTDIR)$(PREFIX)/share/doc/cexec/THIRD-PARTY-NOTICES
	rm -f $(DESTDIR)$(PREFIX)/share/man/man3/cexec.3 $(DESTDIR)$(PREFIX)/share/man/man3/cexec_*.3 $(DESTDIR)$(PREFIX)/share/man/man3/ex_*.3
	-rmdir $(DESTDIR)$(PREFIX)/include/cexec/detail $(DESTDIR)$(PREFIX)/include/cexec $(DESTDIR)$(PREFIX)/share/doc/cexec 2>/dev/null

clean:
	rm -rf build build-asan build-clang build-tsan

-include $(OBJ:.o=.d) $(BUILD)/obj/allocators/jemalloc_dyn.d $(TEST_OBJ:.o=.d) $(FAILING_OBJ:.o=.d) $(BENCH_OBJ:.o=.d)

# Reliability targets (model check, fuzzing, valgrind, soak): one fragment each.
include $(wildcard mk/*.mk)
