/* SPDX-License-Identifier: MIT */
/* test_alloc.c - see test_alloc.h. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/test_alloc.h"

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_LSAN 1
#endif
#endif
#ifdef HAVE_LSAN
#include <sanitizer/lsan_interface.h>

/* A request malloc cannot meet (a size near SIZE_MAX, where cexec must
 * report EX_ENOMEM) returns NULL under ASan too, as in plain builds,
 * instead of aborting the test (ASAN_OPTIONS still overrides this). */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
#endif

/* posix_memalign with the alignment and size it insists on. */
static void *aligned_block(size_t size, size_t align) {
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1)) return NULL;
    return p;
}

/* ------------------------------------------- the suite's default allocator */

test_alloc_stats test_stats;
static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;

/* With CEXEC_OOM_TALLY=path, every injected failure appends one byte to
 * the file (tests run in separate processes): `wc -c path` after a run is
 * the number of out-of-memory points the suite went through. */
static void tally_injected_failure(void) {
    const char *path = getenv("CEXEC_OOM_TALLY");
    if (!path) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return;
    ssize_t w = write(fd, "x", 1);
    (void)w;
    close(fd);
}

static void *t_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    pthread_mutex_lock(&stats_mu);
    long nth = ++test_stats.allocs;
    bool fail = test_stats.fail_at && nth == test_stats.fail_at;
    if (fail) test_stats.failed++;
    pthread_mutex_unlock(&stats_mu);
    if (fail) {
        tally_injected_failure();
        return NULL;
    }
    void *p = aligned_block(size, align);
    if (!p) return NULL;
    pthread_mutex_lock(&stats_mu);
    test_stats.in_use++;
    pthread_mutex_unlock(&stats_mu);
    return p;
}

static void t_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx, (void)size, (void)align;
    free(p);
    pthread_mutex_lock(&stats_mu);
    test_stats.frees++;
    test_stats.in_use--;
    pthread_mutex_unlock(&stats_mu);
}

ex_allocator test_allocator = { t_allocate, t_deallocate, NULL, "test", NULL };

void test_alloc_reset(void) {
    pthread_mutex_lock(&stats_mu);
    long in_use = test_stats.in_use;
    memset(&test_stats, 0, sizeof test_stats);
    test_stats.in_use = in_use;
    pthread_mutex_unlock(&stats_mu);
}

void test_alloc_fail_at(long nth) {
    pthread_mutex_lock(&stats_mu);
    test_stats.fail_at = test_stats.allocs + nth;
    pthread_mutex_unlock(&stats_mu);
}

long test_alloc_count(void) {
    pthread_mutex_lock(&stats_mu);
    long n = test_stats.allocs;
    pthread_mutex_unlock(&stats_mu);
    return n;
}

void test_setup(void) {
    memset(&test_stats, 0, sizeof test_stats);
    ex_set_default_allocator(&test_allocator);
}

void test_teardown(void) { ex_set_default_allocator(NULL); }

void expect_no_leaks(void) {
    pthread_mutex_lock(&stats_mu);
    long in_use = test_stats.in_use;
    pthread_mutex_unlock(&stats_mu);
    cr_expect_eq(in_use, 0, "%ld block(s) from the test allocator were not freed", in_use);
#ifdef HAVE_LSAN
    cr_expect_eq(__lsan_do_recoverable_leak_check(), 0, "LeakSanitizer found leaks");
#endif
}

/* ------------------------------------------ a counting allocator you own */

static bool ca_should_fail(cnt_alloc *a) {
    long nth = atomic_fetch_add(&a->calls, 1) + 1;
    long at = atomic_load(&a->fail_at);
    if (at && nth == at) return true;
    long left = atomic_load(&a->fail_next);
    while (left > 0)
        if (atomic_compare_exchange_weak(&a->fail_next, &left, left - 1)) return true;
    return false;
}

static void *ca_allocate(void *ctx, size_t size, size_t align) {
    cnt_alloc *a = ctx;
    if (ca_should_fail(a)) {
        atomic_fetch_add(&a->failed, 1);
        return NULL;
    }
    void *p = a->under ? a->under->allocate(a->under->ctx, size, align) : aligned_block(size, align);
    if (!p) return NULL;
    atomic_fetch_add(&a->allocs, 1);
    atomic_fetch_add(&a->in_use, 1);
    atomic_fetch_add(&a->bytes, (long)size);
    a->last_p = p;
    a->last_size = size;
    a->last_align = align;
    return p;
}

static void ca_deallocate(void *ctx, void *p, size_t size, size_t align) {
    cnt_alloc *a = ctx;
    a->freed_p = p;
    a->freed_size = size;
    a->freed_align = align;
    if (a->scribble) memset(p, 0xA5, size);
    if (a->under) a->under->deallocate(a->under->ctx, p, size, align);
    else free(p);
    atomic_fetch_add(&a->frees, 1);
    atomic_fetch_sub(&a->in_use, 1);
    atomic_fetch_sub(&a->bytes, (long)size);
}

void cnt_alloc_init_over(cnt_alloc *a, const ex_allocator *under, const char *name) {
    memset(a, 0, sizeof *a);
    atomic_init(&a->calls, 0);
    atomic_init(&a->allocs, 0);
    atomic_init(&a->frees, 0);
    atomic_init(&a->in_use, 0);
    atomic_init(&a->bytes, 0);
    atomic_init(&a->failed, 0);
    atomic_init(&a->fail_at, 0);
    atomic_init(&a->fail_next, 0);
    a->under = under;
    a->base.allocate = ca_allocate;
    a->base.deallocate = ca_deallocate;
    a->base.ctx = a;
    a->base.name = name;
}

void cnt_alloc_init(cnt_alloc *a) { cnt_alloc_init_over(a, NULL, "test.counting"); }

void cnt_alloc_fail_nth(cnt_alloc *a, long nth) { atomic_store(&a->fail_at, atomic_load(&a->calls) + nth); }

void cnt_alloc_expect_balanced(cnt_alloc *a, const char *what) {
    long allocs = atomic_load(&a->allocs), frees = atomic_load(&a->frees);
    cr_expect_eq(allocs, frees, "%s: %ld block(s) given, %ld freed", what, allocs, frees);
    cr_expect_eq(atomic_load(&a->bytes), 0, "%s: %ld byte(s) not freed", what, atomic_load(&a->bytes));
}

/* ----------------------------------------------- a guard-page allocator */

static size_t page_round(size_t size) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (size + page - 1) / page * page;
}

static void *guard_allocate(void *ctx, size_t size, size_t align) {
    (void)align;  /* pages are aligned enough */
    guard_alloc *g = ctx;
    if (g->n == GUARD_MAX) return NULL;
    void *p = mmap(NULL, page_round(size), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return NULL;
    g->maps[g->n] = p;
    g->lens[g->n++] = page_round(size);
    return p;
}

/* Kept mapped but inaccessible until guard_alloc_fini: any late access faults. */
static void guard_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx, (void)align;
    mprotect(p, page_round(size), PROT_NONE);
}

void guard_alloc_init(guard_alloc *g) {
    memset(g, 0, sizeof *g);
    g->base = (ex_allocator){ guard_allocate, guard_deallocate, g, "test.guard", NULL };
}

void guard_alloc_fini(guard_alloc *g) {
    for (int i = 0; i < g->n; i++) munmap(g->maps[i], g->lens[i]);
    g->n = 0;
}
