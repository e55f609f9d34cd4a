/* Frame allocators (cexec/allocator.h, cexec/allocators.h): the libc
 * allocator, budget, monotonic, fault-injecting and recycling allocators,
 * how an operation finds its allocator (environment key, else the
 * environment scheduler's default, else the process default), zero
 * allocations in the steady state of a statically built pipeline, and
 * out-of-memory sweeps driven by ex_fault_allocator. */
#include <dlfcn.h>
#include <execinfo.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include <signal.h>
#include <sys/wait.h>

#include <cexec/allocators.h>

#include "allocators/exi_builtin.h"
#include "common/helpers.h"

TEST_SUITE(frame_allocators, 30);

/* ------------------------------------------------------------ utilities */

/* Bounded wait (not a timing assertion: the bound only turns a hang into a
 * failure with a message). */
#define WAIT_LIMIT_S 20.0

static ex_alloc_stats stats_of(const ex_allocator *a) {
    ex_alloc_stats s;
    memset(&s, 0, sizeof s);
    ex_error e = ex_allocator_stats(a, &s);
    cr_assert_eq(e.code, 0, "ex_allocator_stats(%s): %s", a->name, e.msg ? e.msg : "");
    return s;
}

static bool aligned_to(const void *p, size_t align) { return ((uintptr_t)p & (align - 1)) == 0; }

/* A small deterministic generator for sizes (per thread). */
static uint32_t lcg(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Threads started by a test; errors are recorded and asserted on the test
 * thread after joining. */
typedef struct thread_errors {
    atomic_int count;
    char first[256];
    pthread_mutex_t mu;
} thread_errors;

static void terr_init(thread_errors *t) {
    atomic_init(&t->count, 0);
    t->first[0] = 0;
    pthread_mutex_init(&t->mu, NULL);
}

static void terr_record(thread_errors *t, const char *what, long a, long b) {
    if (atomic_fetch_add(&t->count, 1) == 0) {
        pthread_mutex_lock(&t->mu);
        snprintf(t->first, sizeof t->first, "%s (%ld, %ld)", what, a, b);
        pthread_mutex_unlock(&t->mu);
    }
}

static void terr_check(thread_errors *t, const char *test) {
    int n = atomic_load(&t->count);
    pthread_mutex_lock(&t->mu);
    cr_expect_eq(n, 0, "%s: %d error(s) in worker threads, first: %s", test, n, t->first);
    pthread_mutex_unlock(&t->mu);
    pthread_mutex_destroy(&t->mu);
}

static void start_threads(pthread_t *th, int n, void *(*fn)(void *), void *args, size_t arg_size) {
    for (int i = 0; i < n; i++)
        cr_assert_eq(pthread_create(&th[i], NULL, fn, (char *)args + (size_t)i * arg_size), 0, "pthread_create %d", i);
}

static void join_threads(pthread_t *th, int n) {
    for (int i = 0; i < n; i++) cr_assert_eq(pthread_join(th[i], NULL), 0);
}

/* ------------------------------------------- a second counting allocator */

/* Counts allocations, optionally forwards to another allocator (else
 * posix_memalign), and, while armed, records the call stacks of the first
 * few allocations so an unexpected allocation can be located. */
#define TRK_TRACES 4
#define TRK_DEPTH 24

typedef struct trk_alloc {
    ex_allocator a;
    const ex_allocator *under;
    atomic_long allocs, frees, in_use;
    atomic_int armed;
    atomic_int traced;
    void *bt[TRK_TRACES][TRK_DEPTH];
    int depth[TRK_TRACES];
    size_t size[TRK_TRACES];
} trk_alloc;

static void *trk_allocate(void *ctx, size_t size, size_t align) {
    trk_alloc *t = ctx;
    void *p = NULL;
    if (t->under) p = t->under->allocate(t->under->ctx, size, align);
    else if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1)) p = NULL;
    if (!p) return NULL;
    atomic_fetch_add(&t->allocs, 1);
    atomic_fetch_add(&t->in_use, 1);
    if (atomic_load(&t->armed)) {
        int i = atomic_fetch_add(&t->traced, 1);
        if (i < TRK_TRACES) {
            t->size[i] = size;
            t->depth[i] = backtrace(t->bt[i], TRK_DEPTH);
        }
    }
    return p;
}

static void trk_deallocate(void *ctx, void *p, size_t size, size_t align) {
    trk_alloc *t = ctx;
    if (t->under) t->under->deallocate(t->under->ctx, p, size, align);
    else free(p);
    atomic_fetch_add(&t->frees, 1);
    atomic_fetch_sub(&t->in_use, 1);
}

static void trk_init(trk_alloc *t, const ex_allocator *under, const char *name) {
    memset(t, 0, sizeof *t);
    t->a.allocate = trk_allocate;
    t->a.deallocate = trk_deallocate;
    t->a.ctx = t;
    t->a.name = name;
    t->a.stats = NULL;
    t->under = under;
    atomic_init(&t->allocs, 0);
    atomic_init(&t->frees, 0);
    atomic_init(&t->in_use, 0);
    atomic_init(&t->armed, 0);
    atomic_init(&t->traced, 0);
}

/* Prints the recorded call stacks, resolved to function and line with
 * addr2line when it is installed (the test binary is not linked with
 * -rdynamic, so backtrace_symbols alone gives only offsets). */
static void trk_dump(trk_alloc *t, const char *label) {
    int n = atomic_load(&t->traced);
    if (n > TRK_TRACES) n = TRK_TRACES;
    Dl_info self;
    bool have_self = dladdr((void *)(uintptr_t)trk_dump, &self) != 0;
    for (int i = 0; i < n; i++) {
        fprintf(stderr, "[frame_allocators] %s: unexpected allocation #%d of %zu bytes from:\n", label, i + 1, t->size[i]);
        backtrace_symbols_fd(t->bt[i], t->depth[i], 2);
        if (!have_self) continue;
        char cmd[64 + TRK_DEPTH * 24];
        int len = snprintf(cmd, sizeof cmd, "addr2line -f -i -C -s -p -e /proc/%ld/exe", (long)getpid());
        int frames = 0;
        for (int j = 0; j < t->depth[i] && len < (int)sizeof cmd - 24; j++) {
            Dl_info di;
            if (!dladdr(t->bt[i][j], &di) || di.dli_fbase != self.dli_fbase) continue;
            /* return addresses: step back into the call instruction */
            len += snprintf(cmd + len, sizeof cmd - (size_t)len, " %#lx",
                            (unsigned long)((uintptr_t)t->bt[i][j] - (uintptr_t)di.dli_fbase - 1));
            frames++;
        }
        if (!frames) continue;
        fflush(stderr);
        FILE *pipe = popen(cmd, "r");
        if (!pipe) continue;
        char line[512];
        while (fgets(line, sizeof line, pipe)) fprintf(stderr, "    at %s", line);
        pclose(pipe);
    }
}

/* ------------------------------------------------- common sender pieces */

static ex_error plus1(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + 1);
    return ex_ok();
}

static ex_sender *let_plus1(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    return ex_just(ex_int(in[0].as.i + 1));
}

/* An inner sender with a larger operation: just -> then -> then. */
static ex_sender *let_plus3(void *ctx, const ex_value *in, size_t n) {
    (void)ctx, (void)n;
    ex_sender *s = ex_then(ex_just(ex_int(in[0].as.i + 1)), plus1, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    return ex_then(s, plus1, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
}

/* frame_alloc NULL: a pool without one (the process default applies). */
static ex_pool *make_pool(unsigned threads, const ex_allocator *frame_alloc) {
    ex_pool_config cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.threads = threads;
    cfg.name_prefix = "fa";
    cfg.allocator = frame_alloc;
    cfg.frames = EX_POOL_FRAMES_PROCESS;
    ex_pool *p = NULL;
    ex_error e = ex_pool_create(&cfg, &p);
    cr_assert_eq(e.code, 0, "ex_pool_create: %s", e.msg ? e.msg : "");
    return p;
}

static void destroy_pool(ex_pool *p) { cr_assert_eq(ex_pool_destroy(p).code, 0); }

/* ================================================================= libc */

Test(frame_allocators, libc_counters_move) {
    const ex_allocator *a = ex_libc_allocator();
    cr_assert_not_null(a);
    cr_assert_not_null(a->stats, "the libc allocator keeps statistics");
    ex_alloc_stats s0 = stats_of(a);
    size_t sizes[3] = { 100, 200, 300 };
    void *p[3];
    for (int i = 0; i < 3; i++) {
        p[i] = ex_allocate(a, sizes[i], 8);
        cr_assert_not_null(p[i]);
        memset(p[i], 0xA5, sizes[i]);
    }
    ex_alloc_stats s1 = stats_of(a);
    /* Process-wide counters: compare deltas. */
    cr_expect_eq(s1.allocations - s0.allocations, 3u, "allocations moved by %llu",
                 (unsigned long long)(s1.allocations - s0.allocations));
    cr_expect_eq(s1.frees - s0.frees, 0u);
    cr_expect_eq(s1.bytes_in_use - s0.bytes_in_use, 600u, "bytes in use are the bytes requested (moved by %llu)",
                 (unsigned long long)(s1.bytes_in_use - s0.bytes_in_use));
    cr_expect_geq(s1.peak_bytes, s0.bytes_in_use + 600u, "peak covers the three live blocks");
    cr_expect_geq(s1.peak_bytes, s0.peak_bytes, "peak never decreases");
    for (int i = 0; i < 3; i++) ex_deallocate(a, p[i], sizes[i], 8);
    ex_alloc_stats s2 = stats_of(a);
    cr_expect_eq(s2.frees - s0.frees, 3u);
    cr_expect_eq(s2.bytes_in_use, s0.bytes_in_use, "freeing gives the bytes back");
    cr_expect_eq(s2.peak_bytes, s1.peak_bytes, "freeing does not lower the peak");
    cr_expect_eq(s2.failures, s0.failures);
    expect_no_leaks();
}

Test(frame_allocators, libc_honours_alignment) {
    const ex_allocator *a = ex_libc_allocator();
    static const size_t aligns[] = { 1, 8, 16, 64, 4096 };
    static const size_t sizes[] = { 1, 24, 100, 4096, 10000 };
    ex_alloc_stats s0 = stats_of(a);
    unsigned long n = 0;
    for (size_t i = 0; i < sizeof aligns / sizeof *aligns; i++)
        for (size_t j = 0; j < sizeof sizes / sizeof *sizes; j++) {
            void *p = a->allocate(a->ctx, sizes[j], aligns[i]);
            cr_assert_not_null(p, "size %zu align %zu", sizes[j], aligns[i]);
            cr_assert(aligned_to(p, aligns[i]), "size %zu: %p is not aligned to %zu", sizes[j], p, aligns[i]);
            memset(p, 0x5A, sizes[j]); /* the whole block is usable */
            a->deallocate(a->ctx, p, sizes[j], aligns[i]);
            n++;
        }
    ex_alloc_stats s1 = stats_of(a);
    cr_expect_eq(s1.allocations - s0.allocations, n);
    cr_expect_eq(s1.frees - s0.frees, n);
    cr_expect_eq(s1.bytes_in_use, s0.bytes_in_use);
    expect_no_leaks();
}

Test(frame_allocators, stats_reject_null_and_allocators_without_counters) {
    ex_alloc_stats s;
    cr_expect_eq(ex_allocator_stats(NULL, &s).code, EX_EINVAL);
    cr_expect_eq(ex_allocator_stats(ex_libc_allocator(), NULL).code, EX_EINVAL);
    ex_error e = ex_allocator_stats(&test_allocator, &s); /* keeps none */
    cr_expect_eq(e.code, EX_EINVAL);
    cr_expect_not_null(e.msg);
    expect_no_leaks();
}

Test(frame_allocators, default_allocator_set_and_restore) {
    cr_assert_eq(ex_default_allocator(), &test_allocator, "the fixture installs the test allocator");
    ex_set_default_allocator(NULL);
    cr_expect_eq(ex_default_allocator(), ex_builtin_allocator(), "NULL restores the built-in default");
    ex_set_default_allocator(ex_libc_allocator());
    cr_expect_eq(ex_default_allocator(), ex_libc_allocator());
    ex_budget_allocator b;
    ex_budget_allocator_init(&b, &test_allocator, 1 << 20);
    ex_set_default_allocator(ex_budget_allocator_get(&b));
    cr_expect_eq(ex_default_allocator(), ex_budget_allocator_get(&b));
    ex_sender *s = ex_just(ex_int(3));
    cr_expect_eq(s->alloc, ex_budget_allocator_get(&b), "a sender comes from the default allocator of its time");
    ex_set_default_allocator(&test_allocator);
    ex_sender_release(s); /* frees through the allocator that made it */
    ex_alloc_stats bs = stats_of(ex_budget_allocator_get(&b));
    cr_expect_eq(bs.allocations, 1u);
    cr_expect_eq(bs.frees, 1u);
    cr_expect_eq(bs.bytes_in_use, 0u);
    expect_no_leaks();
}

/* The built-in default recycles: a sender's block comes back for the next
 * sender of its size class on this thread, the counters balance, and a
 * thread that built and released senders leaves nothing in use. */
static void *build_and_release(void *arg) {
    (void)arg;
    for (int i = 0; i < 100; i++) ex_sender_release(ex_just(ex_int(i)));
    return NULL;
}

Test(frame_allocators, the_builtin_default_recycles_sender_blocks) {
    const ex_allocator *b = ex_builtin_allocator();
    cr_assert_not_null(b);
    cr_expect_eq(ex_builtin_allocator(), b, "made once");
    cr_expect_str_eq(b->name, "recycling");
    ex_set_default_allocator(NULL);
    ex_alloc_stats s0 = stats_of(b);
    ex_sender *s = ex_just(ex_int(1));
    cr_assert_eq(s->alloc, b);
    void *first = s;
    ex_sender_release(s);
    ex_sender *again = ex_just(ex_int(2));
    cr_expect_eq((void *)again, first, "the freed block is handed out again");
    ex_result r = ex_sync_wait(again);
    cr_expect_eq(r.values[0].as.i, 2);
    ex_alloc_stats l0 = stats_of(ex_libc_allocator());
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, build_and_release, NULL), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
    ex_alloc_stats l1 = stats_of(ex_libc_allocator());
    cr_expect_eq(l1.bytes_in_use, l0.bytes_in_use, "the exited thread's cache went back to malloc");
    cr_expect_gt(l1.allocations, l0.allocations, "the thread's cache came from malloc");
    ex_alloc_stats s1 = stats_of(b);
    cr_expect_eq(s1.allocations - s0.allocations, 102u);
    cr_expect_eq(s1.frees - s0.frees, 102u);
    cr_expect_eq(s1.bytes_in_use, s0.bytes_in_use, "nothing left in use");
    ex_set_default_allocator(&test_allocator);
    expect_no_leaks();
}

/* fork() while another thread holds the built-in default's locks (as a
 * thread inside a depot hand-over does): the child, which allocates
 * senders through the same allocator, must not find them held by a thread
 * it does not have.  The other thread here holds every lock for a while,
 * deterministically, through the fork handlers' own entry points; the
 * child then goes through the shared depot.  Without the handlers the
 * child hangs on the depot's lock. */

enum { FORK_SENDERS = 600 };

static void senders_through_the_depot(void) {
    static ex_sender *held[FORK_SENDERS];
    for (int i = 0; i < FORK_SENDERS; i++) held[i] = ex_just(ex_int(i));
    for (int i = 0; i < FORK_SENDERS; i++) ex_sender_release(held[i]);  /* spills to the depot */
    for (int i = 0; i < FORK_SENDERS; i++) held[i] = ex_just(ex_int(i));  /* refills from it */
    for (int i = 0; i < FORK_SENDERS; i++) ex_sender_release(held[i]);
}

/* Waits up to 5 s for a child; kills it and returns false if it is stuck. */
static bool child_exits_in_time(pid_t pid, int *status) {
    struct timespec nap = { 0, 1000000 };
    for (int waited = 0; waited < 5000; waited++) {
        if (waitpid(pid, status, WNOHANG) != 0) return true;
        nanosleep(&nap, NULL);
    }
    kill(pid, SIGKILL);
    waitpid(pid, status, 0);
    return false;
}

static atomic_int locks_held;

static void *hold_the_locks(void *arg) {
    (void)arg;
    exi_builtin_prefork();
    atomic_store(&locks_held, 1);
    struct timespec d = { 0, 200 * 1000000 };
    nanosleep(&d, NULL);  /* the main thread forks meanwhile */
    exi_builtin_postfork();
    return NULL;
}

Test(frame_allocators, fork_while_another_thread_holds_the_builtin_defaults_locks) {
    ex_set_default_allocator(NULL);
    ex_sender_release(ex_just(ex_int(0)));  /* the built-in default exists */
    atomic_store(&locks_held, 0);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, hold_the_locks, NULL), 0);
    while (!atomic_load(&locks_held)) sched_yield();
    pid_t pid = fork();  /* the handlers wait for the other thread to let go */
    cr_assert_geq(pid, 0, "fork failed");
    if (pid == 0) {
        senders_through_the_depot();
        _exit(0);
    }
    int status = 0;
    bool hung = !child_exits_in_time(pid, &status);
    pthread_join(t, NULL);
    cr_expect(!hung, "the child hung on a lock of the default allocator held by a thread it does not have");
    cr_expect(hung || (WIFEXITED(status) && WEXITSTATUS(status) == 0), "the child failed (status %d)", status);
    senders_through_the_depot();  /* the parent's allocator works too */
    ex_set_default_allocator(&test_allocator);
    expect_no_leaks();
}

