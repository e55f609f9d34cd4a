/* SPDX-License-Identifier: MIT */
/* arenas.c - built against an installed cexec by scripts/check-install.sh:
 * runs a scan on a pool whose frames come from the jemalloc allocator, and
 * prints whether that allocator has its jemalloc arenas ("arenas") or fell
 * back to malloc ("malloc"). */
#include <stdio.h>
#include <stdlib.h>

#include <cexec/cexec.h>

int main(void) {
    enum { N = 100000 };
    double *in = malloc(N * sizeof *in), *out = malloc(N * sizeof *out);
    if (!in || !out) return 1;
    for (int i = 0; i < N; i++) in[i] = 1.0;
    ex_pool *pool;
    ex_error e = ex_pool_create(NULL, &pool);
    if (e.code) {
        fprintf(stderr, "arenas: %s\n", e.msg);
        return 1;
    }
    ex_result r = ex_sync_wait(ex_inclusive_scan_f64(ex_pool_scheduler(pool), in, out, N));
    int ok = r.disposition == EX_DISP_VALUE && out[N - 1] == (double)N;
    ex_result_destroy(&r);
    ok &= ex_pool_destroy(pool).code == 0;
    printf("%s\n", ex_jemalloc_is_malloc() ? "malloc" : "arenas");
    free(in);
    free(out);
    return ok ? 0 : 1;
}
