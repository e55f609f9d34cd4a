/* SPDX-License-Identifier: MIT */
/* backtrace_probe.h - where the unwinder stops on a fiber's stack: shared
 * by the Criterion test (tests/task/context.c) and the libc-only program
 * run under qemu (tests/context/qemu_context.c). */
#ifndef CEXEC_BACKTRACE_PROBE_H
#define CEXEC_BACKTRACE_PROBE_H

#include <execinfo.h>
#include <stdbool.h>
#include <stdint.h>

/* The context switch's first frame on a new stack (task/context.c). */
__attribute__((visibility("hidden"))) void exi_context_start(void);

static int bt_frames;
static void *bt_last;

/* Called on the fiber: records how many frames the unwinder found and
 * the outermost one. */
static __attribute__((noinline, unused)) void take_backtrace(void) {
    void *frames[64];
    bt_frames = backtrace(frames, 64);
    bt_last = bt_frames > 0 ? frames[bt_frames - 1] : NULL;
}

/* Whether the outermost frame take_backtrace saw is exi_context_start. */
static inline bool bt_ends_in_context_start(void) {
    uintptr_t start = (uintptr_t)exi_context_start, last = (uintptr_t)bt_last;
    return last > start && last < start + 16;
}

#endif