/* The libc allocator lists each thread's counters, which live in that
 * thread's thread-local storage.  In a child of fork() the parent's other
 * threads are gone and glibc hands their stacks (with that storage) to the
 * threads the child creates: a listed record of a vanished thread must not
 * be listed a second time by the new thread that reuses it (a cycle in the
 * list would make the statistics loop for ever). */
static pthread_mutex_t park_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t park_cv = PTHREAD_COND_INITIALIZER;
static int park_state;  /* 1: the thread is listed and waits; 2: let it go */

static void *listed_and_parked(void *arg) {
    (void)arg;
    ex_deallocate(ex_libc_allocator(), ex_allocate(ex_libc_allocator(), 64, 16), 64, 16);
    pthread_mutex_lock(&park_mu);
    park_state = 1;
    pthread_cond_broadcast(&park_cv);
    while (park_state != 2) pthread_cond_wait(&park_cv, &park_mu);
    pthread_mutex_unlock(&park_mu);
    return NULL;
}

/* Lists this thread, then sums the list while the thread still lives. */
static void *allocate_through_libc(void *arg) {
    (void)arg;
    ex_deallocate(ex_libc_allocator(), ex_allocate(ex_libc_allocator(), 64, 16), 64, 16);
    ex_alloc_stats st;
    if (ex_allocator_stats(ex_libc_allocator(), &st).code) _exit(3);  /* loops for ever on a cycle */
    return NULL;
}

Test(frame_allocators, a_forked_child_lists_only_its_own_threads) {
    (void)ex_libc_allocator();  /* nothing to make: the handlers come with the first libc allocation */
    park_state = 0;
    pthread_t parked;
    cr_assert_eq(pthread_create(&parked, NULL, listed_and_parked, NULL), 0);
    pthread_mutex_lock(&park_mu);
    while (park_state != 1) pthread_cond_wait(&park_cv, &park_mu);
    pthread_mutex_unlock(&park_mu);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork failed");
    if (pid == 0) {
        for (int i = 0; i < 4; i++) {  /* new threads, on the vanished thread's stack */
            pthread_t t;
            if (pthread_create(&t, NULL, allocate_through_libc, NULL) || pthread_join(t, NULL)) _exit(2);
        }
        _exit(0);
    }
    int status = 0;
    bool hung = !child_exits_in_time(pid, &status);
    pthread_mutex_lock(&park_mu);
    park_state = 2;
    pthread_cond_broadcast(&park_cv);
    pthread_mutex_unlock(&park_mu);
    pthread_join(parked, NULL);
    cr_expect(!hung, "the child's statistics never returned: its thread list has a cycle");
    cr_expect(hung || (WIFEXITED(status) && WEXITSTATUS(status) == 0), "the child failed (status %d)", status);
    expect_no_leaks();
}

/* =============================================================== budget */

Test(frame_allocators, budget_limit_enforced_and_freeing_makes_room) {
    ex_budget_allocator b;
    ex_budget_allocator_init(&b, &test_allocator, 1000);
    const ex_allocator *a = ex_budget_allocator_get(&b);
    cr_assert_not_null(a->stats);
    void *p1 = ex_allocate(a, 400, 8), *p2 = ex_allocate(a, 400, 16);
    cr_assert_not_null(p1);
    cr_assert_not_null(p2);
    cr_expect(aligned_to(p2, 16));
    memset(p1, 1, 400);
    memset(p2, 2, 400);
    void *p3 = ex_allocate(a, 300, 8);
    cr_expect_null(p3, "800 + 300 > 1000 must fail");
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.failures, 1u);
    cr_expect_eq(s.allocations, 2u);
    cr_expect_eq(s.bytes_in_use, 800u, "a failed allocation reserves nothing");
    cr_expect_eq(test_stats.in_use, 2, "nothing was taken from the underlying allocator for the failed request");
    void *p4 = ex_allocate(a, 200, 8); /* exactly the limit */
    cr_assert_not_null(p4, "800 + 200 == limit fits");
    cr_expect_null(ex_allocate(a, 1, 1), "one byte over the limit fails");
    ex_deallocate(a, p1, 400, 8);
    void *p5 = ex_allocate(a, 300, 8);
    cr_assert_not_null(p5, "freeing made room");
    s = stats_of(a);
    cr_expect_eq(s.allocations, 4u);
    cr_expect_eq(s.frees, 1u);
    cr_expect_eq(s.failures, 2u);
    cr_expect_eq(s.bytes_in_use, 900u);
    cr_expect_eq(s.peak_bytes, 1000u, "peak is the limit reached with p1, p2, p4");
    ex_deallocate(a, p2, 400, 16);
    ex_deallocate(a, p4, 200, 8);
    ex_deallocate(a, p5, 300, 8);
    s = stats_of(a);
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_eq(s.frees, 4u);
    cr_expect_eq(s.peak_bytes, 1000u);
    expect_no_leaks();
}

Test(frame_allocators, budget_fails_when_the_underlying_allocator_fails) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, &test_allocator);
    ex_budget_allocator b;
    ex_budget_allocator_init(&b, ex_fault_allocator_get(&f), 1000);
    const ex_allocator *a = ex_budget_allocator_get(&b);
    ex_fault_allocator_fail_nth(&f, 1);
    cr_expect_null(ex_allocate(a, 100, 8));
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.failures, 1u);
    cr_expect_eq(s.allocations, 0u);
    cr_expect_eq(s.bytes_in_use, 0u, "the reservation is given back when the underlying allocator fails");
    void *p = ex_allocate(a, 1000, 8);
    cr_assert_not_null(p, "the whole budget is still available");
    ex_deallocate(a, p, 1000, 8);
    expect_no_leaks();
}

Test(frame_allocators, budget_init_with_null_under_uses_the_default) {
    ex_budget_allocator b;
    ex_budget_allocator_init(&b, NULL, 100);
    long before = test_alloc_count();
    void *p = ex_allocate(ex_budget_allocator_get(&b), 10, 8);
    cr_assert_not_null(p);
    cr_expect_eq(test_alloc_count() - before, 1, "the default (test) allocator served the block");
    ex_deallocate(ex_budget_allocator_get(&b), p, 10, 8);
    expect_no_leaks();
}

#define BUDGET_THREADS 4
#define BUDGET_LIMIT 2048
#define BUDGET_ITERS 20000
#define BUDGET_SLOTS 32 /* about 16 live blocks of 136 bytes on average: one thread alone reaches the limit */

/* Bytes the test threads hold (counted after a block is obtained and before
 * it is given back, so never more than the allocator has reserved). */
static atomic_long budget_live, budget_live_max;

static void budget_note(long delta) {
    long now = atomic_fetch_add(&budget_live, delta) + delta;
    long max = atomic_load(&budget_live_max);
    while (now > max && !atomic_compare_exchange_weak(&budget_live_max, &max, now)) {}
}

typedef struct budget_arg {
    const ex_allocator *a;
    atomic_int *go;
    thread_errors *errs;
    uint32_t seed;
    long ok, failed;
} budget_arg;

static void *budget_worker(void *p) {
    budget_arg *arg = p;
    unsigned char *blk[BUDGET_SLOTS] = { 0 };
    size_t sz[BUDGET_SLOTS] = { 0 };
    unsigned char tag = (unsigned char)(arg->seed & 0xff);
    atomic_fetch_add(arg->go, 1); /* start together */
    while (atomic_load(arg->go) < BUDGET_THREADS) sched_yield();
    for (long it = 0; it < BUDGET_ITERS; it++) {
        unsigned k = lcg(&arg->seed) % BUDGET_SLOTS;
        if (blk[k]) {
            for (size_t i = 0; i < sz[k]; i++)
                if (blk[k][i] != (unsigned char)(tag + k)) {
                    terr_record(arg->errs, "budget block overwritten", (long)k, (long)i);
                    break;
                }
            budget_note(-(long)sz[k]);
            ex_deallocate(arg->a, blk[k], sz[k], 16);
            blk[k] = NULL;
        } else {
            size_t size = 16 + lcg(&arg->seed) % 241; /* 16 .. 256 */
            blk[k] = ex_allocate(arg->a, size, 16);
            if (blk[k]) {
                sz[k] = size;
                budget_note((long)size);
                memset(blk[k], (unsigned char)(tag + k), size);
                arg->ok++;
            } else {
                arg->failed++;
            }
        }
    }
    for (unsigned k = 0; k < BUDGET_SLOTS; k++)
        if (blk[k]) {
            budget_note(-(long)sz[k]);
            ex_deallocate(arg->a, blk[k], sz[k], 16);
        }
    return NULL;
}

