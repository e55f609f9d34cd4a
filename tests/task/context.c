/* SPDX-License-Identifier: MIT */
/* The foundation of stackful tasks: the context switch (exi_context.h),
 * fibers with the sanitizer annotations (exi_fiber.h) and the guarded,
 * pooled stack allocator (exi_stack.h).  The aarch64 switch runs the
 * register checks of tests/context under qemu (make test-aarch64). */
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "task/exi_fiber.h"
#include "task/exi_stack.h"
#include "context/regs_probe.h"
#include "context/backtrace_probe.h"
#include "common/helpers.h"

TEST_SUITE(exec_context, 30);

/* The probe test switches raw contexts: tell valgrind about that stack. */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#define CTX_VALGRIND 1
#endif
#endif

#if defined(__SANITIZE_ADDRESS__)
#define CTX_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CTX_ASAN 1
#endif
#endif

enum { STACK = 256 * 1024 };

/* A fiber on a guarded stack. */
typedef struct fib {
    exi_fiber f;
    void *stack;
    size_t size;
} fib;

static exi_fiber main_f;

/* Checks made on a fiber's stack count here (Criterion's asserts are not
 * for other stacks or threads); tests check it is 0 at the end. */
static int fiber_bad;
#define FIBER_CHECK(cond) ((cond) ? (void)0 : (void)__atomic_fetch_add(&fiber_bad, 1, __ATOMIC_RELAXED))

static void fib_new(fib *x, size_t size, void (*entry)(void *, void *), void *user) {
    x->size = size;
    x->stack = ex_allocate(exi_guarded_stack_allocator(), size, 16);
    cr_assert_not_null(x->stack);
    exi_fiber_init(&x->f, x->stack, size, entry, user);
}

static void fib_free(fib *x) {
    exi_fiber_destroy(&x->f);
    ex_deallocate(exi_guarded_stack_allocator(), x->stack, x->size, 16);
}

/* The end of a fiber test: frees x and checks that nothing leaked. */
static void fib_finish(fib *x) {
    fib_free(x);
    expect_no_leaks();
}

static ex_alloc_stats stack_stats(void) {
    ex_alloc_stats s;
    cr_assert_eq(ex_allocator_stats(exi_guarded_stack_allocator(), &s).code, 0);
    return s;
}

/* ------------------------------------------------------------ switching */

static fib echo;

static void echo_entry(void *arg, void *user) {
    FIBER_CHECK(user == &echo);
    uintptr_t v = (uintptr_t)arg;
    while (v) v = (uintptr_t)exi_fiber_switch(&echo.f, &main_f, (void *)(v * 2 + 1));
    exi_fiber_switch_final(&echo.f, &main_f, (void *)42);
}

Test(exec_context, round_trips_pass_arguments) {
    exi_fiber_init_thread(&main_f);
    fib_new(&echo, STACK, echo_entry, &echo);
    int bad = 0;
    for (uintptr_t i = 1; i <= 10000; i++)
        if ((uintptr_t)exi_fiber_switch(&main_f, &echo.f, (void *)i) != i * 2 + 1) bad++;
    cr_expect_eq(bad, 0, "%d round trips returned the wrong argument", bad);
    cr_expect_eq((uintptr_t)exi_fiber_switch(&main_f, &echo.f, NULL), 42, "the final switch's argument");
    cr_expect_eq(fiber_bad, 0);
    fib_finish(&echo);
}

/* Exact register values, through the assembly probe of tests/context. */
static exi_context main_ctx, probe_ctx;
static int probe_bad;

static void probe_entry(void *arg, void *user) {
    (void)arg, (void)user;
    for (int i = 0; i < 50; i++) clobber_switch(&probe_ctx, &main_ctx, NULL);
    for (;;) {
        uint64_t out[PROBE_REGS];
        probe_switch(&probe_ctx, &main_ctx, NULL, out);
        for (int r = 0; r < PROBE_REGS; r++) probe_bad += out[r] != probe_value(r);
    }
}

