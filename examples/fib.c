/* SPDX-License-Identifier: MIT */
/* fib.c - recursive fork-join through when_all + let_value on the pool.
 *
 *   F[k] = when_all(starts_on(pool, L[k-1]), L[k-2]) | then(+)
 *   L[k] = let_value(just(), () -> F[k])          (F[0] = just(0), F[1] = just(1))
 *
 * Senders are immutable, multi-shot recipes, so the recursion needs one
 * sender per k, built once and connected as often as the recursion asks:
 * running fib(n) builds no sender at all.  let_value makes the recursion
 * lazy: the operation of F[k] is connected (into storage from the
 * environment's allocator) only when L[k] runs, and freed when it completes,
 * so memory follows the recursion in flight, not fib(n).  The table keeps
 * every F[k] alive while fib runs, so L[k]'s function lends F[k]
 * (ex_let_value_borrowed) instead of handing out a new reference: no
 * reference count that every worker updates at every step.  when_all forks;
 * the pool's work stealing spreads the forks over the workers.  With a
 * cutoff, F[k] below it is one then computing fib(k) serially.
 *
 *   build/examples/fib [n] [cutoff]      (default 25, no cutoff) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cexec/cexec.h>

#define FIB_MAX 64

typedef struct fib_senders {
    ex_sender *f[FIB_MAX];   /* F[k] */
    ex_sender *l[FIB_MAX];   /* L[k] */
} fib_senders;

static int64_t fib_serial(int64_t n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

static ex_error add(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + in[1].as.i);
    return ex_ok();
}

static ex_error serial(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    out[0] = ex_int(fib_serial((int64_t)(intptr_t)ctx));
    return ex_ok();
}

/* L[k]'s function: lends F[k] (the table keeps it). */
static ex_sender *run_f(void *ctx, const ex_value *in, size_t n) {
    (void)in, (void)n;
    return ctx;
}

/* Builds F[0..n] and L[0..n].  Returns false if a sender is invalid. */
bool fib_build(fib_senders *t, ex_scheduler pool, int64_t n, int64_t cutoff);
bool fib_build(fib_senders *t, ex_scheduler pool, int64_t n, int64_t cutoff) {
    if (n < 1 || n >= FIB_MAX) return false;
    for (int64_t k = 0; k <= n; k++) {
        if (k < 2) t->f[k] = ex_just(ex_int(k));
        else if (k < cutoff)
            t->f[k] = ex_then(ex_just(), serial, (void *)(intptr_t)k, EX_SIG0, EX_SIG(EX_T_INT));
        else
            t->f[k] = ex_then(ex_when_all(ex_starts_on(pool, ex_sender_retain(t->l[k - 1])), ex_sender_retain(t->l[k - 2])),
                              add, NULL, EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT));
        t->l[k] = ex_let_value_borrowed(ex_just(), run_f, t->f[k], EX_SIG0);
        if (ex_sender_status(t->f[k]).code || ex_sender_status(t->l[k]).code) return false;
    }
    return true;
}

void fib_release(fib_senders *t, int64_t n);
void fib_release(fib_senders *t, int64_t n) {
    for (int64_t k = 0; k <= n && k < FIB_MAX; k++) {
        ex_sender_release(t->l[k]);
        ex_sender_release(t->f[k]);
    }
}

#ifndef CEXEC_EXAMPLE_NO_MAIN
int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 25;
    int64_t cutoff = argc > 2 ? atoll(argv[2]) : 0;
    if (n < 1 || n >= FIB_MAX) {
        fprintf(stderr, "fib: n must be in [1, %d)\n", FIB_MAX);
        return 2;
    }
    /* Operation blocks come and go at every fork: a per-thread recycling
     * pool serves them without touching malloc. */
    ex_recycling_allocator *frames;
    ex_error e = ex_recycling_allocator_create(NULL, &frames);
    if (e.code) {
        fprintf(stderr, "fib: %s\n", e.msg);
        return 1;
    }
    ex_pool_config cfg = { .allocator = ex_recycling_allocator_get(frames) };
    ex_pool *pool;
    e = ex_pool_create(&cfg, &pool);
    if (e.code) {
        fprintf(stderr, "fib: %s\n", e.msg);
        return 1;
    }
    fib_senders t = { { 0 }, { 0 } };
    if (!fib_build(&t, ex_pool_scheduler(pool), n, cutoff)) {
        fprintf(stderr, "fib: could not build the senders\n");
        return 1;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ex_result r = ex_sync_wait(ex_starts_on(ex_pool_scheduler(pool), ex_sender_retain(t.f[n])));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    int status = 0;
    if (r.disposition != EX_DISP_VALUE) {
        fprintf(stderr, "fib: failed: %s\n", r.disposition == EX_DISP_ERROR ? r.error.msg : "stopped");
        status = 1;
    } else if (r.values[0].as.i != fib_serial(n)) {
        fprintf(stderr, "fib: wrong result %lld\n", (long long)r.values[0].as.i);
        status = 1;
    } else {
        double ms = (double)(t1.tv_sec - t0.tv_sec) * 1e3 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e6;
        printf("fib(%lld) = %lld on %u workers in %.1f ms (cutoff %lld)\n", (long long)n, (long long)r.values[0].as.i,
               ex_pool_size(pool), ms, (long long)cutoff);
    }
    ex_result_destroy(&r);
    fib_release(&t, n);
    status |= ex_pool_destroy(pool).code != 0;
    if (getenv("FIB_STATS")) {
        ex_alloc_stats st;
        ex_allocator_stats(ex_recycling_allocator_get(frames), &st);
        printf("fib: frame allocator: %llu allocations, %llu frees, %llu bytes in use, peak %llu bytes from libc\n",
               (unsigned long long)st.allocations, (unsigned long long)st.frees, (unsigned long long)st.bytes_in_use,
               (unsigned long long)st.peak_bytes);
    }
    ex_recycling_allocator_destroy(frames);
    return status;
}
#endif