Test(frame_allocators, budget_concurrent_allocation_never_exceeds_the_limit) {
    ex_budget_allocator b;
    ex_budget_allocator_init(&b, &test_allocator, BUDGET_LIMIT);
    thread_errors errs;
    terr_init(&errs);
    atomic_store(&budget_live, 0);
    atomic_store(&budget_live_max, 0);
    atomic_int go;
    atomic_init(&go, 0);
    budget_arg args[BUDGET_THREADS];
    pthread_t th[BUDGET_THREADS];
    for (int i = 0; i < BUDGET_THREADS; i++)
        args[i] = (budget_arg){ ex_budget_allocator_get(&b), &go, &errs, (uint32_t)(0x1234u + 77u * (unsigned)i), 0, 0 };
    start_threads(th, BUDGET_THREADS, budget_worker, args, sizeof args[0]);
    join_threads(th, BUDGET_THREADS);
    terr_check(&errs, "budget threads");
    long ok = 0, failed = 0;
    for (int i = 0; i < BUDGET_THREADS; i++) ok += args[i].ok, failed += args[i].failed;
    ex_alloc_stats s = stats_of(ex_budget_allocator_get(&b));
    cr_expect_leq(s.peak_bytes, (uint64_t)BUDGET_LIMIT, "bytes in use peaked at %llu > limit %d",
                  (unsigned long long)s.peak_bytes, BUDGET_LIMIT);
    cr_expect_gt(s.peak_bytes, (uint64_t)(BUDGET_LIMIT - 256), "the load did reach the limit");
    cr_expect_leq(atomic_load(&budget_live_max), BUDGET_LIMIT, "the threads held %ld bytes at once, over the limit %d",
                  atomic_load(&budget_live_max), BUDGET_LIMIT);
    cr_expect_eq(atomic_load(&budget_live), 0);
    cr_expect_eq(s.allocations, (uint64_t)ok);
    cr_expect_eq(s.failures, (uint64_t)failed);
    cr_expect_gt(failed, 0, "one thread alone holds more than the limit on average, so some requests failed");
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    expect_no_leaks();
}

/* let_value whose inner operation is allocated from the chain allocator. */
static ex_sender *budget_pipeline(const ex_allocator *a) {
    return ex_write_env(ex_let_value(ex_just(ex_int(1)), let_plus3, NULL, EX_SIG(EX_T_INT)), &ex_key_get_allocator,
                        ex_alloc_value(a));
}

Test(frame_allocators, budget_as_chain_allocator_fails_let_value_with_enomem) {
    /* The operation of the function's sender is what the chain allocates. */
    ex_value one = ex_int(1);
    ex_sender *inner = let_plus3(NULL, &one, 1);
    size_t need = ex_sender_op_size(inner);
    ex_sender_release(inner);
    cr_assert_gt(need, 0u);

    ex_budget_allocator small;
    ex_budget_allocator_init(&small, &test_allocator, need - 1);
    ex_result r = ex_sync_wait(budget_pipeline(ex_budget_allocator_get(&small)));
    expect_error(&r, EX_ENOMEM);
    ex_result_destroy(&r);
    ex_alloc_stats s = stats_of(ex_budget_allocator_get(&small));
    cr_expect_geq(s.failures, 1u, "the budget refused the inner operation");
    cr_expect_eq(s.allocations, s.frees);
    cr_expect_eq(s.bytes_in_use, 0u);

    ex_budget_allocator zero;
    ex_budget_allocator_init(&zero, &test_allocator, 0);
    r = ex_sync_wait(budget_pipeline(ex_budget_allocator_get(&zero)));
    expect_error(&r, EX_ENOMEM);
    ex_result_destroy(&r);
    expect_no_leaks();
}

Test(frame_allocators, budget_as_chain_allocator_large_enough_gives_the_value) {
    ex_value one = ex_int(1);
    ex_sender *inner = let_plus3(NULL, &one, 1);
    size_t need = ex_sender_op_size(inner);
    ex_sender_release(inner);

    ex_budget_allocator exact;
    ex_budget_allocator_init(&exact, &test_allocator, need);
    ex_result r = ex_sync_wait(budget_pipeline(ex_budget_allocator_get(&exact)));
    expect_value_int(&r, 4);
    ex_result_destroy(&r);
    ex_alloc_stats s = stats_of(ex_budget_allocator_get(&exact));
    cr_expect_eq(s.allocations, 1u, "one allocation from the chain allocator: the inner operation");
    cr_expect_eq(s.peak_bytes, (uint64_t)need);
    cr_expect_eq(s.failures, 0u);
    cr_expect_eq(s.frees, 1u);
    cr_expect_eq(s.bytes_in_use, 0u);

    ex_budget_allocator big;
    ex_budget_allocator_init(&big, &test_allocator, 1 << 20);
    for (int i = 0; i < 10; i++) {
        r = ex_sync_wait(budget_pipeline(ex_budget_allocator_get(&big)));
        expect_value_int(&r, 4);
        ex_result_destroy(&r);
    }
    s = stats_of(ex_budget_allocator_get(&big));
    cr_expect_eq(s.allocations, 10u);
    cr_expect_eq(s.frees, 10u);
    cr_expect_eq(s.bytes_in_use, 0u);
    expect_no_leaks();
}

/* ============================================================ monotonic */

Test(frame_allocators, monotonic_bumps_with_alignment_inside_the_buffer) {
    static _Alignas(64) unsigned char storage[4096 + 1];
    /* Start one byte in, so alignment must come from the address. */
    unsigned char *buf = storage + 1;
    size_t len = 4096;
    ex_monotonic_allocator m;
    ex_monotonic_allocator_init(&m, buf, len, NULL);
    const ex_allocator *a = ex_monotonic_allocator_get(&m);
    static const size_t req[][2] = { { 1, 1 }, { 10, 16 }, { 3, 8 }, { 100, 64 }, { 7, 2 }, { 33, 32 }, { 1, 4 },
                                     { 200, 128 }, { 5, 1 }, { 64, 64 } };
    enum { N = sizeof req / sizeof req[0] };
    unsigned char *p[N];
    uint64_t bytes = 0;
    for (size_t i = 0; i < N; i++) {
        p[i] = ex_allocate(a, req[i][0], req[i][1]);
        cr_assert_not_null(p[i], "request %zu", i);
        cr_expect(p[i] >= buf && p[i] + req[i][0] <= buf + len, "block %zu lies inside the buffer", i);
        cr_expect(aligned_to(p[i], req[i][1]), "block %zu (%p) aligned to %zu", i, (void *)p[i], req[i][1]);
        if (i) cr_expect(p[i] >= p[i - 1] + req[i - 1][0], "bump allocation: block %zu after block %zu", i, i - 1);
        memset(p[i], (int)i + 1, req[i][0]);
        bytes += req[i][0];
    }
    for (size_t i = 0; i < N; i++)
        for (size_t j = 0; j < req[i][0]; j++) cr_assert_eq(p[i][j], (unsigned char)(i + 1), "block %zu intact", i);
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, (uint64_t)N);
    cr_expect_eq(s.bytes_in_use, bytes);
    cr_expect_eq(s.peak_bytes, bytes);
    for (size_t i = 0; i < N; i++) ex_deallocate(a, p[i], req[i][0], req[i][1]);
    s = stats_of(a);
    cr_expect_eq(s.frees, (uint64_t)N);
    cr_expect_eq(s.bytes_in_use, 0u);
    /* deallocate gives nothing back: the next block still comes after the last one */
    unsigned char *q = ex_allocate(a, 1, 1);
    cr_assert_not_null(q);
    cr_expect_geq(q, p[N - 1] + req[N - 1][0]);
    ex_deallocate(a, q, 1, 1);
    expect_no_leaks();
}

Test(frame_allocators, monotonic_exhaustion_without_upstream_fails) {
    static _Alignas(16) unsigned char buf[256];
    ex_monotonic_allocator m;
    ex_monotonic_allocator_init(&m, buf, sizeof buf, NULL);
    const ex_allocator *a = ex_monotonic_allocator_get(&m);
    void *p = ex_allocate(a, 200, 8);
    cr_assert_not_null(p);
    cr_expect_null(ex_allocate(a, 100, 8), "200 + 100 > 256 and there is no upstream");
    void *q = ex_allocate(a, 56, 8);
    cr_expect_not_null(q, "the rest of the buffer still serves a request that fits");
    cr_expect_null(ex_allocate(a, 1, 1), "the buffer is full");
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.failures, 2u);
    cr_expect_eq(s.allocations, 2u);
    cr_expect_eq(s.bytes_in_use, 256u);
    ex_deallocate(a, p, 200, 8);
    ex_deallocate(a, q, 56, 8);
    cr_expect_null(ex_allocate(a, 8, 8), "freeing alone does not make room: only reset does");
    expect_no_leaks();
}

Test(frame_allocators, monotonic_exhaustion_goes_upstream_and_frees_there) {
    static _Alignas(16) unsigned char buf[256];
    ex_monotonic_allocator m;
    ex_monotonic_allocator_init(&m, buf, sizeof buf, &test_allocator);
    const ex_allocator *a = ex_monotonic_allocator_get(&m);
    unsigned char *in = ex_allocate(a, 200, 8);
    cr_assert_not_null(in);
    cr_expect_eq(test_stats.allocs, 0, "a block from the buffer does not touch upstream");
    unsigned char *out = ex_allocate(a, 100, 64);
    cr_assert_not_null(out, "exhaustion falls back to upstream");
    cr_expect(out < buf || out >= buf + sizeof buf, "the upstream block is outside the buffer");
    cr_expect(aligned_to(out, 64));
    cr_expect_eq(test_stats.allocs, 1);
    cr_expect_eq(test_stats.in_use, 1);
    memset(out, 7, 100);
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, 2u);
    cr_expect_eq(s.failures, 0u);
    cr_expect_eq(s.bytes_in_use, 300u);
    ex_deallocate(a, out, 100, 64);
    cr_expect_eq(test_stats.frees, 1, "the upstream block is freed upstream");
    cr_expect_eq(test_stats.in_use, 0);
    ex_deallocate(a, in, 200, 8);
    cr_expect_eq(test_stats.frees, 1, "a buffer block is not given to upstream");
    s = stats_of(a);
    cr_expect_eq(s.frees, 2u);
    cr_expect_eq(s.bytes_in_use, 0u);

    /* No buffer at all: everything comes from upstream. */
    ex_monotonic_allocator none;
    ex_monotonic_allocator_init(&none, NULL, 1024, &test_allocator);
    void *x = ex_allocate(ex_monotonic_allocator_get(&none), 16, 16);
    cr_assert_not_null(x);
    cr_expect_eq(test_stats.in_use, 1);
    ex_deallocate(ex_monotonic_allocator_get(&none), x, 16, 16);
    expect_no_leaks();
}

Test(frame_allocators, monotonic_reset_makes_the_buffer_reusable) {
    static _Alignas(64) unsigned char buf[512];
    ex_monotonic_allocator m;
    ex_monotonic_allocator_init(&m, buf, sizeof buf, NULL);
    const ex_allocator *a = ex_monotonic_allocator_get(&m);
    for (int round = 0; round < 5; round++) {
        unsigned char *first = ex_allocate(a, 64, 64);
        cr_assert_eq(first, buf, "round %d: the first block is the start of the buffer", round);
        void *blocks[7];
        for (int i = 0; i < 7; i++) {
            blocks[i] = ex_allocate(a, 64, 64);
            cr_assert_not_null(blocks[i], "round %d block %d", round, i);
        }
        cr_expect_null(ex_allocate(a, 1, 1), "round %d: full", round);
        ex_deallocate(a, first, 64, 64);
        for (int i = 0; i < 7; i++) ex_deallocate(a, blocks[i], 64, 64);
        ex_monotonic_allocator_reset(&m);
    }
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, 40u);
    cr_expect_eq(s.frees, 40u);
    cr_expect_eq(s.failures, 5u);
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_eq(s.peak_bytes, 512u);
    expect_no_leaks();
}

#define MONO_THREADS 4
#define MONO_PER_THREAD 20000

typedef struct mono_arg {
    const ex_allocator *a;
    atomic_int *go;
    uint32_t seed;
    unsigned char fill;
    unsigned char *p[MONO_PER_THREAD];
    size_t size[MONO_PER_THREAD];
    size_t align[MONO_PER_THREAD];
} mono_arg;