Test(exec_context, callee_saved_registers_exactly_preserved) {
    void *stack = ex_allocate(exi_guarded_stack_allocator(), STACK, 16);
    cr_assert_not_null(stack);
#ifdef CTX_VALGRIND
    unsigned vg = VALGRIND_STACK_REGISTER(stack, (char *)stack + STACK);
#endif
    exi_context_init(&probe_ctx, stack, STACK, probe_entry, NULL);
    for (int i = 0; i < 50; i++) {
        uint64_t out[PROBE_REGS] = { 0 };
        probe_switch(&main_ctx, &probe_ctx, NULL, out);
        for (int r = 0; r < PROBE_REGS; r++)
            cr_expect_eq(out[r], probe_value(r), "register %d: %#llx", r, (unsigned long long)out[r]);
    }
    for (int i = 0; i < 50; i++) clobber_switch(&main_ctx, &probe_ctx, NULL);
    cr_expect_eq(probe_bad, 0, "%d registers of the fresh context changed", probe_bad);
#ifdef CTX_VALGRIND
    VALGRIND_STACK_DEREGISTER(vg);
#endif
    ex_deallocate(exi_guarded_stack_allocator(), stack, STACK, 16);
    expect_no_leaks();
}

/* Values the compiler keeps in callee-saved registers and stack slots
 * across the switch, while the other side writes garbage into them. */
static fib clob;

static void clobber_entry(void *arg, void *user) {
    (void)arg, (void)user;
    for (;;) {
#if defined(__x86_64__)
        __asm__ volatile("movq $-1, %%rbx\n movq $-1, %%r12\n movq $-1, %%r13\n movq $-1, %%r14\n movq $-1, %%r15\n"
                         "pcmpeqd %%xmm0, %%xmm0\n pcmpeqd %%xmm1, %%xmm1"
                         ::: "rbx", "r12", "r13", "r14", "r15", "xmm0", "xmm1");
#elif defined(__aarch64__)
        __asm__ volatile("mov x19, #-1\n mov x20, #-1\n mov x21, #-1\n mov x22, #-1\n mov x23, #-1\n"
                         "mov x24, #-1\n mov x25, #-1\n mov x26, #-1\n mov x27, #-1\n mov x28, #-1\n"
                         "fmov d8, x19\n fmov d9, x19\n fmov d10, x19\n fmov d11, x19\n"
                         "fmov d12, x19\n fmov d13, x19\n fmov d14, x19\n fmov d15, x19"
                         ::: "x19", "x20", "x21", "x22", "x23", "x24", "x25", "x26", "x27", "x28",
                             "d8", "d9", "d10", "d11", "d12", "d13", "d14", "d15");
#endif
        exi_fiber_switch(&clob.f, &main_f, NULL);
    }
}

Test(exec_context, live_variables_survive_switches) {
    exi_fiber_init_thread(&main_f);
    fib_new(&clob, STACK, clobber_entry, NULL);
    volatile uint64_t seed = 0x9e3779b97f4a7c15ull;
    uint64_t s = seed;
    uint64_t a = s * 3, b = s ^ 0x1234, c = s + 77, d = s * s, e = ~s, f = s >> 3, g = s << 5, h = s * 11,
             i = s + 1, j = s - 9, k = s * 13, l = s ^ (s >> 7);
    double x = (double)(s & 0xffff) / 3.0, y = x * 1.5, z = x - 0.25, w = y * z;
    for (int round = 0; round < 100; round++) {
        exi_fiber_switch(&main_f, &clob.f, NULL);
        a += 1, b += 2, c += 3, d += 4, e += 5, f += 6, g += 7, h += 8, i += 9, j += 10, k += 11, l += 12;
        x += 1.0, y += 2.0, z += 3.0, w += 4.0;
    }
    s = seed;
    cr_expect_eq(a, s * 3 + 100);
    cr_expect_eq(b, (s ^ 0x1234) + 200);
    cr_expect_eq(c, s + 77 + 300);
    cr_expect_eq(d, s * s + 400);
    cr_expect_eq(e, ~s + 500);
    cr_expect_eq(f, (s >> 3) + 600);
    cr_expect_eq(g, (s << 5) + 700);
    cr_expect_eq(h, s * 11 + 800);
    cr_expect_eq(i, s + 1 + 900);
    cr_expect_eq(j, s - 9 + 1000);
    cr_expect_eq(k, s * 13 + 1100);
    cr_expect_eq(l, (s ^ (s >> 7)) + 1200);
    double x0 = (double)(s & 0xffff) / 3.0, y0 = x0 * 1.5, z0 = x0 - 0.25, w0 = y0 * z0;
    cr_expect(x == x0 + 100.0 && y == y0 + 200.0 && z == z0 + 300.0 && w == w0 + 400.0, "doubles changed");
    fib_finish(&clob);  /* never finished: allowed, see exi_fiber.h */
}

