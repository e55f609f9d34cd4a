/* SPDX-License-Identifier: MIT */
/* qemu_context.c - self-checking test of exi_context_switch/init with no
 * library around it: built natively and, for aarch64, cross-compiled
 * static and run under qemu-user (mk/cross.mk, `make test-aarch64`).
 *
 * Checks: arguments through switches, every callee-saved register (integer
 * and, on aarch64, d8-d15) exactly preserved on both sides of a switch, the
 * floating-point control word per context and inherited by a new one,
 * 16-byte stack alignment at entry and after resumes with odd stack
 * bounds, a ring of contexts, deep recursion on a context's stack, and a
 * DWARF backtrace from a context that ends at its first frame. */
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "task/exi_context.h"
#include "backtrace_probe.h"
#include "regs_probe.h"

static int passed, failed;

#define CHECK(cond, ...)                                                            \
    do {                                                                            \
        if (cond) {                                                                 \
            passed++;                                                               \
        } else {                                                                    \
            failed++;                                                               \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                           \
            fprintf(stderr, "\n");                                                  \
        }                                                                           \
    } while (0)

enum { STACK = 256 * 1024 };

static exi_context main_ctx, fib_ctx;

static void *new_stack(void) {
    void *p = aligned_alloc(64, STACK);
    if (!p) abort();
    return p;
}

/* ------------------------------------------------------------ arguments */

static void echo_entry(void *arg, void *user) {
    CHECK(user == &fib_ctx, "user pointer");
    uintptr_t v = (uintptr_t)arg;
    for (;;) v = (uintptr_t)exi_context_switch(&fib_ctx, &main_ctx, (void *)(v * 2 + 1));
}

static void test_arguments(void) {
    void *stack = new_stack();
    exi_context_init(&fib_ctx, stack, STACK, echo_entry, &fib_ctx);
    int bad = 0;
    for (uintptr_t i = 0; i < 100000; i++)
        if ((uintptr_t)exi_context_switch(&main_ctx, &fib_ctx, (void *)i) != i * 2 + 1) bad++;
    CHECK(bad == 0, "%d round trips returned the wrong argument", bad);
    free(stack);
}

/* ------------------------------------------------------------ registers */

static const char *const names[PROBE_REGS] = PROBE_NAMES;

static int check_regs(const uint64_t *out, const char *side) {
    int bad = 0;
    for (int i = 0; i < PROBE_REGS; i++) {
        if (out[i] != probe_value(i)) {
            fprintf(stderr, "%s: %s = %#llx, expected %#llx\n", side, names[i], (unsigned long long)out[i],
                    (unsigned long long)probe_value(i));
            bad++;
        }
    }
    return bad;
}

/* The fresh side first clobbers (main probes), then probes (main clobbers). */
static void regs_entry(void *arg, void *user) {
    (void)arg, (void)user;
    for (int i = 0; i < 100; i++) clobber_switch(&fib_ctx, &main_ctx, NULL);
    for (;;) {
        uint64_t out[PROBE_REGS];
        probe_switch(&fib_ctx, &main_ctx, NULL, out);
        CHECK(check_regs(out, "fresh context") == 0, "registers of the fresh context");
    }
}

static void test_registers(void) {
    void *stack = new_stack();
    exi_context_init(&fib_ctx, stack, STACK, regs_entry, NULL);
    for (int i = 0; i < 100; i++) {
        uint64_t out[PROBE_REGS];
        memset(out, 0, sizeof out);
        probe_switch(&main_ctx, &fib_ctx, NULL, out);
        CHECK(check_regs(out, "main context") == 0, "registers of the main context");
    }
    for (int i = 0; i < 100; i++) clobber_switch(&main_ctx, &fib_ctx, NULL);
    free(stack);
}

/* ------------------------------------------------- floating-point control */

static fpstate fp_inherited;

static void fp_entry(void *arg, void *user) {
    (void)arg, (void)user;
    CHECK(fp_eq(fp_get(), fp_inherited), "a new context starts with its creator's FP control");
    fpstate mine = fp_variant(fp_get(), 2);
    fp_set(mine);
    for (;;) {
        exi_context_switch(&fib_ctx, &main_ctx, NULL);
        CHECK(fp_eq(fp_get(), mine), "the fresh context kept its FP control");
    }
}

static void test_fp_control(void) {
    fpstate orig = fp_get();
    fp_inherited = fp_variant(orig, 3);
    fp_set(fp_inherited);
    void *stack = new_stack();
    exi_context_init(&fib_ctx, stack, STACK, fp_entry, NULL);
    fpstate mine = fp_variant(orig, 1);
    fp_set(mine);
    for (int i = 0; i < 10; i++) {
        exi_context_switch(&main_ctx, &fib_ctx, NULL);
        CHECK(fp_eq(fp_get(), mine), "the main context kept its FP control");
    }
    fp_set(orig);
    free(stack);
}