static void *mono_worker(void *p) {
    mono_arg *arg = p;
    for (int i = 0; i < MONO_PER_THREAD; i++) {
        arg->size[i] = 1 + lcg(&arg->seed) % 24;
        arg->align[i] = (size_t)1 << (lcg(&arg->seed) % 5); /* 1 .. 16 */
    }
    /* Start together, allocate in a tight loop (most contention), fill after. */
    atomic_fetch_add(arg->go, 1);
    while (atomic_load(arg->go) < MONO_THREADS) sched_yield();
    for (int i = 0; i < MONO_PER_THREAD; i++) arg->p[i] = ex_allocate(arg->a, arg->size[i], arg->align[i]);
    for (int i = 0; i < MONO_PER_THREAD; i++)
        if (arg->p[i]) memset(arg->p[i], arg->fill, arg->size[i]);
    return NULL;
}

typedef struct span {
    uintptr_t begin, end;
    int owner;
} span;

static int span_cmp(const void *a, const void *b) {
    const span *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

Test(frame_allocators, monotonic_concurrent_blocks_are_disjoint) {
    size_t len = (size_t)4 << 20;
    unsigned char *buf = aligned_alloc(64, len);
    cr_assert_not_null(buf);
    ex_monotonic_allocator m;
    ex_monotonic_allocator_init(&m, buf, len, NULL);
    static mono_arg args[MONO_THREADS];
    pthread_t th[MONO_THREADS];
    atomic_int go;
    atomic_init(&go, 0);
    for (int i = 0; i < MONO_THREADS; i++) {
        memset(&args[i], 0, sizeof args[i]);
        args[i].a = ex_monotonic_allocator_get(&m);
        args[i].go = &go;
        args[i].seed = 99u + 1000u * (unsigned)i;
        args[i].fill = (unsigned char)(0x11 * (i + 1));
    }
    start_threads(th, MONO_THREADS, mono_worker, args, sizeof args[0]);
    join_threads(th, MONO_THREADS);
    static span spans[MONO_THREADS * MONO_PER_THREAD];
    size_t n = 0;
    for (int t = 0; t < MONO_THREADS; t++)
        for (int i = 0; i < MONO_PER_THREAD; i++) {
            unsigned char *p = args[t].p[i];
            cr_assert_not_null(p, "thread %d block %d: the buffer is large enough", t, i);
            cr_assert(p >= buf && p + args[t].size[i] <= buf + len, "thread %d block %d inside the buffer", t, i);
            cr_assert(aligned_to(p, args[t].align[i]), "thread %d block %d aligned to %zu", t, i, args[t].align[i]);
            for (size_t j = 0; j < args[t].size[i]; j++)
                if (p[j] != args[t].fill) cr_assert_fail("thread %d block %d was overwritten by another thread", t, i);
            spans[n++] = (span){ (uintptr_t)p, (uintptr_t)p + args[t].size[i], t };
        }
    qsort(spans, n, sizeof spans[0], span_cmp);
    for (size_t i = 1; i < n; i++)
        cr_assert_leq(spans[i - 1].end, spans[i].begin, "blocks of threads %d and %d overlap", spans[i - 1].owner,
                      spans[i].owner);
    ex_alloc_stats s = stats_of(ex_monotonic_allocator_get(&m));
    cr_expect_eq(s.allocations, (uint64_t)(MONO_THREADS * MONO_PER_THREAD));
    cr_expect_eq(s.failures, 0u);
    for (int t = 0; t < MONO_THREADS; t++)
        for (int i = 0; i < MONO_PER_THREAD; i++)
            ex_deallocate(ex_monotonic_allocator_get(&m), args[t].p[i], args[t].size[i], args[t].align[i]);
    s = stats_of(ex_monotonic_allocator_get(&m));
    cr_expect_eq(s.bytes_in_use, 0u);
    free(buf);
    expect_no_leaks();
}

/* ================================================================ fault */

Test(frame_allocators, fault_fail_nth_fails_exactly_that_allocation) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, &test_allocator);
    const ex_allocator *a = ex_fault_allocator_get(&f);
    void *keep[40];
    int nkeep = 0;
    for (int i = 0; i < 5; i++) cr_assert_not_null(keep[nkeep++] = ex_allocate(a, 32, 8), "before fail_nth: %d", i);
    ex_fault_allocator_fail_nth(&f, 3);
    for (int i = 1; i <= 20; i++) {
        void *p = ex_allocate(a, 32, 8);
        if (i == 3) {
            cr_expect_null(p, "allocation 3 after fail_nth(3) fails");
        } else {
            cr_expect_not_null(p, "allocation %d after fail_nth(3) succeeds", i);
            if (p) keep[nkeep++] = p;
        }
    }
    cr_expect_eq(ex_fault_allocator_count(&f), 25u, "count includes the failed allocation");
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.failures, 1u);
    cr_expect_eq(s.allocations, 24u);
    cr_expect_eq(s.bytes_in_use, 24u * 32u);
    cr_expect_eq(test_stats.allocs, 24, "the failed request never reached the underlying allocator");

    ex_fault_allocator_fail_nth(&f, 1);
    cr_expect_null(ex_allocate(a, 8, 8), "fail_nth(1): the very next one fails");
    ex_fault_allocator_fail_nth(&f, 2);
    ex_fault_allocator_fail_nth(&f, 0);
    for (int i = 0; i < 5; i++) {
        void *p = ex_allocate(a, 8, 8);
        cr_expect_not_null(p, "fail_nth(0) turned failures off");
        ex_deallocate(a, p, 8, 8);
    }
    for (int i = 0; i < nkeep; i++) ex_deallocate(a, keep[i], 32, 8);
    s = stats_of(a);
    cr_expect_eq(s.failures, 2u);
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(s.bytes_in_use, 0u);
    expect_no_leaks();
}

static void random_pattern(uint64_t seed, uint32_t per_million, bool *out, int n) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, &test_allocator);
    ex_fault_allocator_fail_randomly(&f, seed, per_million);
    const ex_allocator *a = ex_fault_allocator_get(&f);
    for (int i = 0; i < n; i++) {
        void *p = ex_allocate(a, 8, 8);
        out[i] = p == NULL;
        ex_deallocate(a, p, 8, 8);
    }
}

Test(frame_allocators, fault_random_failures_are_deterministic_per_seed) {
    enum { N = 4000 };
    static bool a[N], b[N], c[N];
    random_pattern(42, 100000, a, N);
    random_pattern(42, 100000, b, N);
    random_pattern(43, 100000, c, N);
    int fails = 0, diff_same = 0, diff_other = 0;
    for (int i = 0; i < N; i++) {
        fails += a[i];
        diff_same += a[i] != b[i];
        diff_other += a[i] != c[i];
    }
    cr_expect_eq(diff_same, 0, "the same seed fails the same allocations (%d differ)", diff_same);
    cr_expect_gt(diff_other, 0, "another seed gives another pattern");
    cr_expect(fails > 0 && fails < N, "some, not all, fail (%d)", fails);
    /* seed 0 is replaced by a fixed non-zero seed: still deterministic */
    random_pattern(0, 100000, a, N);
    random_pattern(0, 100000, b, N);
    fails = 0;
    for (int i = 0; i < N; i++) {
        fails += a[i];
        cr_assert_eq(a[i], b[i], "seed 0, allocation %d", i);
    }
    cr_expect_gt(fails, 0, "seed 0 does not disable the failures");
    expect_no_leaks();
}

Test(frame_allocators, fault_random_rate_is_roughly_right) {
    enum { N = 100000 };
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, &test_allocator);
    ex_fault_allocator_fail_randomly(&f, 0xC0FFEE, 100000); /* 10% */
    const ex_allocator *a = ex_fault_allocator_get(&f);
    long fails = 0;
    for (int i = 0; i < N; i++) {
        void *p = ex_allocate(a, 16, 16);
        if (!p) fails++;
        ex_deallocate(a, p, 16, 16);
    }
    cr_expect(fails >= 8000 && fails <= 12000, "10%% of %d should fail, %ld did", N, fails);
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.failures, (uint64_t)fails);
    cr_expect_eq(s.allocations, (uint64_t)(N - fails));
    cr_expect_eq(s.frees, s.allocations);
    cr_expect_eq(ex_fault_allocator_count(&f), (uint64_t)N);

    ex_fault_allocator_fail_randomly(&f, 5, 0);
    for (int i = 0; i < 1000; i++) {
        void *p = ex_allocate(a, 16, 16);
        cr_assert_not_null(p, "rate 0: nothing fails");
        ex_deallocate(a, p, 16, 16);
    }
    ex_fault_allocator_fail_randomly(&f, 5, 1000000);
    for (int i = 0; i < 1000; i++) cr_assert_null(ex_allocate(a, 16, 16), "rate 1e6: everything fails");
    ex_fault_allocator_fail_randomly(&f, 5, 2000000); /* clamped */
    cr_expect_null(ex_allocate(a, 16, 16));
    expect_no_leaks();
}

/* ============================================================ recycling */

static ex_recycling_allocator *make_recycling(const ex_allocator *under) {
    ex_recycling_allocator *r = NULL;
    ex_error e = ex_recycling_allocator_create(under, &r);
    cr_assert_eq(e.code, 0, "ex_recycling_allocator_create: %s", e.msg ? e.msg : "");
    cr_assert_not_null(r);
    return r;
}

Test(frame_allocators, recycling_create_rejects_null_out) {
    ex_error e = ex_recycling_allocator_create(&test_allocator, NULL);
    cr_expect_eq(e.code, EX_EINVAL);
    cr_expect_not_null(e.msg);
    cr_expect_eq(test_stats.allocs, 0, "nothing allocated");
    expect_no_leaks();
}

Test(frame_allocators, recycling_create_fails_cleanly_when_under_fails) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, &test_allocator);
    ex_fault_allocator_fail_nth(&f, 1);
    ex_recycling_allocator *r = (ex_recycling_allocator *)&f; /* must be reset */
    ex_error e = ex_recycling_allocator_create(ex_fault_allocator_get(&f), &r);
    cr_expect_eq(e.code, EX_ENOMEM);
    cr_expect_null(r, "*out is NULL on failure");
    expect_no_leaks();
}

Test(frame_allocators, recycling_hands_a_freed_block_out_again) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    const ex_allocator *a = ex_recycling_allocator_get(r);
    void *p = ex_allocate(a, 100, 8);
    cr_assert_not_null(p);
    cr_expect(aligned_to(p, 64), "class blocks are 64-byte aligned");
    memset(p, 1, 100);
    long under_allocs = test_stats.allocs, under_frees = test_stats.frees;
    ex_deallocate(a, p, 100, 8);
    cr_expect_eq(test_stats.frees, under_frees, "a freed class block is kept, not given back");
    void *q = ex_allocate(a, 100, 8);
    cr_expect_eq(q, p, "the same block is handed out again");
    ex_deallocate(a, q, 100, 8);
    void *q2 = ex_allocate(a, 128, 64); /* same class (65..128) */
    cr_expect_eq(q2, p, "any size of the same class reuses it");
    memset(q2, 2, 128);
    ex_deallocate(a, q2, 128, 64);
    cr_expect_eq(test_stats.allocs, under_allocs, "reuse does not touch the underlying allocator");

    /* Alignment of class blocks up to 64. */
    for (size_t align = 1; align <= 64; align *= 2) {
        void *x = ex_allocate(a, 24, align);
        cr_assert_not_null(x);
        cr_expect(aligned_to(x, align), "align %zu", align);
        ex_deallocate(a, x, 24, align);
    }
    ex_recycling_allocator_destroy(r);
    cr_expect_eq(test_stats.in_use, 0, "destroy gives every cached block back");
    expect_no_leaks();
}

Test(frame_allocators, recycling_large_or_overaligned_requests_pass_through) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    const ex_allocator *a = ex_recycling_allocator_get(r);
    void *warm = ex_allocate(a, 16, 8); /* creates this thread's cache */
    ex_deallocate(a, warm, 16, 8);
    static const size_t cases[][2] = { { EX_RECYCLE_MAX_BLOCK + 1, 8 }, { 100000, 16 }, { 100, 128 }, { 64, 4096 } };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t size = cases[i][0], align = cases[i][1];
        for (int round = 0; round < 2; round++) {
            long allocs = test_stats.allocs, frees = test_stats.frees;
            void *p = ex_allocate(a, size, align);
            cr_assert_not_null(p);
            cr_expect(aligned_to(p, align), "size %zu align %zu", size, align);
            memset(p, 3, size);
            cr_expect_eq(test_stats.allocs - allocs, 1, "size %zu align %zu round %d: straight from the underlying allocator",
                         size, align, round);
            ex_deallocate(a, p, size, align);
            cr_expect_eq(test_stats.frees - frees, 1, "size %zu align %zu: straight back", size, align);
        }
    }
    /* EX_RECYCLE_MAX_BLOCK itself is a class size */
    void *p = ex_allocate(a, EX_RECYCLE_MAX_BLOCK, 64);
    cr_assert_not_null(p);
    ex_deallocate(a, p, EX_RECYCLE_MAX_BLOCK, 64);
    long allocs = test_stats.allocs;
    void *q = ex_allocate(a, EX_RECYCLE_MAX_BLOCK, 64);
    cr_expect_eq(q, p);
    cr_expect_eq(test_stats.allocs, allocs);
    ex_deallocate(a, q, EX_RECYCLE_MAX_BLOCK, 64);
    ex_recycling_allocator_destroy(r);
    expect_no_leaks();
}