/* The floating-point control state is per fiber; a new fiber inherits its
 * creator's. */
static fib fpf;
static fpstate fp_inherited;

static void fp_entry(void *arg, void *user) {
    (void)arg, (void)user;
    FIBER_CHECK(fp_eq(fp_get(), fp_inherited));  /* a new fiber starts with its creator's FP control */
    fpstate mine = fp_variant(fp_get(), 2);
    fp_set(mine);
    for (;;) {
        exi_fiber_switch(&fpf.f, &main_f, NULL);
        FIBER_CHECK(fp_eq(fp_get(), mine));
    }
}

Test(exec_context, fp_control_is_per_fiber) {
    exi_fiber_init_thread(&main_f);
    fpstate orig = fp_get();
    fp_inherited = fp_variant(orig, 3);  /* round toward zero (MXCSR) / toward +inf (FPCR) */
    fp_set(fp_inherited);
    fib_new(&fpf, STACK, fp_entry, NULL);
    fpstate mine = fp_variant(orig, 1);  /* round down */
    fp_set(mine);
    for (int i = 0; i < 10; i++) {
        exi_fiber_switch(&main_f, &fpf.f, NULL);
        cr_expect(fp_eq(fp_get(), mine), "the main fiber kept its FP control");
    }
    fp_set(orig);
    cr_expect_eq(fiber_bad, 0, "the fiber's FP control was not its own");
    fib_finish(&fpf);
}

/* ---------------------------------------------------------------- stacks */

static fib deepf;

__attribute__((noinline)) static uint64_t deep(unsigned n) {
    volatile uint64_t pad[60];
    for (unsigned i = 0; i < 60; i++) pad[i] = n + i;
    if (n == 0) return pad[0];
    return deep(n - 1) + pad[59] - 59;
}

static void deep_entry(void *arg, void *user) {
    (void)user;
    uint64_t r = deep((unsigned)(uintptr_t)arg);
    exi_fiber_switch_final(&deepf.f, &main_f, (void *)(uintptr_t)r);
}

Test(exec_context, deep_recursion_within_the_stack) {
    exi_fiber_init_thread(&main_f);
    fib_new(&deepf, STACK, deep_entry, NULL);
#ifdef CTX_ASAN
    unsigned depth = STACK / 2048;  /* ASan frames carry redzones */
#else
    unsigned depth = STACK / 640;   /* about 500-byte frames: most of the stack */
#endif
    uintptr_t r = (uintptr_t)exi_fiber_switch(&main_f, &deepf.f, (void *)(uintptr_t)depth);
    cr_expect_eq(r, (uint64_t)depth * (depth + 1) / 2);
    fib_finish(&deepf);
}

static fib alignf;
static int misaligned;

typedef float v4sf __attribute__((vector_size(16)));

__attribute__((noinline)) static void note_alignment(void) {
    _Alignas(16) volatile char buf[16];
    volatile v4sf v = { 1, 2, 3, 4 };  /* an aligned vector store */
    v += v;
    buf[0] = (char)v[1];
    if ((uintptr_t)buf % 16 || (uintptr_t)__builtin_frame_address(0) % 16) misaligned++;
}

static void align_entry(void *arg, void *user) {
    (void)arg, (void)user;
    note_alignment();
    for (;;) {
        exi_fiber_switch(&alignf.f, &main_f, NULL);
        note_alignment();
    }
}

Test(exec_context, stack_aligned_at_entry) {
    exi_fiber_init_thread(&main_f);
    alignf.size = STACK;
    alignf.stack = ex_allocate(exi_guarded_stack_allocator(), STACK, 16);
    cr_assert_not_null(alignf.stack);
    for (size_t skew = 0; skew < 32; skew++) {
        misaligned = 0;
        exi_fiber_init(&alignf.f, (char *)alignf.stack + skew, STACK - 2 * skew - 1, align_entry, NULL);
        for (int i = 0; i < 3; i++) exi_fiber_switch(&main_f, &alignf.f, NULL);
        cr_expect_eq(misaligned, 0, "misaligned with bounds skewed by %zu", skew);
        exi_fiber_destroy(&alignf.f);
    }
    ex_deallocate(exi_guarded_stack_allocator(), alignf.stack, STACK, 16);
    expect_no_leaks();
}

/* The unwinder stops at the fiber's first frame. */
static fib btf;

