/* SPDX-License-Identifier: MIT */
/* requests.c - a compute service's request path: requests of a few tens of
 * microseconds arrive one at a time, with an idle gap before each, and the
 * serving thread waits for each answer with ex_sync_wait.
 *
 * With the pool's default configuration the serving thread lends itself
 * to the pool while it waits: it runs the request itself and no parked
 * worker has to be woken.  The same requests on a pool without lent slots
 * (lend_slots < 0) hop to a worker and back, which after an idle gap
 * includes waking it.  Prints the latency percentiles of both.
 *
 *   build/examples/requests [requests] [gap_us] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cexec/cexec.h>

enum { WORK = 4000 };  /* elements per request: a few tens of microseconds */

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e6 + (double)t.tv_nsec / 1e3;
}

static void sleep_us(long us) {
    struct timespec t = { us / 1000000, (us % 1000000) * 1000 };
    while (nanosleep(&t, &t)) {}
}

/* The request: a small numeric kernel on its input. */
static ex_error handle(void *ctx, const ex_value *in, size_t n, ex_value *out) {
    (void)in, (void)n;
    const double *x = ctx;
    double s = 0;
    for (int i = 0; i < WORK; i++) s += sqrt(x[i]);
    out[0] = ex_double(s);
    return ex_ok();
}

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Serves `count` requests on a pool made from cfg; fills lat[] (us). */
static int serve(const ex_pool_config *cfg, const double *input, int count, long gap_us, double *lat) {
    ex_pool *pool;
    ex_error e = ex_pool_create(cfg, &pool);
    if (e.code) {
        fprintf(stderr, "requests: %s\n", e.msg);
        return 1;
    }
    ex_scheduler sch = ex_pool_scheduler(pool);
    for (int i = 0; i < count; i++) {
        sleep_us(gap_us);
        double t0 = now_us();
        ex_result r = ex_sync_wait(ex_then(ex_schedule(sch), handle, (void *)input, EX_SIG0, EX_SIG(EX_T_DOUBLE)));
        lat[i] = now_us() - t0;
        if (r.disposition != EX_DISP_VALUE) {
            fprintf(stderr, "requests: request %d failed\n", i);
            ex_pool_destroy(pool);
            return 1;
        }
        ex_result_destroy(&r);
    }
    return ex_pool_destroy(pool).code != 0;
}

static void report(const char *what, double *lat, int count) {
    qsort(lat, (size_t)count, sizeof *lat, by_value);
    printf("%-28s p50 %8.1f us   p99 %8.1f us\n", what, lat[count / 2], lat[count * 99 / 100]);
}

int main(int argc, char **argv) {
    int count = argc > 1 ? atoi(argv[1]) : 200;
    long gap_us = argc > 2 ? atol(argv[2]) : 1000;
    if (count < 1 || count > 1000000 || gap_us < 0) {
        fprintf(stderr, "usage: requests [requests 1..1000000] [gap_us >= 0]\n");
        return 2;
    }
    double *input = malloc(WORK * sizeof *input);
    double *lat = malloc((size_t)count * sizeof *lat);
    if (!input || !lat) {
        fprintf(stderr, "requests: out of memory\n");
        return 1;
    }
    for (int i = 0; i < WORK; i++) input[i] = i;

    printf("%d requests of %d square roots, %ld us idle before each\n", count, WORK, gap_us);
    ex_pool_config lending = { 0 };  /* the default: as many lent slots as workers */
    int status = serve(&lending, input, count, gap_us, lat);
    if (!status) report("the waiting thread works:", lat, count);
    ex_pool_config hop = { .lend_slots = -1 };
    if (!status) status = serve(&hop, input, count, gap_us, lat);
    if (!status) report("a worker does it (no lend):", lat, count);
    free(lat);
    free(input);
    return status;
}