Test(frame_allocators, recycling_caches_at_most_max_cached_blocks_per_class) {
    enum { N = EX_RECYCLE_MAX_CACHED + 44 };
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    const ex_allocator *a = ex_recycling_allocator_get(r);
    static void *blocks[N];
    for (int i = 0; i < N; i++) cr_assert_not_null(blocks[i] = ex_allocate(a, 64, 16));
    long frees = test_stats.frees;
    for (int i = 0; i < N; i++) ex_deallocate(a, blocks[i], 64, 16);
    /* Past the bound, half a list moves to the shared depot, which still has
     * room: nothing goes back to the underlying allocator yet. */
    cr_expect_eq(test_stats.frees - frees, 0, "the blocks beyond the cache bound went to the depot, not back");
    long allocs = test_stats.allocs;
    for (int i = 0; i < N; i++) cr_assert_not_null(blocks[i] = ex_allocate(a, 64, 16));
    cr_expect_eq(test_stats.allocs, allocs, "the thread's list and the depot serve the next requests");
    for (int i = 0; i < N; i++) ex_deallocate(a, blocks[i], 64, 16);
    ex_recycling_allocator_destroy(r);
    expect_no_leaks();
}

Test(frame_allocators, recycling_stats_after_balanced_use) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    const ex_allocator *a = ex_recycling_allocator_get(r);
    cr_assert_not_null(a->stats);
    static void *blocks[500];
    static size_t sizes[500];
    uint32_t seed = 7;
    uint64_t max_live = 0, live = 0;
    for (int round = 0; round < 4; round++) {
        for (int i = 0; i < 500; i++) {
            sizes[i] = 1 + lcg(&seed) % 6000; /* some pass through */
            blocks[i] = ex_allocate(a, sizes[i], 16);
            cr_assert_not_null(blocks[i]);
            live += sizes[i];
        }
        if (live > max_live) max_live = live;
        ex_alloc_stats mid = stats_of(a);
        cr_expect_eq(mid.bytes_in_use, live, "bytes in use are what users hold");
        for (int i = 0; i < 500; i++) ex_deallocate(a, blocks[i], sizes[i], 16);
        live = 0;
    }
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.allocations, 2000u);
    cr_expect_eq(s.frees, 2000u);
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_eq(s.failures, 0u);
    cr_expect_gt(s.peak_bytes, 0u, "peak of memory taken from the underlying allocator");
    ex_recycling_allocator_destroy(r);
    expect_no_leaks();
}

Test(frame_allocators, recycling_returns_null_and_counts_when_under_fails) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, &test_allocator);
    ex_recycling_allocator *r = make_recycling(ex_fault_allocator_get(&f));
    const ex_allocator *a = ex_recycling_allocator_get(r);
    void *warm = ex_allocate(a, 16, 8); /* this thread's cache exists from now on */
    cr_assert_not_null(warm);
    ex_deallocate(a, warm, 16, 8);

    ex_fault_allocator_fail_nth(&f, 1);
    cr_expect_null(ex_allocate(a, 1000, 8), "an empty class list goes to the underlying allocator, which fails");
    ex_alloc_stats s = stats_of(a);
    cr_expect_eq(s.failures, 1u);
    ex_fault_allocator_fail_nth(&f, 1);
    cr_expect_null(ex_allocate(a, 10000, 8), "a pass-through request fails too");
    s = stats_of(a);
    cr_expect_eq(s.failures, 2u);
    cr_expect_eq(s.allocations, 1u, "failed requests are not counted as allocations");
    cr_expect_eq(s.bytes_in_use, 0u);
    /* a cached block is still served while the underlying allocator fails */
    ex_fault_allocator_fail_randomly(&f, 1, 1000000);
    void *p = ex_allocate(a, 16, 8);
    cr_expect_eq(p, warm, "the cached block does not need the underlying allocator");
    ex_deallocate(a, p, 16, 8);
    ex_fault_allocator_fail_randomly(&f, 1, 0);
    ex_recycling_allocator_destroy(r);
    ex_alloc_stats fs = stats_of(ex_fault_allocator_get(&f));
    cr_expect_eq(fs.bytes_in_use, 0u, "everything taken from the fault allocator went back");
    expect_no_leaks();
}

/* When the allocation of a thread's cache fails, the request must still be
 * answered consistently: NULL (and a failure counted), or a block that can
 * later be freed and reused without breaking anything (its real size, the
 * counters). */
typedef struct cachefail_arg {
    const ex_allocator *a;
    ex_fault_allocator *f;
    void *p;
    uint64_t p_under_bytes;  /* bytes taken from the underlying allocator for p */
    bool overflow;           /* p came back for a request larger than its block */
} cachefail_arg;

static uint64_t fault_bytes(ex_fault_allocator *f) {
    ex_alloc_stats s;
    memset(&s, 0, sizeof s);
    (void)ex_allocator_stats(ex_fault_allocator_get(f), &s);
    return s.bytes_in_use;
}

static void *cachefail_worker(void *v) {
    cachefail_arg *arg = v;
    /* The first request on a new thread first allocates the thread's cache:
     * make exactly that allocation fail. */
    ex_fault_allocator_fail_nth(arg->f, 1);
    uint64_t before = fault_bytes(arg->f);
    arg->p = ex_allocate(arg->a, 100, 8);
    arg->p_under_bytes = fault_bytes(arg->f) - before;
    if (arg->p) {
        memset(arg->p, 1, 100);
        ex_deallocate(arg->a, arg->p, 100, 8); /* the cache can be created now */
        /* Same size class (65..128). */
        unsigned char *q = ex_allocate(arg->a, 128, 8);
        if (q == arg->p && arg->p_under_bytes < 128) {
            arg->overflow = true; /* writing 128 bytes would overrun the block */
        } else if (q) {
            memset(q, 2, 128);
        }
        if (q) ex_deallocate(arg->a, q, 128, 8);
    }
    return NULL;
}

Test(frame_allocators, recycling_consistent_when_the_thread_cache_cannot_be_allocated) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, &test_allocator);
    ex_recycling_allocator *r = make_recycling(ex_fault_allocator_get(&f));
    cachefail_arg arg = { ex_recycling_allocator_get(r), &f, NULL, 0, false };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, cachefail_worker, &arg), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_expect(!arg.overflow,
              "a 100-byte request served with a %llu-byte block from the underlying allocator (the thread's cache could "
              "not be allocated) was cached and handed out again for a 128-byte request: heap buffer overflow",
              (unsigned long long)arg.p_under_bytes);
    ex_alloc_stats s = stats_of(ex_recycling_allocator_get(r));
    if (!arg.p) cr_expect_eq(s.failures, 1u, "a NULL answer counts a failure");
    cr_expect_eq(s.allocations, s.frees, "balanced use gives balanced counters (allocations %llu, frees %llu)",
                 (unsigned long long)s.allocations, (unsigned long long)s.frees);
    cr_expect_eq(s.bytes_in_use, 0u, "bytes in use after balanced use: %llu", (unsigned long long)s.bytes_in_use);
    ex_recycling_allocator_destroy(r);
    ex_alloc_stats fs = stats_of(ex_fault_allocator_get(&f));
    cr_expect_eq(fs.bytes_in_use, 0u, "everything taken from the underlying allocator went back (%llu bytes left)",
                 (unsigned long long)fs.bytes_in_use);
    cr_expect_eq(fs.allocations, fs.frees);
    expect_no_leaks();
}

/* Cross-thread free: allocate on A, free on B, B reuses it. */
typedef struct xthread_arg {
    const ex_allocator *a;
    void *block;
    void *reused;
} xthread_arg;

static void *xthread_alloc(void *v) {
    xthread_arg *x = v;
    x->block = ex_allocate(x->a, 200, 16);
    if (x->block) memset(x->block, 0xAB, 200);
    /* Cached blocks of this thread go back when it exits. */
    void *tmp[8];
    for (int i = 0; i < 8; i++) tmp[i] = ex_allocate(x->a, 48, 16);
    for (int i = 0; i < 8; i++) ex_deallocate(x->a, tmp[i], 48, 16);
    return NULL;
}

static void *xthread_free_reuse(void *v) {
    xthread_arg *x = v;
    ex_deallocate(x->a, x->block, 200, 16);
    x->reused = ex_allocate(x->a, 256, 16);
    if (x->reused) memset(x->reused, 0xCD, 256);
    ex_deallocate(x->a, x->reused, 256, 16);
    return NULL;
}

Test(frame_allocators, recycling_cross_thread_free_is_reused_by_the_freeing_thread) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    long base = test_stats.in_use; /* the allocator itself */
    xthread_arg x = { ex_recycling_allocator_get(r), NULL, NULL };
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, xthread_alloc, &x), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_assert_not_null(x.block);
    cr_expect_eq(test_stats.in_use, base + 1, "thread A exited: its cache went back, only the live block is held (%ld)",
                 test_stats.in_use - base);
    unsigned char *b = x.block;
    for (int i = 0; i < 200; i++) cr_assert_eq(b[i], 0xAB);
    cr_assert_eq(pthread_create(&th, NULL, xthread_free_reuse, &x), 0);
    cr_assert_eq(pthread_join(th, NULL), 0);
    cr_expect_eq(x.reused, x.block, "B reuses the block A allocated and B freed");
    cr_expect_eq(test_stats.in_use, base, "thread B exited: its cache (with the block) went back");
    ex_alloc_stats s = stats_of(ex_recycling_allocator_get(r));
    cr_expect_eq(s.allocations, 10u);
    cr_expect_eq(s.frees, 10u);
    cr_expect_eq(s.bytes_in_use, 0u, "counters of exited threads are kept");
    ex_recycling_allocator_destroy(r);
    cr_expect_eq(test_stats.in_use, 0);
    expect_no_leaks();
}

/* Producer / consumer: 2 producers allocate and fill blocks, 2 consumers
 * verify, free (cross-thread), allocate their own (reusing those blocks),
 * fill and verify them.  An overlap between two live blocks shows as a
 * broken pattern. */
#define PC_BLOCKS 50000
#define PC_PRODUCERS 2
#define PC_CONSUMERS 2
#define PC_QUEUE 256
#define PC_RING 8

typedef struct pc_queue {
    pthread_mutex_t mu;
    pthread_cond_t not_empty, not_full;
    void *items[PC_QUEUE];
    size_t head, count;
} pc_queue;

typedef struct pc_shared {
    const ex_allocator *a;
    pc_queue q;
    thread_errors errs;
    atomic_long consumed;
} pc_shared;

typedef struct pc_arg {
    pc_shared *sh;
    int id;
    uint32_t seed;
    long reuse_hits;
} pc_arg;

/* Block layout: [size_t size][uint64_t tag] then bytes derived from tag. */
typedef struct pc_hdr {
    size_t size;
    uint64_t tag;
} pc_hdr;

static const size_t pc_sizes[] = { 16, 24, 40, 64, 100, 128, 200, 256, 500, 1000, 2048, 3000, 4096, 5000 };

static void pc_fill(unsigned char *p, size_t size, uint64_t tag) {
    pc_hdr h = { size, tag };
    memcpy(p, &h, sizeof h);
    for (size_t i = sizeof h; i < size; i++) p[i] = (unsigned char)(tag * 131u + i);
}

static bool pc_check(const unsigned char *p, size_t size, uint64_t *tag_out) {
    pc_hdr h;
    memcpy(&h, p, sizeof h);
    if (h.size != size) return false;
    for (size_t i = sizeof h; i < size; i++)
        if (p[i] != (unsigned char)(h.tag * 131u + i)) return false;
    if (tag_out) *tag_out = h.tag;
    return true;
}

static struct timespec pc_deadline(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += (time_t)WAIT_LIMIT_S;
    return ts;
}

static bool pc_push(pc_shared *sh, void *item) {
    struct timespec dl = pc_deadline();
    pthread_mutex_lock(&sh->q.mu);
    while (sh->q.count == PC_QUEUE)
        if (pthread_cond_timedwait(&sh->q.not_full, &sh->q.mu, &dl)) {
            pthread_mutex_unlock(&sh->q.mu);
            return false;
        }
    sh->q.items[(sh->q.head + sh->q.count) % PC_QUEUE] = item;
    sh->q.count++;
    pthread_cond_signal(&sh->q.not_empty);
    pthread_mutex_unlock(&sh->q.mu);
    return true;
}

static bool pc_pop(pc_shared *sh, void **item) {
    struct timespec dl = pc_deadline();
    pthread_mutex_lock(&sh->q.mu);
    while (sh->q.count == 0)
        if (pthread_cond_timedwait(&sh->q.not_empty, &sh->q.mu, &dl)) {
            pthread_mutex_unlock(&sh->q.mu);
            return false;
        }
    *item = sh->q.items[sh->q.head];
    sh->q.head = (sh->q.head + 1) % PC_QUEUE;
    sh->q.count--;
    pthread_cond_signal(&sh->q.not_full);
    pthread_mutex_unlock(&sh->q.mu);
    return true;
}

