# SPDX-License-Identifier: MIT
# mk/mpi.mk - the optional MPI component, libcexec_mpi (docs/mpi.md).
#
#   make mpi        $(BUILD)/libcexec_mpi.a and $(BUILD)/cexec-mpi.pc (needs mpicc:
#                   scripts/deps.sh mpi installs MPICH)
#   make mpi-test   the MPI test programs (MPI_TEST_BIN) under mpiexec -n 1, 2, 3 and 4
#
# The core library never needs MPI: src/mpi/ is left out of SRC, and
# check-headers compiles <cexec/mpi.h> only where mpicc is found.

MPICC        ?= mpicc
MPIEXEC      ?= mpiexec
MPI_RANKS    ?= 1 2 3 4
MPI_TIMEOUT  ?= 60
MPI_SRC      := $(wildcard src/mpi/*.c)
MPI_OBJ      := $(MPI_SRC:src/%.c=$(BUILD)/obj-mpi/%.o)
MPI_LIB      := $(BUILD)/libcexec_mpi.a
# The test programs mpi-test runs (each block below adds its own).
MPI_TEST_BIN :=
# mpicc runs $(CC) (MPICH: MPICH_CC) with MPI's include and library flags.
MPI_ENV      := MPICH_CC="$(CC)" OMPI_CC="$(CC)"

.PHONY: mpi mpi-test

mpi: $(MPI_LIB) $(BUILD)/cexec-mpi.pc

$(BUILD)/.deps-mpi-ok: | $(BUILD)/.deps-mpi
	@command -v $(MPICC) >/dev/null 2>&1 || { echo "mpi: $(MPICC) not found (scripts/deps.sh mpi)" >&2; exit 1; }
	@touch $@

$(BUILD)/obj-mpi/%.o: src/%.c | $(DEPS_OK) $(BUILD)/.deps-mpi-ok
	@mkdir -p $(dir $@)
	$(MPI_ENV) $(MPICC) $(CFLAGS_ALL) -MMD -MP -c $< -o $@

$(MPI_LIB): $(MPI_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/cexec-mpi.pc: cexec-mpi.pc.in include/cexec/version.h
	@mkdir -p $(BUILD)
	sed -e 's|@PREFIX@|$(PREFIX)|' -e 's|@VERSION@|$(VERSION)|' $< > $@

# An MPI test program: tests/mpi/$(1).c, the files $(2) (headers it
# depends on, sources it links), libcexec_mpi and libcexec.
define mpi_program
$$(BUILD)/mpi/$(1): tests/mpi/$(1).c $(2) $$(MPI_LIB) $$(BUILD)/libcexec.a | $$(BUILD)/.deps-mpi-ok
	@mkdir -p $$(dir $$@)
	$$(MPI_ENV) $$(MPICC) $$(CSTD) $$(WARN) $$(OPT) -pthread -Iinclude -Isrc -Itests $$(CK_CFLAGS) $$(SAN) $$(CFLAGS) -o $$@ \
	    $$(filter %.c,$$^) $$(MPI_LIB) $$(BUILD)/libcexec.a $$(LDFLAGS_ALL) $$(LIBS)
endef

# ------------------------------------------- thread levels below MULTIPLE
# tests/mpi/mpi_levels.c built twice: MPI at SERIALIZED (an engine on a
# pool) and at FUNNELED (an engine on a run loop the main thread drives).
MPI_TEST_BIN += $(BUILD)/mpi/mpi_levels_serialized $(BUILD)/mpi/mpi_levels_funneled

$(BUILD)/mpi/mpi_levels_%: tests/mpi/mpi_levels.c tests/mpi/mpi_check.h tests/mpi/mpi_check.c $(MPI_LIB) \
                            $(BUILD)/libcexec.a | $(BUILD)/.deps-mpi-ok
	@mkdir -p $(dir $@)
	$(MPI_ENV) $(MPICC) $(CSTD) $(WARN) $(OPT) -pthread -Iinclude -Isrc -Itests $(CK_CFLAGS) $(SAN) $(CFLAGS) \
	    -DMPI_LEVEL_NAME='"$*"' -o $@ tests/mpi/mpi_levels.c tests/mpi/mpi_check.c $(MPI_LIB) $(BUILD)/libcexec.a \
	    $(LDFLAGS_ALL) $(LIBS)

# ------------------------------------------- senders, probe, sanitizers
# tests/mpi/mpi_senders.c (every sender but the probe), mpi_probe.c
# (ex_mpi_recv_any_size), both on mpi_check.c; mpi_stress.c, the engine's
# stress program, on tests/stress/stress_util.c.
#
#   make mpi-asan   libcexec + libcexec_mpi + the MPI tests under
#                   ASan+UBSan (build-asan/), mpiexec -n 1..4
#   make mpi-tsan   the same under TSan (clang, build-tsan/), then the
#                   stress program mpi_stress with 1, 2 and 4 ranks
MPI_CHECK := tests/mpi/mpi_check.h tests/mpi/mpi_check.c
MPI_TEST_BIN += $(BUILD)/mpi/mpi_senders $(BUILD)/mpi/mpi_probe
$(eval $(call mpi_program,mpi_senders,$(MPI_CHECK)))
$(eval $(call mpi_program,mpi_probe,$(MPI_CHECK)))
$(eval $(call mpi_program,mpi_stress,tests/stress/stress.h tests/stress/stress_util.h tests/stress/stress_util.c))

MPI_STRESS_BIN := $(BUILD)/mpi/mpi_stress
MPI_STRESS_RANKS ?= 1 2 4

# LeakSanitizer runs at each rank's exit: MPICH 4.0.2 frees what it
# allocated by MPI_Finalize, so no suppression is needed (none is given:
# a leak anywhere fails the run).  TSan sees MPICH's and UCX's locks
# through its pthread interceptors and reports nothing inside them here,
# so no suppression file either; should a later MPICH need one, scope it
# to MPICH/UCX frames only (called_from_lib:libmpich.so.12).
MPI_ASAN_ENV := ASAN_OPTIONS="detect_leaks=1 $(ASAN_OPTIONS)" UBSAN_OPTIONS="print_stacktrace=1 $(UBSAN_OPTIONS)"
MPI_TSAN_ENV := TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 $(TSAN_OPTIONS)"
MPI_ASAN_MAKE = $(MAKE) BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
                SAN="-fsanitize=address,undefined -fno-sanitize-recover=all" MPI_RUN_ENV='$(MPI_ASAN_ENV)'
MPI_TSAN_MAKE = $(MAKE) BUILD=build-tsan CC=clang OPT="-O1 -g" SAN="-fsanitize=thread" MPI_RUN_ENV='$(MPI_TSAN_ENV)'

.PHONY: mpi-asan mpi-tsan mpi-stress

# One target a sub-make: programs build in parallel, but run one at a
# time (the ranks share 2 cores).
mpi-asan:
	$(MPI_ASAN_MAKE) mpi-test

mpi-tsan: | $(BUILD)/.deps-clang
	$(MPI_TSAN_MAKE) mpi-test
	$(MPI_TSAN_MAKE) mpi-stress

mpi-stress: $(MPI_STRESS_BIN)
	@for n in $(MPI_STRESS_RANKS); do \
	    echo "== mpiexec -n $$n $(MPI_STRESS_BIN)"; \
	    $(MPI_RUN_ENV) timeout $(MPI_TIMEOUT) $(MPIEXEC) -n $$n $(MPI_STRESS_BIN) || { echo "mpi-stress: failed with $$n ranks" >&2; exit 1; }; \
	done
# ------------------------------------- end of senders, probe, sanitizers

# Each program and rank count gets its own run, bounded by MPI_TIMEOUT
# seconds; MPI_RUN_ENV is set by the sanitizer targets.  Last in the file:
# every block above adds its programs to MPI_TEST_BIN first.
mpi-test: $(MPI_TEST_BIN)
	@for p in $(MPI_TEST_BIN); do for n in $(MPI_RANKS); do \
	    echo "== mpiexec -n $$n $$p"; \
	    $(MPI_RUN_ENV) timeout $(MPI_TIMEOUT) $(MPIEXEC) -n $$n $$p || { echo "mpi-test: $$p failed with $$n ranks" >&2; exit 1; }; \
	done; done

-include $(MPI_OBJ:.o=.d)

# ---- idle cost of MPI progress (bench/mpi_idle.c, one rank)
MPI_IDLE_BIN := $(BUILD)/mpi/mpi_idle

$(MPI_IDLE_BIN): bench/mpi_idle.c $(MPI_LIB) $(BUILD)/libcexec.a | $(BUILD)/.deps-mpi-ok
	@mkdir -p $(dir $@)
	$(MPI_ENV) $(MPICC) $(CSTD) $(WARN) $(OPT) -pthread -Iinclude $(CK_CFLAGS) $(SAN) $(CFLAGS) -o $@ $< $(MPI_LIB) \
	    $(BUILD)/libcexec.a $(LDFLAGS_ALL) $(LIBS)

.PHONY: bench-mpi-idle
bench-mpi-idle: $(MPI_IDLE_BIN)
	$(MPIEXEC) -n 1 $(MPI_IDLE_BIN)

# ---- distributed algorithms: their test, the examples, the benchmark ----
#
#   make mpi-examples   $(BUILD)/mpi/examples/mpi_scan, mpi_pipeline
#   make mpi-test       also runs tests/mpi/mpi_algorithms.c and both
#                       examples under mpiexec -n 1..4 (before mpi_senders)
#   make bench-mpi      bench/mpi_bench.c (docs/PERFORMANCE.md, "MPI")

MPI_ALGO_TEST_BIN := $(BUILD)/mpi/mpi_algorithms
MPI_EXAMPLES      := mpi_scan mpi_pipeline
MPI_EX_BIN        := $(MPI_EXAMPLES:%=$(BUILD)/mpi/examples/%)
# The flags of MPI_TEST_BIN's link, for every program of this block.
MPI_PROG_FLAGS     = $(CSTD) $(WARN) $(OPT) -pthread -Iinclude $(SAN) $(CFLAGS)
MPI_PROG_LIBS      = $(MPI_LIB) $(BUILD)/libcexec.a $(LDFLAGS_ALL) $(LIBS)

.PHONY: mpi-examples mpi-test-algorithms mpi-run-examples

$(eval $(call mpi_program,mpi_algorithms,$(MPI_CHECK) tests/common/compensated_sum.h))

$(BUILD)/mpi/examples/%: examples/%.c $(MPI_LIB) $(BUILD)/libcexec.a | $(BUILD)/.deps-mpi-ok
	@mkdir -p $(dir $@)
	$(MPI_ENV) $(MPICC) $(MPI_PROG_FLAGS) -o $@ $< $(MPI_PROG_LIBS)

mpi-examples: $(MPI_EX_BIN)

mpi-test-algorithms: $(MPI_ALGO_TEST_BIN)
	@for n in $(MPI_RANKS); do \
	    echo "== mpiexec -n $$n $(MPI_ALGO_TEST_BIN)"; \
	    timeout $(MPI_TIMEOUT) $(MPIEXEC) -n $$n $(MPI_ALGO_TEST_BIN) || { echo "mpi-test: mpi_algorithms failed with $$n ranks" >&2; exit 1; }; \
	done

# Each example checks its own result; small sizes keep 4 ranks on 2 cores short.
mpi-run-examples: $(MPI_EX_BIN)
	@for n in $(MPI_RANKS); do \
	    echo "== mpiexec -n $$n mpi_scan 100000 / mpi_pipeline"; \
	    timeout $(MPI_TIMEOUT) $(MPIEXEC) -n $$n $(BUILD)/mpi/examples/mpi_scan 100000 || { echo "mpi-test: mpi_scan failed with $$n ranks" >&2; exit 1; }; \
	    timeout $(MPI_TIMEOUT) $(MPIEXEC) -n $$n $(BUILD)/mpi/examples/mpi_pipeline || { echo "mpi-test: mpi_pipeline failed with $$n ranks" >&2; exit 1; }; \
	done

mpi-test: mpi-test-algorithms mpi-run-examples

# The benchmark: one mpiexec run measures 1, 2 and 4 ranks (one pool
# worker each) and the single-process scan; knobs are environment
# variables (bench/mpi_bench.c), e.g.
#   CEXEC_MPI_BENCH_ONLY=rt make bench-mpi
MPI_BENCH_NP  ?= 4
MPI_BENCH_BIN := $(BUILD)/mpi/mpi_bench

.PHONY: bench-mpi

$(MPI_BENCH_BIN): bench/mpi_bench.c $(MPI_LIB) $(BUILD)/libcexec.a | $(BUILD)/.deps-mpi-ok
	@mkdir -p $(dir $@)
	$(MPI_ENV) $(MPICC) $(CSTD) $(WARN) -O3 -march=native -g -pthread -Iinclude $(CFLAGS) -o $@ $< $(MPI_PROG_LIBS)

# The round trip runs on its own 2-rank job: ranks left out of it would
# spin in MPI meanwhile and take the 2 cores from the two that measure.
bench-mpi: $(MPI_BENCH_BIN)
	@mkdir -p bench/results
	@if [ "$$CEXEC_MPI_BENCH_ONLY" != rt ]; then CEXEC_MPI_BENCH_ONLY=scan $(MPIEXEC) -n $(MPI_BENCH_NP) $(MPI_BENCH_BIN); fi
	@if [ "$$CEXEC_MPI_BENCH_ONLY" != scan ]; then CEXEC_MPI_BENCH_ONLY=rt $(MPIEXEC) -n 2 $(MPI_BENCH_BIN); fi
