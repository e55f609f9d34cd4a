# SPDX-License-Identifier: MIT
# mk/fuzz.mk - the libFuzzer sender-graph harness (fuzz/README.md).
#
#   make fuzz-build   $(BUILD)/fuzz/sender_graph (clang, -fsanitize=fuzzer,address,undefined)
#   make fuzz-ci      run it FUZZ_SECONDS (60) on a copy of fuzz/corpus; fails on any crash
#   make fuzz         run it FUZZ_LONG_SECONDS (600), keeping what it finds in $(BUILD)/fuzz/corpus
#   make fuzz-seeds   regenerate fuzz/corpus from the seed writer (fuzz/seed_writer.c)
#
# The library sources are compiled again here, with the harness's
# sanitizers and libFuzzer's coverage instrumentation, and with jemalloc
# routed to malloc (ASan cannot see mallocx).

FUZZ_CC          ?= clang
FUZZ_SECONDS     ?= 60
FUZZ_LONG_SECONDS ?= 600
FUZZ_DIR         := $(BUILD)/fuzz
FUZZ_BIN         := $(FUZZ_DIR)/sender_graph
FUZZ_SAN_FLAGS   := -fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer
FUZZ_COMMON      := $(CSTD) -O1 -g -pthread -Iinclude -Isrc $(CK_CFLAGS) -DCEXEC_JEMALLOC_VIA_MALLOC $(FUZZ_SAN_FLAGS)
FUZZ_LIB_CFLAGS  := $(FUZZ_COMMON) $(WARN) -fsanitize=fuzzer-no-link
FUZZ_CFLAGS      := $(FUZZ_COMMON) -Wall -Wextra -Werror -Wshadow -fsanitize=fuzzer
FUZZ_LIB_OBJ     := $(SRC:src/%.c=$(FUZZ_DIR)/obj/%.o)
# The graph's decoder and dump: the harness's and the seed writer's.
FUZZ_GRAPH_SRC   := fuzz/graph_decode.c fuzz/graph_dump.c
FUZZ_HARNESS_SRC := fuzz/sender_graph.c fuzz/harness_state.c fuzz/build_nodes.c fuzz/build_algo.c \
                    fuzz/build_tasks_scopes.c
FUZZ_REF_SRC     := fuzz/ref_interp.c fuzz/ref_values.c fuzz/ref_sigs.c fuzz/ref_adaptors.c fuzz/ref_tasks_scopes.c
FUZZ_SRC         := $(FUZZ_HARNESS_SRC) $(FUZZ_REF_SRC) $(FUZZ_GRAPH_SRC)
FUZZ_HDR         := fuzz/graph.h fuzz/harness.h fuzz/ref_interp.h fuzz/ref_private.h
# The algorithm nodes' model and per-element loops: sanitizers, but no
# coverage instrumentation (its comparison tracing made big inputs slow).
FUZZ_MODEL_OBJ   := $(FUZZ_DIR)/algo_model.o
# -timeout: a hang is a lost wake-up or a lost completion; -rss_limit_mb: a leak.
FUZZ_OPTS        ?= -max_len=512 -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 -artifact_prefix=$(FUZZ_DIR)/

.PHONY: fuzz-build fuzz-ci fuzz fuzz-seeds

fuzz-build: $(FUZZ_BIN)

$(FUZZ_DIR)/obj/%.o: src/%.c | $(DEPS_OK) $(BUILD)/.deps-clang
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_LIB_CFLAGS) -MMD -MP -c $< -o $@

$(FUZZ_MODEL_OBJ): fuzz/algo_model.c $(FUZZ_HDR) | $(BUILD)/.deps-clang
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_COMMON) -Wall -Wextra -Werror -Wshadow -c $< -o $@

$(FUZZ_BIN): $(FUZZ_SRC) $(FUZZ_HDR) $(FUZZ_MODEL_OBJ) $(FUZZ_LIB_OBJ)
	@mkdir -p $(dir $@)
	$(FUZZ_CC) $(FUZZ_CFLAGS) -o $@ $(FUZZ_SRC) $(FUZZ_MODEL_OBJ) $(FUZZ_LIB_OBJ) -lck -lm -ldl -pthread

# The bounded CI run: a fresh copy of the seed corpus, so the repository's
# files are never touched; any crash, leak, timeout or mismatch fails it
# (libFuzzer exits non-zero and leaves crash-*/leak-*/timeout-* in $(FUZZ_DIR)).
fuzz-ci: $(FUZZ_BIN)
	@rm -rf $(FUZZ_DIR)/corpus-ci && mkdir -p $(FUZZ_DIR)/corpus-ci && cp fuzz/corpus/* $(FUZZ_DIR)/corpus-ci/
	@echo "fuzz-ci: $(FUZZ_BIN) for $(FUZZ_SECONDS) s (log: $(FUZZ_DIR)/fuzz-ci.log)"
	@$(FUZZ_BIN) $(FUZZ_OPTS) -max_total_time=$(FUZZ_SECONDS) $(FUZZ_DIR)/corpus-ci > $(FUZZ_DIR)/fuzz-ci.log 2>&1; \
	    rc=$$?; \
	    grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^Done [0-9]+ runs|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb' $(FUZZ_DIR)/fuzz-ci.log; \
	    if [ $$rc -ne 0 ]; then tail -n 80 $(FUZZ_DIR)/fuzz-ci.log; echo "fuzz-ci: FAILED (exit $$rc)"; exit 1; fi; \
	    echo "fuzz-ci: passed"

fuzz: $(FUZZ_BIN)
	@mkdir -p $(FUZZ_DIR)/corpus
	@echo "fuzz: $(FUZZ_BIN) for $(FUZZ_LONG_SECONDS) s (log: $(FUZZ_DIR)/fuzz.log)"
	@$(FUZZ_BIN) $(FUZZ_OPTS) -max_total_time=$(FUZZ_LONG_SECONDS) $(FUZZ_DIR)/corpus fuzz/corpus > $(FUZZ_DIR)/fuzz.log 2>&1; \
	    rc=$$?; \
	    grep -E '^#[0-9]+[[:space:]]+(INITED|DONE)|^Done [0-9]+ runs|stat::number_of_executed_units|stat::average_exec_per_sec|stat::peak_rss_mb' $(FUZZ_DIR)/fuzz.log; \
	    if [ $$rc -ne 0 ]; then tail -n 80 $(FUZZ_DIR)/fuzz.log; echo "fuzz: FAILED (exit $$rc)"; exit 1; fi

fuzz-seeds: fuzz/seed_writer.c $(FUZZ_GRAPH_SRC) fuzz/graph.h $(FUZZ_MODEL_OBJ)
	@mkdir -p $(FUZZ_DIR) fuzz/corpus
	$(FUZZ_CC) $(FUZZ_COMMON) -Wall -Wextra -Werror -o $(FUZZ_DIR)/seed_writer fuzz/seed_writer.c $(FUZZ_GRAPH_SRC) $(FUZZ_MODEL_OBJ) -lm
	rm -f fuzz/corpus/*
	$(FUZZ_DIR)/seed_writer fuzz/corpus

-include $(FUZZ_LIB_OBJ:.o=.d)