static void bt_entry(void *arg, void *user) {
    (void)arg, (void)user;
    take_backtrace();
    exi_fiber_switch_final(&btf.f, &main_f, NULL);
}

Test(exec_context, backtrace_ends_at_the_fiber_start) {
    exi_fiber_init_thread(&main_f);
    fib_new(&btf, STACK, bt_entry, NULL);
    exi_fiber_switch(&main_f, &btf.f, NULL);
    cr_expect(bt_frames > 0 && bt_frames < 10, "%d frames", bt_frames);
    cr_expect(bt_ends_in_context_start(), "the last frame (%p) is not in exi_context_start (%p)", bt_last,
              (void *)(uintptr_t)exi_context_start);
    fib_finish(&btf);
}

/* Overflow: the recursion reaches the guard page, which kills the process
 * (ASan reports the stack overflow and exits with status 1). */
static fib overf;

__attribute__((noinline)) static uint64_t unbounded(uint64_t n) {
    volatile uint64_t pad[32];
    for (unsigned i = 0; i < 32; i++) pad[i] = n + i;
    if (n == UINT64_MAX) return 0;  /* never: the guard page comes first */
    return unbounded(n + 1) + pad[n % 32];
}

static void overflow_entry(void *arg, void *user) {
    (void)arg, (void)user;
    unbounded(0);
    exi_fiber_switch_final(&overf.f, &main_f, NULL);
}

#ifdef CTX_ASAN
#define OVERFLOW_DEATH .exit_code = 1
#else
#define OVERFLOW_DEATH .signal = SIGSEGV
#endif

Test(exec_context, stack_overflow_hits_the_guard_page, OVERFLOW_DEATH) {
    exi_fiber_init_thread(&main_f);
    fib_new(&overf, 64 * 1024, overflow_entry, NULL);
    exi_fiber_switch(&main_f, &overf.f, NULL);
}

/* -------------------------------------------------------------- migrate */

/* A fiber started on the main thread, resumed on another thread, finished
 * on the main thread again: it sees its own stack data each time. */
static fib mig;
static const void *mig_threads[3];

__attribute__((noinline)) static const void *where(void) { return test_thread_id(); }

static void mig_entry(void *arg, void *user) {
    (void)user;
    exi_fiber *back = arg;
    uint64_t data[64];
    for (unsigned i = 0; i < 64; i++) data[i] = i * 0x9e3779b97f4a7c15ull;
    for (int step = 0; step < 3; step++) {
        mig_threads[step] = where();
        for (unsigned i = 0; i < 64; i++) FIBER_CHECK(data[i] == i * 0x9e3779b97f4a7c15ull);
        if (step == 2) break;
        back = exi_fiber_switch(&mig.f, back, NULL);
    }
    exi_fiber_switch_final(&mig.f, back, NULL);
}

static void *mig_thread(void *arg) {
    (void)arg;
    exi_fiber self;
    exi_fiber_init_thread(&self);
    exi_fiber_switch(&self, &mig.f, &self);
    return NULL;
}

Test(exec_context, fiber_migrates_between_threads) {
    exi_fiber_init_thread(&main_f);
    fib_new(&mig, STACK, mig_entry, NULL);
    exi_fiber_switch(&main_f, &mig.f, &main_f);  /* step 0 here */
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, mig_thread, NULL), 0);  /* step 1 there */
    pthread_join(t, NULL);
    exi_fiber_switch(&main_f, &mig.f, &main_f);  /* step 2 here */
    cr_expect_eq(mig_threads[0], test_thread_id());
    cr_expect_neq(mig_threads[1], test_thread_id());
    cr_expect_eq(mig_threads[2], test_thread_id());
    cr_expect_eq(fiber_bad, 0, "the fiber's stack data changed");
    fib_finish(&mig);
}

/* Fibers switching to each other directly, in a ring. */
enum { RING = 6, LAPS = 200 };
static fib ring[RING];
static unsigned ring_runs[RING], ring_bad;

static void ring_entry(void *arg, void *user) {
    unsigned me = (unsigned)(uintptr_t)user;
    uintptr_t token = (uintptr_t)arg;
    for (;;) {
        if (token % RING != me) ring_bad++;
        ring_runs[me]++;
        bool last = token + 1 == (uintptr_t)RING * LAPS;
        if (last) exi_fiber_switch_final(&ring[me].f, &main_f, (void *)(token + 1));
        token = (uintptr_t)exi_fiber_switch(&ring[me].f, &ring[(me + 1) % RING].f, (void *)(token + 1));
    }
}