static void *pc_producer(void *v) {
    pc_arg *arg = v;
    pc_shared *sh = arg->sh;
    for (long i = 0; i < PC_BLOCKS / PC_PRODUCERS; i++) {
        size_t size = pc_sizes[lcg(&arg->seed) % (sizeof pc_sizes / sizeof pc_sizes[0])];
        unsigned char *p = ex_allocate(sh->a, size, 16);
        if (!p) {
            terr_record(&sh->errs, "producer: allocation failed", arg->id, i);
            break;
        }
        pc_fill(p, size, ((uint64_t)arg->id << 40) | (uint64_t)i);
        if (!pc_push(sh, p)) {
            terr_record(&sh->errs, "producer: queue full for too long", arg->id, i);
            ex_deallocate(sh->a, p, size, 16);
            break;
        }
    }
    return NULL;
}

static void *pc_consumer(void *v) {
    pc_arg *arg = v;
    pc_shared *sh = arg->sh;
    unsigned char *ring[PC_RING] = { 0 };
    size_t ring_size[PC_RING] = { 0 };
    uint64_t ring_tag[PC_RING] = { 0 };
    uint64_t seq = 0;
    for (;;) {
        void *item;
        if (!pc_pop(sh, &item)) {
            terr_record(&sh->errs, "consumer: nothing to consume for too long", arg->id, (long)seq);
            break;
        }
        if (!item) break; /* end marker */
        unsigned char *p = item;
        pc_hdr h;
        memcpy(&h, p, sizeof h);
        bool known = false;
        for (size_t k = 0; k < sizeof pc_sizes / sizeof pc_sizes[0]; k++) known |= pc_sizes[k] == h.size;
        if (!known || !pc_check(p, h.size, NULL)) {
            terr_record(&sh->errs, "consumer: a producer's block was overwritten", arg->id, (long)h.size);
            continue; /* do not free a block whose size is unknown */
        }
        size_t size = h.size;
        ex_deallocate(sh->a, p, size, 16); /* cross-thread free */
        atomic_fetch_add(&sh->consumed, 1);
        /* Allocate one of our own of the same size (often the block just freed). */
        unsigned k = (unsigned)(seq % PC_RING);
        if (ring[k]) {
            uint64_t tag;
            if (!pc_check(ring[k], ring_size[k], &tag) || tag != ring_tag[k])
                terr_record(&sh->errs, "consumer: its own block was overwritten", arg->id, (long)ring_size[k]);
            ex_deallocate(sh->a, ring[k], ring_size[k], 16);
            ring[k] = NULL;
        }
        unsigned char *mine = ex_allocate(sh->a, size, 16);
        if (!mine) {
            terr_record(&sh->errs, "consumer: allocation failed", arg->id, (long)seq);
            break;
        }
        if (mine == p) arg->reuse_hits++;
        ring_tag[k] = ((uint64_t)(100 + arg->id) << 40) | seq;
        ring_size[k] = size;
        pc_fill(mine, size, ring_tag[k]);
        ring[k] = mine;
        seq++;
    }
    for (unsigned k = 0; k < PC_RING; k++)
        if (ring[k]) {
            uint64_t tag;
            if (!pc_check(ring[k], ring_size[k], &tag) || tag != ring_tag[k])
                terr_record(&sh->errs, "consumer: its own block was overwritten (end)", arg->id, (long)ring_size[k]);
            ex_deallocate(sh->a, ring[k], ring_size[k], 16);
        }
    return NULL;
}

Test(frame_allocators, recycling_producer_consumer_blocks_never_overlap) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    long base = test_stats.in_use;
    static pc_shared sh;
    memset(&sh, 0, sizeof sh);
    sh.a = ex_recycling_allocator_get(r);
    pthread_mutex_init(&sh.q.mu, NULL);
    pthread_cond_init(&sh.q.not_empty, NULL);
    pthread_cond_init(&sh.q.not_full, NULL);
    terr_init(&sh.errs);
    atomic_init(&sh.consumed, 0);
    pc_arg prod[PC_PRODUCERS], cons[PC_CONSUMERS];
    pthread_t pt[PC_PRODUCERS], ct[PC_CONSUMERS];
    for (int i = 0; i < PC_PRODUCERS; i++) prod[i] = (pc_arg){ &sh, i, 11u + (uint32_t)i * 7919u, 0 };
    for (int i = 0; i < PC_CONSUMERS; i++) cons[i] = (pc_arg){ &sh, i, 0, 0 };
    start_threads(ct, PC_CONSUMERS, pc_consumer, cons, sizeof cons[0]);
    start_threads(pt, PC_PRODUCERS, pc_producer, prod, sizeof prod[0]);
    join_threads(pt, PC_PRODUCERS);
    for (int i = 0; i < PC_CONSUMERS; i++) cr_assert(pc_push(&sh, NULL), "end marker");
    join_threads(ct, PC_CONSUMERS);
    terr_check(&sh.errs, "producer/consumer");
    cr_expect_eq(atomic_load(&sh.consumed), PC_BLOCKS, "every block was consumed");
    for (int i = 0; i < PC_CONSUMERS; i++)
        cr_expect_gt(cons[i].reuse_hits, 0, "consumer %d reused blocks freed across threads", i);
    /* Exited threads returned their lists; what remains is the shared
     * depot's, bounded by 64 batches of half a list per size class. */
    cr_expect_leq(test_stats.in_use - base, 9L * 64 * (EX_RECYCLE_MAX_CACHED / 2),
                  "the threads exited; %ld blocks are still held, more than the depot may keep", test_stats.in_use - base);
    ex_alloc_stats s = stats_of(sh.a);
    cr_expect_eq(s.allocations, s.frees, "allocations %llu, frees %llu", (unsigned long long)s.allocations,
                 (unsigned long long)s.frees);
    cr_expect_eq(s.allocations, (uint64_t)(2 * PC_BLOCKS));
    cr_expect_eq(s.bytes_in_use, 0u);
    cr_expect_gt(s.peak_bytes, 0u);
    cr_expect_eq(s.failures, 0u);
    ex_recycling_allocator_destroy(r);
    cr_expect_eq(test_stats.in_use, 0, "destroy frees the rest");
    pthread_cond_destroy(&sh.q.not_empty);
    pthread_cond_destroy(&sh.q.not_full);
    pthread_mutex_destroy(&sh.q.mu);
    expect_no_leaks();
}

Test(frame_allocators, recycling_as_pool_allocator_returns_worker_caches) {
    ex_recycling_allocator *r = make_recycling(&test_allocator);
    ex_pool *p = make_pool(3, ex_recycling_allocator_get(r));
    ex_scheduler sch = ex_pool_scheduler(p);
    for (int i = 0; i < 50; i++) {
        ex_sender *s = ex_let_value(ex_just(ex_int(i)), let_plus3, NULL, EX_SIG(EX_T_INT));
        s = ex_let_value(s, let_plus1, NULL, EX_SIG(EX_T_INT));
        ex_result res = ex_sync_wait(ex_starts_on(sch, s));
        expect_value_int(&res, i + 4);
        ex_result_destroy(&res);
    }
    ex_alloc_stats s = stats_of(ex_recycling_allocator_get(r));
    cr_expect_geq(s.allocations, 100u, "the pool's work allocated its inner operations from the recycling allocator");
    cr_expect_eq(s.allocations, s.frees);
    destroy_pool(p);
    ex_recycling_allocator_destroy(r);
    expect_no_leaks();
}

Test(frame_allocators, recycling_allocators_created_one_after_another) {
    for (int i = 0; i < 20; i++) {
        ex_recycling_allocator *r = make_recycling(&test_allocator);
        const ex_allocator *a = ex_recycling_allocator_get(r);
        void *p = ex_allocate(a, 32, 8);
        cr_assert_not_null(p);
        memset(p, i, 32);
        ex_deallocate(a, p, 32, 8);
        ex_alloc_stats s = stats_of(a);
        cr_expect_eq(s.allocations, 1u, "round %d: a new allocator starts from zero", i);
        ex_recycling_allocator_destroy(r);
        cr_expect_eq(test_stats.in_use, 0, "round %d", i);
    }
    ex_recycling_allocator_destroy(NULL); /* NULL-safe */
    expect_no_leaks();
}

/* ========================================================== propagation */

static ex_sender *pipeline_on(ex_scheduler sch, int64_t v) {
    return ex_starts_on(sch, ex_let_value(ex_just(ex_int(v)), let_plus3, NULL, EX_SIG(EX_T_INT)));
}

Test(frame_allocators, get_allocator_answers_the_pool_allocator) {
    trk_alloc x, y;
    trk_init(&x, NULL, "X");
    trk_init(&y, NULL, "Y");
    ex_pool *p = make_pool(2, &x.a);
    ex_pool *plain = make_pool(1, NULL);
    ex_env_pair sp;
    ex_env_pair_init(&sp, &ex_key_get_scheduler, ex_sched_value(ex_pool_scheduler(p)), ex_env_empty());
    cr_expect_eq(ex_get_allocator(ex_env_of_pair(&sp)), &x.a, "the scheduler's default allocator");
    cr_expect_eq(ex_get_allocator(ex_env_forward(ex_env_of_pair(&sp))), &x.a, "through FWD-ENV too");

    ex_env_pair ap;
    ex_env_pair_init(&ap, &ex_key_get_allocator, ex_alloc_value(&y.a), ex_env_of_pair(&sp));
    cr_expect_eq(ex_get_allocator(ex_env_of_pair(&ap)), &y.a, "an explicit allocator wins over the pool's");
    ex_env_pair sp2;
    ex_env_pair_init(&sp2, &ex_key_get_scheduler, ex_sched_value(ex_pool_scheduler(p)), ex_env_of_pair(&ap));
    cr_expect_eq(ex_get_allocator(ex_env_of_pair(&sp2)), &y.a, "also when the scheduler is nearer");

    ex_env_pair pp;
    ex_env_pair_init(&pp, &ex_key_get_scheduler, ex_sched_value(ex_pool_scheduler(plain)), ex_env_empty());
    cr_expect_eq(ex_get_allocator(ex_env_of_pair(&pp)), &test_allocator, "a pool without one: the process default");
    cr_expect_eq(ex_get_allocator(ex_env_empty()), &test_allocator);
    destroy_pool(plain);
    destroy_pool(p);
    cr_expect_eq(atomic_load(&x.allocs), 0, "creating a pool does not use its frame allocator");
    expect_no_leaks();
}

Test(frame_allocators, pool_work_allocates_from_the_pool_allocator) {
    trk_alloc x;
    trk_init(&x, NULL, "X");
    ex_pool *p = make_pool(2, &x.a);
    long before = test_alloc_count();
    ex_result r = ex_sync_wait(pipeline_on(ex_pool_scheduler(p), 10));
    expect_value_int(&r, 13);
    ex_result_destroy(&r);
    cr_expect_eq(atomic_load(&x.allocs), 1, "the inner operation of let_value came from the pool's allocator (%ld)",
                 atomic_load(&x.allocs));
    cr_expect_eq(atomic_load(&x.in_use), 0);
    /* the default allocator made only the senders (building them) */
    long made = test_alloc_count() - before;
    cr_expect_gt(made, 0);
    destroy_pool(p);
    expect_no_leaks();
}

Test(frame_allocators, write_env_allocator_wins_over_the_pool_allocator) {
    trk_alloc x, y;
    trk_init(&x, NULL, "X");
    trk_init(&y, NULL, "Y");
    ex_pool *p = make_pool(2, &x.a);
    ex_scheduler sch = ex_pool_scheduler(p);
    /* Y written inside starts_on */
    ex_sender *inner = ex_write_env(ex_let_value(ex_just(ex_int(1)), let_plus3, NULL, EX_SIG(EX_T_INT)),
                                    &ex_key_get_allocator, ex_alloc_value(&y.a));
    ex_result r = ex_sync_wait(ex_starts_on(sch, inner));
    expect_value_int(&r, 4);
    ex_result_destroy(&r);
    cr_expect_eq(atomic_load(&y.allocs), 1, "inner write_env: from Y");
    cr_expect_eq(atomic_load(&x.allocs), 0, "inner write_env: nothing from the pool's allocator");
    /* Y written outside starts_on */
    r = ex_sync_wait(ex_write_env(pipeline_on(sch, 1), &ex_key_get_allocator, ex_alloc_value(&y.a)));
    expect_value_int(&r, 4);
    ex_result_destroy(&r);
    cr_expect_eq(atomic_load(&y.allocs), 2, "outer write_env: from Y");
    cr_expect_eq(atomic_load(&x.allocs), 0, "outer write_env: nothing from the pool's allocator");
    cr_expect_eq(atomic_load(&y.in_use), 0);
    destroy_pool(p);
    expect_no_leaks();
}

