/* fib.c - recursive fork-join through when_all + let_value on the pool.
 *
 *   fib(n) = n < 2 ? just(n)
 *          : let_value(just(n), n -> when_all(starts_on(pool, fib(n-1)), fib(n-2)) | then(+))
 *
 * Each level is built when it runs (inside let_value), so the sender tree
 * is never larger than the recursion in flight; when_all forks, the pool's
 * work stealing spreads the forks over the workers.  With a cutoff, levels
 * below it are computed serially inside one then.
 *
 *   build/examples/fib [n] [cutoff]      (default 25, no cutoff) */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cexec/cexec.h>

typedef struct fib_ctx {
    ex_scheduler pool;
    int64_t cutoff;  /* below this, compute serially */
} fib_ctx;

static int64_t fib_serial(int64_t n) { return n < 2 ? n : fib_serial(n - 1) + fib_serial(n - 2); }

static ex_error add(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(in[0].as.i + in[1].as.i);
    return ex_ok();
}

static ex_error serial(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)ctx, (void)n;
    out[0] = ex_int(fib_serial(in[0].as.i));
    return ex_ok();
}

static ex_sender *fib(fib_ctx *c, int64_t n);

/* let_value's function: the sender for fib(n), built when n is known. */
static ex_sender *fib_step(void *ctx, const ex_value *in, size_t n) {
    (void)n;
    fib_ctx *c = ctx;
    int64_t k = in[0].as.i;
    return ex_then(ex_when_all(ex_starts_on(c->pool, fib(c, k - 1)), fib(c, k - 2)), add, NULL,
                   EX_SIG(EX_T_INT, EX_T_INT), EX_SIG(EX_T_INT));
}

static ex_sender *fib(fib_ctx *c, int64_t n) {
    if (n < 2) return ex_just(ex_int(n));
    if (n < c->cutoff) return ex_then(ex_just(ex_int(n)), serial, NULL, EX_SIG(EX_T_INT), EX_SIG(EX_T_INT));
    return ex_let_value(ex_just(ex_int(n)), fib_step, c, EX_SIG(EX_T_INT));
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 25;
    int64_t cutoff = argc > 2 ? atoll(argv[2]) : 0;
    ex_pool *pool;
    ex_error e = ex_pool_create(NULL, &pool);
    if (e.code) {
        fprintf(stderr, "fib: %s\n", e.msg);
        return 1;
    }
    fib_ctx c = { ex_pool_scheduler(pool), cutoff };
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ex_result r = ex_sync_wait(ex_starts_on(c.pool, fib(&c, n)));
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
    return ex_pool_destroy(pool).code || status;
}