/* ------------------------------------------------------------ alignment */

static uintptr_t misaligned;

__attribute__((noinline)) static void note_alignment(void) {
    _Alignas(16) volatile char buf[16];
    buf[0] = 1;
    if ((uintptr_t)buf % 16 || (uintptr_t)__builtin_frame_address(0) % 16) misaligned++;
}

static void align_entry(void *arg, void *user) {
    (void)arg, (void)user;
    note_alignment();
    for (;;) {
        exi_context_switch(&fib_ctx, &main_ctx, NULL);
        note_alignment();
    }
}

static void test_alignment(void) {
    char *stack = new_stack();
    for (size_t skew = 0; skew < 32; skew++) {
        misaligned = 0;
        exi_context_init(&fib_ctx, stack + skew, STACK - 2 * skew - 1, align_entry, NULL);
        for (int i = 0; i < 3; i++) exi_context_switch(&main_ctx, &fib_ctx, NULL);
        CHECK(misaligned == 0, "stack misaligned with bounds skewed by %zu", skew);
    }
    free(stack);
}

/* ------------------------------------------------------------------ ring */

enum { RING = 8, LAPS = 1000 };
static exi_context ring[RING];
static unsigned ring_trace[RING], ring_bad;

static void ring_entry(void *arg, void *user) {
    unsigned me = (unsigned)(uintptr_t)user;
    uintptr_t token = (uintptr_t)arg;
    for (;;) {
        if (token % RING != me) ring_bad++;
        ring_trace[me]++;
        exi_context *next = token + 1 == (uintptr_t)RING * LAPS ? &main_ctx : &ring[(me + 1) % RING];
        token = (uintptr_t)exi_context_switch(&ring[me], next, (void *)(token + 1));
    }
}

static void test_ring(void) {
    void *stacks[RING];
    for (unsigned i = 0; i < RING; i++) {
        stacks[i] = new_stack();
        exi_context_init(&ring[i], stacks[i], STACK, ring_entry, (void *)(uintptr_t)i);
    }
    uintptr_t end = (uintptr_t)exi_context_switch(&main_ctx, &ring[0], (void *)0);
    CHECK(end == RING * LAPS, "ring ended at %lu", (unsigned long)end);
    CHECK(ring_bad == 0, "%u tokens reached the wrong context", ring_bad);
    for (unsigned i = 0; i < RING; i++) {
        CHECK(ring_trace[i] == LAPS, "context %u ran %u times", i, ring_trace[i]);
        free(stacks[i]);
    }
}

/* ------------------------------------------------------------- recursion */

__attribute__((noinline)) static uint64_t deep(unsigned n) {
    volatile uint64_t pad[60];
    for (unsigned i = 0; i < 60; i++) pad[i] = n + i;
    if (n == 0) return pad[0];
    return deep(n - 1) + pad[59] - 59;
}

static void deep_entry(void *arg, void *user) {
    (void)user;
    uint64_t r = deep((unsigned)(uintptr_t)arg);
    exi_context_switch(&fib_ctx, &main_ctx, (void *)(uintptr_t)r);
    abort();
}

static void test_recursion(void) {
    void *stack = new_stack();
    unsigned depth = STACK / 640;  /* frames of about 500 bytes: most of the stack */
    exi_context_init(&fib_ctx, stack, STACK, deep_entry, NULL);
    uintptr_t r = (uintptr_t)exi_context_switch(&main_ctx, &fib_ctx, (void *)(uintptr_t)depth);
    uint64_t want = (uint64_t)depth * (depth + 1) / 2;
    CHECK(r == want, "recursion sum %lu, expected %lu", (unsigned long)r, (unsigned long)want);
    free(stack);
}

/* ------------------------------------------------------------- unwinding */


static void bt_entry(void *arg, void *user) {
    (void)arg, (void)user;
    take_backtrace();
    exi_context_switch(&fib_ctx, &main_ctx, NULL);
    abort();
}

static void test_backtrace(void) {
    void *stack = new_stack();
    exi_context_init(&fib_ctx, stack, STACK, bt_entry, NULL);
    exi_context_switch(&main_ctx, &fib_ctx, NULL);
    CHECK(bt_frames > 0 && bt_frames < 8, "%d frames", bt_frames);
    CHECK(bt_ends_in_context_start(), "the last frame (%p) is not in exi_context_start (%p)", bt_last,
          (void *)(uintptr_t)exi_context_start);
    free(stack);
}

int main(void) {
#if defined(__x86_64__)
    const char *arch = "x86-64";
#else
    const char *arch = "aarch64";
#endif
    test_arguments();
    test_registers();
    test_fp_control();
    test_alignment();
    test_ring();
    test_recursion();
    test_backtrace();
    printf("qemu_context (%s): %d passed, %d failed\n", arch, passed, failed);
    return failed ? 1 : 0;
}
