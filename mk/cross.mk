# SPDX-License-Identifier: MIT
# mk/cross.mk - the context switch on both architectures.
#
#   make test-aarch64   tests/context/qemu_context.c with src/task/context.c,
#                       natively, then cross-compiled for aarch64 (static)
#                       and run under qemu-user
#
# The program needs nothing but libc (no Criterion, no libck), so the
# cross build needs only Debian's gcc-aarch64-linux-gnu, libc6-dev-arm64-cross
# and qemu-user (scripts/deps.sh).

CROSS_CC     ?= aarch64-linux-gnu-gcc
QEMU_AARCH64 ?= qemu-aarch64
CTX_SRC      := tests/context/qemu_context.c src/task/context.c
CTX_HDR      := tests/context/regs_probe.h tests/context/backtrace_probe.h src/task/exi_context.h
CTX_CFLAGS   := $(CSTD) $(WARN) -O2 -g -Isrc

.PHONY: test-aarch64

$(BUILD)/context/qemu_context: $(CTX_SRC) $(CTX_HDR)
	@mkdir -p $(dir $@)
	$(CC) $(CTX_CFLAGS) $(CFLAGS) -o $@ $(CTX_SRC)

$(BUILD)/context/qemu_context_aarch64: $(CTX_SRC) $(CTX_HDR) | $(BUILD)/.deps-cross
	@mkdir -p $(dir $@)
	@command -v $(CROSS_CC) >/dev/null || { echo "$(CROSS_CC) not found (scripts/deps.sh installs gcc-aarch64-linux-gnu)" >&2; exit 1; }
	$(CROSS_CC) $(CTX_CFLAGS) -static -o $@ $(CTX_SRC)

test-aarch64: $(BUILD)/context/qemu_context $(BUILD)/context/qemu_context_aarch64
	$(BUILD)/context/qemu_context
	@command -v $(QEMU_AARCH64) >/dev/null || { echo "$(QEMU_AARCH64) not found (scripts/deps.sh installs qemu-user)" >&2; exit 1; }
	$(QEMU_AARCH64) $(BUILD)/context/qemu_context_aarch64
