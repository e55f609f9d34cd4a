/* SPDX-License-Identifier: MIT */
/* jemalloc_fixtures.h - what the jemalloc_allocator suite's files share:
 * which build this is (sanitizer builds route the allocator to malloc and
 * link no private jemalloc), asking jemalloc which arena owns a block,
 * patterned blocks, the allocator and a pool's frame allocator made with
 * assertions, running a function once on each worker of a pool, and the
 * block shapes of the ownership tests. */
#ifndef CEXEC_TEST_JEMALLOC_FIXTURES_H
#define CEXEC_TEST_JEMALLOC_FIXTURES_H

#include "allocators/alloc_fixtures.h"

/* ----------------------------------------------- which build this is */

/* Sanitizer builds route the allocator to malloc and link no private
 * jemalloc: exi_je_mallctl must not even be referenced there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define JE_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define JE_SANITIZED 1
#endif
#endif

#define NO_ARENA 0xffffffffu /* arena not known or not observed */

#ifndef JE_SANITIZED
/* The private jemalloc's mallctl.  Weak: a plain build made with
 * CEXEC_JEMALLOC=malloc has no private jemalloc either, and then this is
 * NULL (the arena checks are skipped, the rest still runs). */
int exi_je_mallctl(const char *name, void *oldp, size_t *oldlenp, void *newp, size_t newlen) __attribute__((weak));
bool have_mallctl(void);
/* The jemalloc arena that owns p; NO_ARENA if jemalloc does not know p. */
unsigned arena_of(const void *p);
/* Whether arena_of can find a block of the allocator of this size and
 * alignment. */
bool lookup_works(size_t size, size_t align);
unsigned mallctl_unsigned(const char *name);
#endif

/* Whether this test run can ask jemalloc which arena owns a block. */
bool arenas_observable(void);

#define SKIP_UNLESS_ARENAS_OBSERVABLE()                                                                               \
    do {                                                                                                              \
        if (!arenas_observable()) {                                                                                   \
            expect_no_leaks();                                                                                        \
            cr_skip_test("this build routes the jemalloc allocator to malloc: arena ownership is not observable");   \
        }                                                                                                             \
    } while (0)

/* ------------------------------------------------------------ blocks */

#define N_ALIGNS 13 /* 1 .. 4096 */

/* Fills a block with the pattern of seed. */
void fill(void *p, size_t size, uint32_t seed);
/* Index of the first byte that differs from the pattern, or size. */
size_t first_bad(const void *p, size_t size, uint32_t seed);

ex_jemalloc_allocator *make_je(unsigned arenas);

/* The default frame allocator the pool gives its work. */
const ex_allocator *pool_frame_allocator(ex_pool *p);

/* ----------------------------------------------- once on each worker */

#define MAX_GANG 8

typedef void (*gang_fn)(void *arg, unsigned worker);

/* Runs fn(arg, i) once on each worker i of p (at most MAX_GANG); returns
 * when all are done. */
void on_each_worker(ex_pool *p, gang_fn fn, void *arg);

/* ---------------------------------- block shapes of the ownership tests */

#define OWN_K 48
size_t own_size(int k);
size_t own_align(int k);
uint32_t own_seed(unsigned w, int round, int k);

#endif