static ex_error bulk_count(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)v, (void)n;
    atomic_uint *hits = ctx;
    atomic_fetch_add(&hits[i], 1);
    return ex_ok();
}

Test(frame_allocators, pool_bulk_helpers_come_from_the_pool_allocator) {
    trk_alloc x;
    trk_init(&x, NULL, "X");
    ex_pool *p = make_pool(5, &x.a); /* 4 helpers > EX_BULK_INLINE_HELPERS */
    enum { SHAPE = 1000 };
    static atomic_uint hits[SHAPE];
    for (int i = 0; i < SHAPE; i++) atomic_init(&hits[i], 0);
    ex_result r = ex_sync_wait(ex_starts_on(ex_pool_scheduler(p), ex_bulk(ex_just(ex_int(5)), SHAPE, bulk_count, hits)));
    expect_value_int(&r, 5);
    ex_result_destroy(&r);
    for (int i = 0; i < SHAPE; i++) cr_assert_eq(atomic_load(&hits[i]), 1u, "index %d ran once", i);
    cr_expect_eq(atomic_load(&x.allocs), 1, "the extra helper items came from the pool's allocator (%ld)",
                 atomic_load(&x.allocs));
    cr_expect_eq(atomic_load(&x.in_use), 0);
    destroy_pool(p);
    expect_no_leaks();
}

/* ================================================ zero steady-state allocs */

#define STEADY_RUNS 100000
#define STEADY_WARMUP 10

/* Under valgrind (one thread at a time) 100,000 runs on a pool take 12-15 s
 * of the suite's 30 s, and timed out on a slow host: memcheck runs a fifth
 * of them (the plain and sanitizer suites run them all). */
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
static long steady_runs(void) { return RUNNING_ON_VALGRIND ? STEADY_RUNS / 5 : STEADY_RUNS; }
#else
static long steady_runs(void) { return STEADY_RUNS; }
#endif

typedef struct steady_rcv {
    ex_receiver_vtable vt;
    ex_env_pair pair;
    ex_env env;
    atomic_int done;
    int values, errors, stops;
    int64_t a, b;
    size_t n;
    pthread_mutex_t mu; /* the test thread sleeps on cv while a pool runs the work */
    pthread_cond_t cv;
} steady_rcv;

/* The completion's last access to the receiver is under mu. */
static void st_done(steady_rcv *r) {
    pthread_mutex_lock(&r->mu);
    atomic_store_explicit(&r->done, 1, memory_order_release);
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mu);
}

static bool st_wait(steady_rcv *r) {
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += (time_t)WAIT_LIMIT_S;
    bool ok = true;
    pthread_mutex_lock(&r->mu);
    while (ok && !atomic_load_explicit(&r->done, memory_order_acquire))
        ok = pthread_cond_timedwait(&r->cv, &r->mu, &dl) == 0 || atomic_load(&r->done);
    pthread_mutex_unlock(&r->mu);
    return ok;
}

static void st_value(void *self, const ex_value *v, size_t n) {
    steady_rcv *r = self;
    r->values++;
    r->n = n;
    if (n == 2) r->a = v[0].as.i, r->b = v[1].as.i;
    st_done(r);
}
static void st_error(void *self, ex_error e) {
    (void)e;
    steady_rcv *r = self;
    r->errors++;
    st_done(r);
}
static void st_stopped(void *self) {
    steady_rcv *r = self;
    r->stops++;
    st_done(r);
}
static ex_env st_env(void *self) { return ((steady_rcv *)self)->env; }

static ex_error ret1(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    out[0] = ex_int(1);
    return ex_ok();
}
static ex_error ret2(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n;
    out[0] = ex_int(2);
    return ex_ok();
}

typedef struct steady_result {
    long bad_runs;
    long run_at_first_bad;
    long default_allocs, env_allocs;
} steady_result;

/* Connects s into caller storage, starts it, waits for it (driving loop if
 * given), destroys the operation; steady_runs() times.  Counts allocations
 * (default: the tracker installed as default; env: the environment's) after
 * the warm-up. */
static steady_result run_steady(const ex_sender *s, steady_rcv *rc, ex_run_loop *loop, trk_alloc *dflt, trk_alloc *enva) {
    steady_result res = { 0, -1, 0, 0 };
    size_t size = ex_sender_op_size(s), align = ex_sender_op_align(s);
    if (align < sizeof(void *)) align = sizeof(void *);
    void *storage = NULL;
    cr_assert_eq(posix_memalign(&storage, align, size), 0);
    ex_receiver r = { &rc->vt, rc };
    long d0 = 0, e0 = 0, t0 = 0;
    long runs = steady_runs();
    for (long run = 0; run < runs; run++) {
        if (run == STEADY_WARMUP) {
            d0 = atomic_load(&dflt->allocs);
            e0 = atomic_load(&enva->allocs);
            t0 = test_alloc_count();
            atomic_store(&dflt->armed, 1);
            atomic_store(&enva->armed, 1);
        }
        atomic_store_explicit(&rc->done, 0, memory_order_relaxed);
        rc->values = rc->errors = rc->stops = 0;
        rc->a = rc->b = 0;
        ex_operation *op = NULL;
        ex_error e = ex_connect(s, r, storage, size, &op);
        cr_assert_eq(e.code, 0, "run %ld: connect: %s", run, e.msg ? e.msg : "");
        ex_start(op);
        if (loop) {
            double deadline = test_now_s() + WAIT_LIMIT_S;
            unsigned idle = 0;
            while (!atomic_load_explicit(&rc->done, memory_order_acquire)) {
                if (ex_run_loop_run_one(loop)) continue;
                if (++idle % 1024 == 0) cr_assert_lt(test_now_s(), deadline, "run %ld: the pipeline did not complete", run);
            }
        } else {
            cr_assert(st_wait(rc), "run %ld: the pipeline did not complete", run);
        }
        ex_operation_destroy(op);
        if (rc->values != 1 || rc->n != 2 || rc->a != 1 || rc->b != 2) {
            if (!res.bad_runs) res.run_at_first_bad = run;
            res.bad_runs++;
        }
    }
    atomic_store(&dflt->armed, 0);
    atomic_store(&enva->armed, 0);
    res.default_allocs = atomic_load(&dflt->allocs) - d0;
    res.env_allocs = atomic_load(&enva->allocs) - e0;
    long test_allocs = test_alloc_count() - t0;
    cr_expect_eq(test_allocs, res.default_allocs, "every default allocation went through the tracker");
    free(storage);
    return res;
}

static void steady_rcv_init(steady_rcv *rc) {
    memset(rc, 0, sizeof *rc);
    rc->vt.set_value = st_value;
    rc->vt.set_error = st_error;
    rc->vt.set_stopped = st_stopped;
    rc->vt.env = st_env;
    atomic_init(&rc->done, 0);
    pthread_mutex_init(&rc->mu, NULL);
    pthread_cond_init(&rc->cv, NULL);
}

static void steady_rcv_destroy(steady_rcv *rc) {
    pthread_cond_destroy(&rc->cv);
    pthread_mutex_destroy(&rc->mu);
}

static ex_sender *steady_pipeline(ex_scheduler sch) {
    return ex_when_all(ex_then(ex_schedule(sch), ret1, NULL, EX_SIG0, EX_SIG(EX_T_INT)),
                       ex_then(ex_schedule(sch), ret2, NULL, EX_SIG0, EX_SIG(EX_T_INT)));
}

static void steady_report(const steady_result *res, trk_alloc *dflt, trk_alloc *enva, const char *what) {
    cr_expect_eq(res->bad_runs, 0, "%s: %ld run(s) did not complete with (1, 2), first at run %ld", what, res->bad_runs,
                 res->run_at_first_bad);
    if (res->default_allocs) trk_dump(dflt, "default allocator");
    if (res->env_allocs) trk_dump(enva, "environment allocator");
    cr_expect_eq(res->default_allocs, 0, "%s: %ld allocation(s) from the default allocator in %ld steady runs (stacks on stderr)",
                 what, res->default_allocs, steady_runs() - STEADY_WARMUP);
    cr_expect_eq(res->env_allocs, 0, "%s: %ld allocation(s) from the environment's allocator in %ld steady runs (stacks on stderr)",
                 what, res->env_allocs, steady_runs() - STEADY_WARMUP);
}

Test(frame_allocators, zero_allocations_in_steady_state_on_a_run_loop) {
    trk_alloc dflt, y;
    trk_init(&dflt, &test_allocator, "default-tracker");
    trk_init(&y, NULL, "env-tracker");
    ex_set_default_allocator(&dflt.a);
    ex_run_loop loop;
    cr_assert_eq(ex_run_loop_init(&loop).code, 0);
    ex_sender *s = steady_pipeline(ex_run_loop_scheduler(&loop));
    cr_assert_eq(ex_sender_status(s).code, 0);
    steady_rcv rc;
    steady_rcv_init(&rc);
    /* The environment names an allocator: the operations would allocate from it. */
    ex_env_pair_init(&rc.pair, &ex_key_get_allocator, ex_alloc_value(&y.a), ex_env_empty());
    rc.env = ex_env_of_pair(&rc.pair);
    steady_result res = run_steady(s, &rc, &loop, &dflt, &y);
    steady_report(&res, &dflt, &y, "run_loop");
    steady_rcv_destroy(&rc);
    ex_sender_release(s);
    cr_assert_eq(ex_run_loop_destroy(&loop).code, 0);
    ex_set_default_allocator(&test_allocator);
    cr_expect_eq(atomic_load(&dflt.in_use), 0);
    expect_no_leaks();
}

Test(frame_allocators, zero_allocations_in_steady_state_on_a_pool) {
    trk_alloc dflt, x;
    trk_init(&dflt, &test_allocator, "default-tracker");
    trk_init(&x, NULL, "pool-tracker");
    ex_set_default_allocator(&dflt.a);
    ex_pool *p = make_pool(2, &x.a);
    ex_scheduler sch = ex_pool_scheduler(p);
    ex_sender *s = steady_pipeline(sch);
    cr_assert_eq(ex_sender_status(s).code, 0);
    steady_rcv rc;
    steady_rcv_init(&rc);
    /* The environment's scheduler is the pool: its allocator is X. */
    ex_env_pair_init(&rc.pair, &ex_key_get_scheduler, ex_sched_value(sch), ex_env_empty());
    rc.env = ex_env_of_pair(&rc.pair);
    cr_assert_eq(ex_get_allocator(rc.env), &x.a);
    steady_result res = run_steady(s, &rc, NULL, &dflt, &x);
    steady_report(&res, &dflt, &x, "pool");
    steady_rcv_destroy(&rc);
    ex_sender_release(s);
    destroy_pool(p);
    ex_set_default_allocator(&test_allocator);
    cr_expect_eq(atomic_load(&dflt.in_use), 0);
    expect_no_leaks();
}

/* ============================================================ OOM sweeps */

#define MAX_K 400

typedef enum sweep_mode { AS_DEFAULT, AS_CHAIN } sweep_mode;

typedef ex_sender *(*sweep_build)(void *ctx);
/* Checks a result that is not EX_ENOMEM.  failed: an allocation failed. */
typedef void (*sweep_check)(const ex_result *r, void *ctx, long k, bool failed);

/* For k = 1, 2, ...: fail allocation k of a fault allocator over the test
 * allocator, installed as the default or as the chain's allocator; the run
 * ends with EX_ENOMEM (an allocation failed) or the correct result, and
 * leaks nothing.  Stops at the first k where no allocation failed. */
static long sweep(const char *name, sweep_mode mode, sweep_build build, sweep_check check, void *ctx) {
    long hits = 0, k;
    long base = test_stats.in_use; /* e.g. a pool made before the sweep */
    for (k = 1; k <= MAX_K; k++) {
        ex_fault_allocator f;
        ex_fault_allocator_init(&f, &test_allocator);
        const ex_allocator *fa = ex_fault_allocator_get(&f);
        ex_fault_allocator_fail_nth(&f, (uint64_t)k);
        ex_sender *s;
        if (mode == AS_DEFAULT) {
            ex_set_default_allocator(fa);
            s = build(ctx);
        } else {
            s = ex_write_env(build(ctx), &ex_key_get_allocator, ex_alloc_value(fa));
        }
        ex_result r = ex_sync_wait(s);
        ex_set_default_allocator(&test_allocator);
        ex_alloc_stats fs = stats_of(fa);
        cr_assert_leq(fs.failures, 1u, "%s, k=%ld: only one allocation fails", name, k);
        bool failed = fs.failures == 1;
        if (r.disposition == EX_DISP_ERROR && r.error.code == EX_ENOMEM) {
            cr_assert(failed, "%s, k=%ld: EX_ENOMEM without a failed allocation (%s)", name, k,
                      r.error.msg ? r.error.msg : "");
            cr_assert_not_null(r.error.msg, "%s, k=%ld", name, k);
        } else {
            check(&r, ctx, k, failed);
        }
        ex_result_destroy(&r);
        fs = stats_of(fa);
        cr_assert_eq(fs.allocations, fs.frees, "%s, k=%ld: %llu allocation(s) from the fault allocator, %llu free(s)", name,
                     k, (unsigned long long)fs.allocations, (unsigned long long)fs.frees);
        cr_assert_eq(fs.bytes_in_use, 0u, "%s, k=%ld", name, k);
        cr_assert_eq(test_stats.in_use, base, "%s, k=%ld: leaked %ld block(s)", name, k, test_stats.in_use - base);
        if (!failed) break;
        hits++;
    }
    cr_assert_leq(k, MAX_K, "%s: the sweep did not reach a run without failures", name);
    cr_assert_gt(hits, 0, "%s: no run hit an allocation failure", name);
    return hits;
}

