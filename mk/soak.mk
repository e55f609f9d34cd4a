# SPDX-License-Identifier: MIT
# mk/soak.mk - the soak test (tests/soak/, docs/RELIABILITY.md).  Not in CI.
#
#   make soak          build $(BUILD)/soak/soak and run it for SOAK_SECONDS (60)
#   make soak-asan     the same program under -fsanitize=address,undefined
#                      (build-asan/), SOAK_SAN_SECONDS (30) unless SOAK_SECONDS is given
#   make soak-tsan     under ThreadSanitizer (clang, build-tsan/, the library's
#                      atomics routed through C11 as for test-tsan), same default
#   make soak-build    only build it
#
#   SOAK_SEED     the run's seed (0: drawn from the clock; printed at start,
#                 pass it back to replay the same graphs)
#   SOAK_WORKERS  pool threads (0: ex_default_thread_count())
#   SOAK_DRIVERS  threads that launch and check operations (2)
#   SOAK_INFLIGHT operations in flight at most (48)
#   SOAK_CHURN    churn threads (1; 0: none): each creates a pool, a strand, a
#                 single-thread context and a run loop, runs tasks that move
#                 between them, and destroys them under the tasks, cycle after
#                 cycle (tests/soak/churn.c)
#   SOAK_ARGS     more options (--round, --report, --watchdog, --warmup,
#                 --heap-tol-mb, --rss-tol-mb, --vm-tol-mb (VmSize growth
#                 after the warm-up, 256; plain builds), --churn-move-race 0
#                 (moves back to a closing pool only once it refuses work;
#                 by default they race its destroy); see tests/soak/soak.c)

SOAK_SECONDS     ?= 60
SOAK_SAN_SECONDS ?= 30
SOAK_SEED        ?= 0
SOAK_WORKERS     ?= 0
SOAK_DRIVERS     ?= 2
SOAK_INFLIGHT    ?= 48
SOAK_CHURN       ?= 1
SOAK_ARGS        ?=
SOAK_SRC         := $(wildcard tests/soak/*.c)
SOAK_HDR         := $(wildcard tests/soak/*.h)
SOAK_BIN         := $(BUILD)/soak/soak

# The sanitizer targets keep SOAK_SECONDS when it was given, else use the shorter default.
soak_san_seconds = $(if $(filter command line environment,$(origin SOAK_SECONDS)),$(SOAK_SECONDS),$(SOAK_SAN_SECONDS))

.PHONY: soak soak-build soak-asan soak-tsan

$(SOAK_BIN): $(SOAK_SRC) $(SOAK_HDR) $(BUILD)/libcexec.a
	@mkdir -p $(dir $@)
	$(CC) $(CSTD) $(WARN) $(OPT) -pthread -Iinclude -Isrc $(CK_CFLAGS) $(SAN) $(CFLAGS) -o $@ $(SOAK_SRC) $(BUILD)/libcexec.a $(LDFLAGS_ALL) $(LIBS)

soak-build: $(SOAK_BIN)

soak: $(SOAK_BIN)
	TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 $(TSAN_OPTIONS)" \
	    $(SOAK_BIN) --seconds $(SOAK_SECONDS) --seed $(SOAK_SEED) --workers $(SOAK_WORKERS) \
	    --drivers $(SOAK_DRIVERS) --inflight $(SOAK_INFLIGHT) --churn $(SOAK_CHURN) $(SOAK_ARGS)

soak-asan:
	$(MAKE) BUILD=build-asan OPT="-O1 -g -fno-omit-frame-pointer" \
	    SAN="-fsanitize=address,undefined -fno-sanitize-recover=all" soak SOAK_SECONDS=$(soak_san_seconds)

soak-tsan:
	$(MAKE) BUILD=build-tsan CC=clang OPT="-O1 -g" SAN="-fsanitize=thread" soak SOAK_SECONDS=$(soak_san_seconds)
