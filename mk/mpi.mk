# SPDX-License-Identifier: MIT
# mk/mpi.mk - the optional MPI component, libcexec_mpi (docs/mpi.md).
#
#   make mpi        $(BUILD)/libcexec_mpi.a and $(BUILD)/cexec-mpi.pc (needs mpicc:
#                   scripts/deps.sh mpi installs MPICH)
#   make mpi-test   tests/mpi/mpi_senders.c under mpiexec -n 1, 2, 3 and 4
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
MPI_TEST_BIN := $(BUILD)/mpi/mpi_senders
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

$(MPI_TEST_BIN): tests/mpi/mpi_senders.c $(MPI_LIB) $(BUILD)/libcexec.a | $(BUILD)/.deps-mpi-ok
	@mkdir -p $(dir $@)
	$(MPI_ENV) $(MPICC) $(CSTD) $(WARN) $(OPT) -pthread -Iinclude -Isrc $(CK_CFLAGS) $(SAN) $(CFLAGS) -o $@ $< $(MPI_LIB) \
	    $(BUILD)/libcexec.a $(LDFLAGS_ALL) $(LIBS)

MPI_LEVELS_BIN := $(BUILD)/mpi/mpi_levels

$(MPI_LEVELS_BIN): tests/mpi/mpi_levels.c $(MPI_LIB) $(BUILD)/libcexec.a | $(BUILD)/.deps-mpi-ok
	@mkdir -p $(dir $@)
	$(MPI_ENV) $(MPICC) $(CSTD) $(WARN) $(OPT) -pthread -Iinclude -Isrc $(CK_CFLAGS) $(SAN) $(CFLAGS) -o $@ $< $(MPI_LIB) \
	    $(BUILD)/libcexec.a $(LDFLAGS_ALL) $(LIBS)

# Each rank count gets its own run, bounded by MPI_TIMEOUT seconds; the
# thread levels below MULTIPLE run on each rank count too.
mpi-test: $(MPI_TEST_BIN) $(MPI_LEVELS_BIN)
	@for n in $(MPI_RANKS); do \
	    echo "== mpiexec -n $$n $(MPI_TEST_BIN)"; \
	    timeout $(MPI_TIMEOUT) $(MPIEXEC) -n $$n $(MPI_TEST_BIN) || { echo "mpi-test: failed with $$n ranks" >&2; exit 1; }; \
	    for level in serialized funneled; do \
	        timeout $(MPI_TIMEOUT) $(MPIEXEC) -n $$n $(MPI_LEVELS_BIN) $$level || { echo "mpi-test: $$level failed with $$n ranks" >&2; exit 1; }; \
	    done; \
	done

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