static void check_value_int(const ex_result *r, int64_t want, const char *name, long k) {
    cr_assert_eq(r->disposition, EX_DISP_VALUE, "%s, k=%ld: expected EX_ENOMEM or the value, got disposition %d (%d: %s)",
                 name, k, r->disposition, r->error.code, r->error.msg ? r->error.msg : "");
    cr_assert_eq(r->n, 1, "%s, k=%ld", name, k);
    cr_assert_eq(r->values[0].type, EX_T_INT, "%s, k=%ld", name, k);
    cr_assert_eq(r->values[0].as.i, want, "%s, k=%ld: got %lld", name, k, (long long)r->values[0].as.i);
}

/* ---- let_value chain of 3 */

static ex_sender *build_let3(void *ctx) {
    (void)ctx;
    ex_sender *s = ex_just(ex_int(1));
    s = ex_let_value(s, let_plus1, NULL, EX_SIG(EX_T_INT));
    s = ex_let_value(s, let_plus3, NULL, EX_SIG(EX_T_INT));
    return ex_let_value(s, let_plus1, NULL, EX_SIG(EX_T_INT));
}

static void check_let3(const ex_result *r, void *ctx, long k, bool failed) {
    (void)ctx, (void)failed;
    check_value_int(r, 6, "let_value chain", k);
}

Test(frame_allocators, oom_sweep_let_value_chain_fault_as_default) {
    long hits = sweep("let_value chain (default)", AS_DEFAULT, build_let3, check_let3, NULL);
    cr_expect_geq(hits, 6, "senders and inner operations were all swept (%ld)", hits);
    expect_no_leaks();
}

Test(frame_allocators, oom_sweep_let_value_chain_fault_as_chain_allocator) {
    long hits = sweep("let_value chain (chain)", AS_CHAIN, build_let3, check_let3, NULL);
    cr_expect_eq(hits, 3, "the chain allocator serves exactly the three inner operations (%ld)", hits);
    expect_no_leaks();
}

/* ---- when_all where one child errors */

static ex_error fail_user(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)in, (void)n, (void)out;
    return ex_err(EX_EUSER + 7, "fail_user");
}

static ex_sender *build_when_all_error(void *ctx) {
    (void)ctx;
    static const ex_value inner[2] = { { EX_T_INT, { .i = 1 } }, { EX_T_INT, { .i = 2 } } };
    ex_tuple t = { 0, 2, inner };
    ex_sender *a = ex_just(ex_tuple_value(&t)); /* when_all copies its tuple with the env's allocator */
    ex_sender *b = ex_let_value(ex_just(ex_int(1)), let_plus3, NULL, EX_SIG(EX_T_INT));
    ex_sender *c = ex_then(ex_just(ex_int(3)), fail_user, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    return ex_when_all(a, b, c);
}

static void check_when_all_error(const ex_result *r, void *ctx, long k, bool failed) {
    (void)ctx, (void)failed;
    cr_assert_eq(r->disposition, EX_DISP_ERROR, "when_all, k=%ld: expected an error, got disposition %d", k,
                 r->disposition);
    cr_assert_eq(r->error.code, EX_EUSER + 7, "when_all, k=%ld: expected the child's error, got %d (%s)", k,
                 r->error.code, r->error.msg ? r->error.msg : "");
}

Test(frame_allocators, oom_sweep_when_all_with_an_erroring_child) {
    sweep("when_all error (default)", AS_DEFAULT, build_when_all_error, check_when_all_error, NULL);
    long hits = sweep("when_all error (chain)", AS_CHAIN, build_when_all_error, check_when_all_error, NULL);
    cr_expect_geq(hits, 2, "the tuple copy and the inner operation come from the chain allocator (%ld)", hits);
    expect_no_leaks();
}

/* ---- split with 3 consumers */

static ex_error sum3(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + in[1].as.i + in[2].as.i);
    return ex_ok();
}

static ex_sender *build_split3(void *ctx) {
    (void)ctx;
    ex_sender *sp = ex_split(ex_let_value(ex_just(ex_int(20)), let_plus1, NULL, EX_SIG(EX_T_INT)));
    ex_sender *w = ex_when_all(ex_then(ex_sender_retain(sp), plus1, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT)),
                               ex_sender_retain(sp), ex_let_value(sp, let_plus1, NULL, EX_SIG(EX_T_INT)));
    return ex_then(w, sum3, NULL, EX_SIG(EX_T_INT, EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT));
}

static void check_split3(const ex_result *r, void *ctx, long k, bool failed) {
    (void)ctx, (void)failed;
    check_value_int(r, 22 + 21 + 22, "split", k);
}

Test(frame_allocators, oom_sweep_split_with_three_consumers) {
    sweep("split (default)", AS_DEFAULT, build_split3, check_split3, NULL);
    sweep("split (chain)", AS_CHAIN, build_split3, check_split3, NULL);
    expect_no_leaks();
}

/* ---- bulk on a pool */

typedef struct bulk_ctx {
    ex_pool *pool;
    atomic_uint hits[600];
} bulk_ctx;

static ex_sender *build_bulk(void *v) {
    bulk_ctx *c = v;
    for (int i = 0; i < 600; i++) atomic_store(&c->hits[i], 0);
    ex_sender *s = ex_then(ex_schedule(ex_pool_scheduler(c->pool)), ret1, NULL, EX_SIG0, EX_SIG(EX_T_INT));
    s = ex_bulk(s, 600, bulk_count, c->hits);
    return ex_let_value(s, let_plus1, NULL, EX_SIG(EX_T_INT));
}

static void check_bulk(const ex_result *r, void *v, long k, bool failed) {
    bulk_ctx *c = v;
    (void)failed;
    check_value_int(r, 2, "bulk", k);
    for (int i = 0; i < 600; i++) cr_assert_eq(atomic_load(&c->hits[i]), 1u, "bulk, k=%ld: index %d ran once", k, i);
}

static void bulk_sweeps(unsigned threads) {
    static bulk_ctx c;
    c.pool = make_pool(threads, NULL);
    char name[64];
    snprintf(name, sizeof name, "bulk on %u threads (default)", threads);
    sweep(name, AS_DEFAULT, build_bulk, check_bulk, &c);
    snprintf(name, sizeof name, "bulk on %u threads (chain)", threads);
    long hits = sweep(name, AS_CHAIN, build_bulk, check_bulk, &c);
    if (threads > EX_BULK_INLINE_HELPERS + 1)
        cr_expect_eq(hits, 2, "%s: the helper items and the inner operation (%ld)", name, hits);
    else
        cr_expect_eq(hits, 1, "%s: only the inner operation (%ld)", name, hits);
    destroy_pool(c.pool);
}

Test(frame_allocators, oom_sweep_bulk_on_three_threads) {
    bulk_sweeps(3);
    expect_no_leaks();
}

Test(frame_allocators, oom_sweep_bulk_on_five_threads_with_allocated_helpers) {
    bulk_sweeps(5);
    expect_no_leaks();
}

/* ---- ex_spawn into a counting scope, then join */

static atomic_long spawn_sum;

static ex_error spawn_add(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n, (void)out;
    atomic_fetch_add(&spawn_sum, in[0].as.i);
    return ex_ok();
}

static ex_sender *spawned_work(ex_scheduler sch, int64_t v) {
    ex_sender *s = ex_starts_on(sch, ex_let_value(ex_just(ex_int(v)), let_plus1, NULL, EX_SIG(EX_T_INT)));
    return ex_then(s, spawn_add, NULL, EX_SIG(EX_T_INT), EX_SIG0);
}

static void spawn_sweep(sweep_mode mode) {
    const char *name = mode == AS_DEFAULT ? "spawn (default)" : "spawn (chain)";
    ex_pool *p = make_pool(2, NULL);
    ex_scheduler sch = ex_pool_scheduler(p);
    long base = test_stats.in_use; /* the pool */
    long hits = 0, k;
    for (k = 1; k <= MAX_K; k++) {
        ex_counting_scope scope;
        cr_assert_eq(ex_counting_scope_init(&scope).code, 0);
        ex_scope_token tok = ex_counting_scope_token(&scope);
        atomic_store(&spawn_sum, 0);
        ex_fault_allocator f;
        ex_fault_allocator_init(&f, &test_allocator);
        const ex_allocator *fa = ex_fault_allocator_get(&f);
        ex_fault_allocator_fail_nth(&f, (uint64_t)k);
        ex_env_pair ep;
        ex_env_pair_init(&ep, &ex_key_get_allocator, ex_alloc_value(fa), ex_env_empty());
        if (mode == AS_DEFAULT) ex_set_default_allocator(fa);
        int refused = 0;
        long want = 0;
        for (int i = 0; i < 3; i++) {
            ex_sender *w = spawned_work(sch, 10 * (i + 1));
            ex_error e = mode == AS_DEFAULT ? ex_spawn(w, tok) : ex_spawn_env(w, tok, ex_env_of_pair(&ep));
            if (e.code) {
                cr_assert_eq(e.code, EX_ENOMEM, "%s, k=%ld: spawn %d failed with %d (%s)", name, k, i, e.code,
                             e.msg ? e.msg : "");
                refused++;
            } else {
                want += 10 * (i + 1) + 1;
            }
        }
        ex_result r = ex_sync_wait(ex_counting_scope_join(&scope));
        ex_set_default_allocator(&test_allocator);
        ex_alloc_stats fs = stats_of(fa);
        cr_assert_leq(fs.failures, 1u, "%s, k=%ld", name, k);
        bool failed = fs.failures == 1;
        bool join_failed = r.disposition == EX_DISP_ERROR && r.error.code == EX_ENOMEM;
        if (r.disposition != EX_DISP_VALUE)
            cr_assert(join_failed, "%s, k=%ld: join completed with disposition %d (%d: %s)", name, k, r.disposition,
                      r.error.code, r.error.msg ? r.error.msg : "");
        ex_result_destroy(&r);
        /* The join sender itself may have failed to build: join again (with
         * the test allocator) so nothing runs any more. */
        r = ex_sync_wait(ex_counting_scope_join(&scope));
        cr_assert(r.disposition == EX_DISP_VALUE || (r.disposition == EX_DISP_ERROR && r.error.code == EX_ENOMEM),
                  "%s, k=%ld: second join: disposition %d", name, k, r.disposition);
        ex_result_destroy(&r);
        cr_assert_eq(ex_counting_scope_destroy(&scope).code, 0, "%s, k=%ld: the scope is idle", name, k);
        if (!failed) {
            cr_assert_eq(refused, 0, "%s, k=%ld", name, k);
            cr_assert(!join_failed, "%s, k=%ld: EX_ENOMEM without a failed allocation", name, k);
            cr_assert_eq(atomic_load(&spawn_sum), want, "%s, k=%ld: every spawned sender ran", name, k);
        } else {
            cr_assert(refused == 1 || join_failed, "%s, k=%ld: the failed allocation shows (refused spawn or join error)",
                      name, k);
            if (!join_failed) cr_assert_eq(atomic_load(&spawn_sum), want, "%s, k=%ld: the accepted spawns ran", name, k);
            else cr_assert_leq(atomic_load(&spawn_sum), want, "%s, k=%ld", name, k);
        }
        fs = stats_of(fa);
        cr_assert_eq(fs.allocations, fs.frees, "%s, k=%ld: fault allocator not balanced", name, k);
        cr_assert_eq(test_stats.in_use, base, "%s, k=%ld: leaked %ld block(s)", name, k, test_stats.in_use - base);
        if (!failed) break;
        hits++;
    }
    cr_assert_leq(k, MAX_K, "%s: the sweep did not reach a run without failures", name);
    cr_assert_gt(hits, 0, "%s: no run hit an allocation failure", name);
    if (mode == AS_CHAIN) cr_expect_eq(hits, 6, "%s: three spawn blocks and three inner operations (%ld)", name, hits);
    destroy_pool(p);
}

Test(frame_allocators, oom_sweep_spawn_into_counting_scope_fault_as_default) {
    spawn_sweep(AS_DEFAULT);
    expect_no_leaks();
}

Test(frame_allocators, oom_sweep_spawn_into_counting_scope_fault_as_chain_allocator) {
    spawn_sweep(AS_CHAIN);
    expect_no_leaks();
}
