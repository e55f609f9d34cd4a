/* helpers.h - shared test fixtures: a counting / fault-injecting allocator
 * installed as the default for every test, a recording receiver, and the
 * leak check every test ends with. */
#ifndef CEXEC_TEST_HELPERS_H
#define CEXEC_TEST_HELPERS_H

#include <criterion/criterion.h>
#include <cexec/cexec.h>

/* ---------------------------------------------------- counting allocator */

typedef struct test_alloc_stats {
    long allocs, frees, failed;
    long in_use;        /* blocks not yet freed */
    long fail_at;       /* fail the allocation with this 1-based number (0: never) */
} test_alloc_stats;

/* The allocator all tests install as the default (see TEST_SUITE_INIT).
 * Thread-safe. */
extern ex_allocator test_allocator;
extern test_alloc_stats test_stats;

void test_alloc_reset(void);          /* zero the counters, no failure */
void test_alloc_fail_at(long nth);    /* fail allocation number nth from now on (1-based) */
long test_alloc_count(void);          /* allocations so far (including failed) */

/* Suite init/fini: install test_allocator as the default. */
void test_setup(void);
void test_teardown(void);

/* Asserts that every block from test_allocator was freed and, in sanitizer
 * builds, that LeakSanitizer finds nothing.  Call at the end of a test body
 * (assertions in .fini do not fail a test). */
void expect_no_leaks(void);

/* ------------------------------------------------------ recording receiver */

typedef struct rec {
    ex_receiver_vtable vt;
    int values, errors, stops;   /* completion counts (exactly one expected) */
    size_t n;
    ex_value v[EX_MAX_ARITY];    /* shallow copy of the last values */
    ex_error err;
    const void *thread;          /* exi-style thread marker of the completion */
    ex_env env;                  /* what env() answers */
    ex_env_pair pair;            /* storage for rec_with_* helpers */
    ex_stop_source stop;
} rec;

void rec_init(rec *r);
ex_receiver rec_receiver(rec *r);
int rec_total(const rec *r);
/* Makes the receiver's env answer get_stop_token with its own source. */
void rec_with_stop(rec *r);
/* Makes the receiver's env answer get_scheduler with sch (and stop token if
 * rec_with_stop was called first it is kept as parent). */
void rec_with_scheduler(rec *r, ex_scheduler sch);
/* Address unique to the calling thread. */
const void *test_thread_id(void);

/* A recording receiver usable across threads: the rec fields are written
 * before `done` is published (seq_cst), so reading them after done != 0 is
 * race-free. */
#include <stdatomic.h>
typedef struct trec {
    rec r;
    ex_receiver_vtable vt;
    atomic_int done;
} trec;

void trec_init(trec *a);
ex_receiver trec_receiver(trec *a);

/* A recording receiver whose counters are atomic, for completions that may
 * happen on any thread; it also notes the pool worker and the thread that
 * completed it.  Its environment is empty until arec_with_stop. */
typedef struct arec {
    atomic_int total, values, errors, stops;
    ex_pool *pool;
    int worker;             /* ex_pool_current_worker(pool) at completion */
    const void *thread;     /* test_thread_id() at completion */
    size_t n;
    ex_value v[EX_MAX_ARITY];
    ex_error err;
    bool has_env;
    ex_env_pair pair;
    ex_stop_source stop;
} arec;

extern const ex_receiver_vtable arec_vt;
void arec_init(arec *r, ex_pool *p);
ex_receiver arec_receiver(arec *r);
/* The environment answers get_stop_token with the receiver's own source. */
void arec_with_stop(arec *r);

/* Connect s into heap storage, start, and return the operation (destroyed by
 * run_destroy).  Asserts connect succeeded. */
ex_operation *run_start(ex_sender *s, rec *r);
void run_destroy(ex_operation *op);

/* Monotonic clock in seconds, for bounded waits (never for timing asserts). */
double test_now_s(void);
/* Sleeps ms milliseconds (resumes after signals). */
void test_sleep_ms(long ms);

/* Assert helpers for results. */
void expect_value_int(ex_result *r, int64_t v);
void expect_error(ex_result *r, int code);

#define TEST_SUITE(name, secs) TestSuite(name, .init = test_setup, .fini = test_teardown, .timeout = secs)

#endif