Test(exec_context, fibers_switch_directly_in_a_ring) {
    exi_fiber_init_thread(&main_f);
    for (unsigned i = 0; i < RING; i++) fib_new(&ring[i], STACK, ring_entry, (void *)(uintptr_t)i);
    uintptr_t end = (uintptr_t)exi_fiber_switch(&main_f, &ring[0].f, (void *)0);
    cr_expect_eq(end, RING * LAPS);
    cr_expect_eq(ring_bad, 0);
    for (unsigned i = 0; i < RING; i++) {
        cr_expect_eq(ring_runs[i], LAPS);
        fib_free(&ring[i]);
    }
    expect_no_leaks();
}

/* ------------------------------------------------------ stack allocator */

/* Whether the page below p is mapped PROT_NONE (from /proc/self/maps). */
static bool guard_below(void *p) {
    uintptr_t g = (uintptr_t)p - exi_page_size();
    FILE *m = fopen("/proc/self/maps", "r");
    cr_assert_not_null(m);
    char line[512];
    bool found = false;
    while (!found && fgets(line, sizeof line, m)) {
        unsigned long lo, hi;
        char perms[8];
        if (sscanf(line, "%lx-%lx %7s", &lo, &hi, perms) == 3 && lo <= g && g < hi)
            found = strncmp(perms, "---", 3) == 0;
    }
    fclose(m);
    return found;
}

Test(exec_context, guarded_stacks_are_page_aligned_with_a_guard) {
    const ex_allocator *a = exi_guarded_stack_allocator();
    size_t page = exi_page_size();
    cr_expect(page >= 4096 && (page & (page - 1)) == 0);
    ex_alloc_stats s0 = stack_stats();
    size_t sizes[] = { 0, 1, page, page + 1, 5 * page + 7, STACK };  /* 0 and 1: one page */
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        char *p = ex_allocate(a, sizes[k], 16);
        cr_assert_not_null(p);
        cr_expect_eq((uintptr_t)p % page, 0);
        cr_expect(guard_below(p), "no PROT_NONE page below the stack of %zu bytes", sizes[k]);
        memset(p, 0xa5, sizes[k]);  /* the whole size is usable */
        ex_deallocate(a, p, sizes[k], 16);
    }
    ex_alloc_stats s1 = stack_stats();
    cr_expect_eq(s1.allocations - s0.allocations, 6);
    cr_expect_eq(s1.frees - s0.frees, 6);
    cr_expect_eq(s1.bytes_in_use, s0.bytes_in_use);
    expect_no_leaks();
}

Test(exec_context, pooled_stack_comes_back) {
    const ex_allocator *a = exi_guarded_stack_allocator();
    size_t size = 3 * exi_page_size();
    void *p = ex_allocate(a, size, 16), *q = ex_allocate(a, size, 16);
    cr_assert(p && q && p != q);
    uint64_t mapped = exi_stack_mapped_bytes();
    ex_deallocate(a, p, size, 16);
    ex_deallocate(a, q, size, 16);
    cr_expect_eq(ex_allocate(a, size, 16), q, "last freed, first reused");
    cr_expect_eq(ex_allocate(a, size, 16), p);
    cr_expect_eq(exi_stack_mapped_bytes(), mapped, "reuse maps nothing");
    /* A different size below the top of the cache is still found. */
    void *r = ex_allocate(a, 2 * size, 16);
    cr_assert_not_null(r);
    ex_deallocate(a, p, size, 16);
    ex_deallocate(a, r, 2 * size, 16);
    cr_expect_eq(ex_allocate(a, size, 16), p);
    ex_deallocate(a, p, size, 16);
    ex_deallocate(a, q, size, 16);
    exi_stack_trim();
    expect_no_leaks();
}

Test(exec_context, stack_stats_count) {
    const ex_allocator *a = exi_guarded_stack_allocator();
    size_t size = 4 * exi_page_size();
    ex_alloc_stats s0 = stack_stats();
    void *p[4];
    for (int i = 0; i < 4; i++) p[i] = ex_allocate(a, size, 16);
    ex_alloc_stats s1 = stack_stats();
    cr_expect_eq(s1.allocations - s0.allocations, 4);
    cr_expect_eq(s1.bytes_in_use - s0.bytes_in_use, 4 * size);
    cr_expect_geq(s1.peak_bytes, s1.bytes_in_use);
    for (int i = 0; i < 4; i++) ex_deallocate(a, p[i], size, 16);
    ex_alloc_stats s2 = stack_stats();
    cr_expect_eq(s2.frees - s0.frees, 4);
    cr_expect_eq(s2.bytes_in_use, s0.bytes_in_use);
    cr_expect_eq(s2.failures, s0.failures);
    expect_no_leaks();
}

