/* SPDX-License-Identifier: MIT */
/* fanout.c - a fan-out over a run-time number of requests: one lookup
 * per key, each on the pool, and every answer collected by
 * ex_when_all_collect_n (ex_when_all stops at EX_MAX_ARITY values in
 * all).  The collect completes with one tuple: element i holds request
 * i's values.  Checks the sum of the answers.
 *
 *   build/examples/fanout [keys]      (default 10000) */
#include <stdio.h>
#include <stdlib.h>

#include <cexec/cexec.h>

/* The request: looks its key up (here: the key's square). */
static ex_error lookup(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    int64_t key = *(const int64_t *)ctx;
    out[0] = ex_int(key * key);
    return ex_ok();
}

/* Sums the answers of the n requests, or says why there are none. */
static int sum_answers(ex_sender **requests, size_t n, int64_t *sum) {
    ex_result r = ex_sync_wait(ex_when_all_collect_n(requests, n));
    if (r.disposition == EX_DISP_VALUE) {
        const ex_tuple *all = r.values[0].as.tuple;
        for (size_t i = 0; i < n; i++) *sum += all->v[i].as.tuple->v[0].as.i;
    }
    int status = r.disposition == EX_DISP_VALUE ? 0 : 1;
    if (status) fprintf(stderr, "fanout: %s\n", r.disposition == EX_DISP_ERROR ? r.error.msg : "stopped");
    ex_result_destroy(&r);
    return status;
}

int main(int argc, char **argv) {
    size_t n = argc > 1 ? strtoul(argv[1], NULL, 10) : 10000;
    int64_t *keys = malloc((n ? n : 1) * sizeof *keys);
    ex_sender **requests = malloc((n ? n : 1) * sizeof *requests);
    ex_pool *pool = NULL;
    if (!keys || !requests || ex_pool_create(NULL, &pool).code) {
        fprintf(stderr, "fanout: out of memory\n");
        free(keys);
        free(requests);
        return 1;
    }
    ex_scheduler sch = ex_pool_scheduler(pool);
    for (size_t i = 0; i < n; i++) {
        keys[i] = (int64_t)i;
        requests[i] = ex_starts_on(sch, ex_then(ex_just(), lookup, &keys[i], EX_SIG0, EX_SIG(EX_T_INT)));
    }
    int64_t sum = 0;
    int status = sum_answers(requests, n, &sum);
    int64_t want = 0;
    for (size_t i = 0; i < n; i++) want += (int64_t)i * (int64_t)i;
    if (!status && sum != want) {
        fprintf(stderr, "fanout: the answers add up to %lld, not %lld\n", (long long)sum, (long long)want);
        status = 1;
    }
    if (!status) printf("fanout: %zu requests, answers add up to %lld\n", n, (long long)sum);
    (void)ex_pool_destroy(pool);
    free(requests);
    free(keys);
    return status;
}