Test(exec_context, unmappable_sizes_fail) {
    const ex_allocator *a = exi_guarded_stack_allocator();
    ex_alloc_stats s0 = stack_stats();
    cr_expect_null(ex_allocate(a, (size_t)1 << 62, 16), "mmap of 4 EiB");
    cr_expect_null(ex_allocate(a, SIZE_MAX - 10, 16), "a size that wraps when rounded");
    cr_expect_null(ex_allocate(a, 4096, 2 * exi_page_size()), "alignment above a page");
    ex_alloc_stats s1 = stack_stats();
    cr_expect_eq(s1.failures - s0.failures, 3);
    cr_expect_eq(s1.allocations, s0.allocations);
    expect_no_leaks();
}

/* Frees on another thread, whose exit hands its cache to the depot: the
 * same stacks come back here, with nothing new mapped. */
enum { XN = 20 };
static void *xstacks[XN];
static size_t xsize;

static void *free_there(void *arg) {
    (void)arg;
    for (int i = 0; i < XN; i++) ex_deallocate(exi_guarded_stack_allocator(), xstacks[i], xsize, 16);
    return NULL;
}

static int cmp_ptr(const void *x, const void *y) {
    uintptr_t p = (uintptr_t) * (void *const *)x, q = (uintptr_t) * (void *const *)y;
    return p < q ? -1 : p > q;
}

Test(exec_context, stacks_freed_on_another_thread_are_reused) {
    const ex_allocator *a = exi_guarded_stack_allocator();
    xsize = 6 * exi_page_size();
    for (int i = 0; i < XN; i++) cr_assert_not_null(xstacks[i] = ex_allocate(a, xsize, 16));
    uint64_t mapped = exi_stack_mapped_bytes();
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, free_there, NULL), 0);
    pthread_join(t, NULL);
    cr_expect_eq(exi_stack_mapped_bytes(), mapped, "all %d stacks kept (cache, then depot)", XN);
    void *again[XN];
    for (int i = 0; i < XN; i++) cr_assert_not_null(again[i] = ex_allocate(a, xsize, 16));
    cr_expect_eq(exi_stack_mapped_bytes(), mapped, "reused without mapping");
    qsort(xstacks, XN, sizeof xstacks[0], cmp_ptr);
    qsort(again, XN, sizeof again[0], cmp_ptr);
    cr_expect_arr_eq(xstacks, again, sizeof again);
    for (int i = 0; i < XN; i++) ex_deallocate(a, again[i], xsize, 16);
    exi_stack_trim();
    expect_no_leaks();
}

Test(exec_context, pool_is_bounded) {
    const ex_allocator *a = exi_guarded_stack_allocator();
    size_t size = 2 * exi_page_size();
    exi_stack_trim();
    uint64_t base = exi_stack_mapped_bytes();
    enum { MANY = 200 };
    void *p[MANY];
    for (int i = 0; i < MANY; i++) cr_assert_not_null(p[i] = ex_allocate(a, size, 16));
    cr_expect_eq(exi_stack_mapped_bytes() - base, MANY * size);
    for (int i = 0; i < MANY; i++) ex_deallocate(a, p[i], size, 16);
    cr_expect_eq(exi_stack_mapped_bytes() - base, (EXI_STACK_CACHE + EXI_STACK_DEPOT) * size,
                 "this thread's cache and the depot are full, the rest went back to the OS");
    exi_stack_trim();
    cr_expect_eq(exi_stack_mapped_bytes(), base);
    expect_no_leaks();
}

#ifdef CTX_ASAN
/* A pooled stack is poisoned: using it after the free is reported. */
Test(exec_context, use_of_a_freed_stack_is_reported, .exit_code = 1) {
    const ex_allocator *a = exi_guarded_stack_allocator();
    volatile char *p = ex_allocate(a, STACK, 16);
    p[100] = 1;
    ex_deallocate(a, (void *)p, STACK, 16);
    p[100] = 2;
}
#endif
