/* SPDX-License-Identifier: MIT */
/* mpi_levels.c - the engine below MPI_THREAD_MULTIPLE (make mpi-test, ranks
 * 1-4): `mpi_levels serialized` initialises MPI at MPI_THREAD_SERIALIZED
 * and runs ring exchanges and a collective through an engine on a pool
 * (every call issued by the polling agent); `mpi_levels funneled` at
 * MPI_THREAD_FUNNELED, where a pool is refused and an engine on a run loop
 * driven by the main thread does the same work.  mk/mpi.mk builds it once
 * per level (MPI_LEVEL_NAME); an argument overrides that.  Prints
 * "mpi_levels <level> rank R: N passed, F failed". */
#include <stdio.h>
#include <string.h>

#include <cexec/cexec.h>
#include <cexec/mpi.h>

#include "mpi_check.h"

/* What a run on the loop recorded. */
typedef struct outcome {
    bool done;
    ex_result r;
} outcome;

static void out_value(void *self, const ex_value *v, size_t n) {
    outcome *o = self;
    o->r.disposition = EX_DISP_VALUE;
    o->r.n = 0;
    (void)v, (void)n;
    o->done = true;
}
static void out_error(void *self, ex_error e) {
    outcome *o = self;
    o->r.disposition = EX_DISP_ERROR;
    o->r.error = e;
    o->done = true;
}
static void out_stopped(void *self) {
    outcome *o = self;
    o->r.disposition = EX_DISP_STOPPED;
    o->done = true;
}
static const ex_receiver_vtable out_vt = { out_value, out_error, out_stopped, NULL, NULL };

/* Runs s to completion: ex_sync_wait, or, at FUNNELED, by driving the run
 * loop from the main thread (every round of the engine runs here). */
static ex_result run(ex_sender *s, ex_run_loop *loop) {
    if (!loop) return ex_sync_wait(s);
    outcome o;
    memset(&o, 0, sizeof o);
    ex_operation *op = NULL;
    ex_receiver rcv = { &out_vt, &o };
    ex_error e = ex_connect_alloc(s, rcv, &op);
    ex_sender_release(s);
    if (e.code) {
        o.r.disposition = EX_DISP_ERROR;
        o.r.error = e;
        return o.r;
    }
    ex_start(op);
    while (!o.done) (void)ex_run_loop_run_one(loop);
    ex_operation_free(op);
    return o.r;
}

static void exchange(ex_run_loop *loop) {
    int left = (rank + nranks - 1) % nranks, right = (rank + 1) % nranks;
    for (int i = 0; i < 10; i++) {
        int out = rank * 100 + i, in = -1;
        ex_sender *pair[2] = { ex_mpi_irecv(engine, &in, 1, MPI_INT, left, i, MPI_COMM_WORLD),
                               ex_mpi_isend(engine, &out, 1, MPI_INT, right, i, MPI_COMM_WORLD) };
        ex_result r = run(ex_when_all_n(pair, 2), loop);
        CHECK(r.disposition == EX_DISP_VALUE && in == left * 100 + i, "round %d: disposition %d, received %d", i,
              (int)r.disposition, in);
        ex_result_destroy(&r);
    }
    long one = 1, sum = 0;
    ex_result r = run(ex_mpi_iallreduce(engine, &one, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD), loop);
    CHECK(r.disposition == EX_DISP_VALUE && sum == nranks, "allreduce: disposition %d, sum %ld", (int)r.disposition,
          sum);
    ex_result_destroy(&r);
    /* A call MPI refuses (a rank that does not exist) is issued by the
     * agent: its error still reaches the operation. */
    r = run(ex_mpi_isend(engine, &one, 1, MPI_LONG, nranks + 5, 0, MPI_COMM_WORLD), loop);
    CHECK(r.disposition == EX_DISP_ERROR && r.error.code == EX_EIO, "bad rank: disposition %d", (int)r.disposition);
    ex_result_destroy(&r);
}

#ifndef MPI_LEVEL_NAME
#define MPI_LEVEL_NAME "serialized"
#endif

int main(int argc, char **argv) {
    bool funneled = strcmp(argc > 1 ? argv[1] : MPI_LEVEL_NAME, "funneled") == 0;
    /* MPI at the level under test, not check_setup's MULTIPLE: the rest
     * of mpi_check (the counted checks, the globals) is shared. */
    check_program = funneled ? "mpi_levels funneled" : "mpi_levels serialized";
    int want = funneled ? MPI_THREAD_FUNNELED : MPI_THREAD_SERIALIZED, got = 0;
    MPI_Init_thread(&argc, &argv, want, &got);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    CHECK(got == want, "MPI granted level %d for %d", got, want);
    CHECK(ex_mpi_attach().code == EX_OK, "attach");
    ex_pool_config cfg = { 0 };
    cfg.threads = 1;
    CHECK(ex_pool_create(&cfg, &pool).code == EX_OK, "pool");
    ex_error e = ex_mpi_progress_create(ex_pool_scheduler(pool), &engine);
    ex_run_loop storage, *loop = NULL;
    if (funneled) {
        CHECK(e.code == EX_EINVAL, "a pool at FUNNELED: %d", e.code);
        ex_error_release(e);
        CHECK(ex_run_loop_init(&storage).code == EX_OK, "run loop");
        loop = &storage;
        e = ex_mpi_progress_create(ex_run_loop_scheduler(loop), &engine);
    }
    CHECK(e.code == EX_OK, "engine: %s", e.code ? e.msg : "");
    if (e.code) MPI_Abort(MPI_COMM_WORLD, 1);
    exchange(loop);
    ex_error d;
    while ((d = ex_mpi_progress_destroy(engine)).code == EX_EBUSY && loop) {
        ex_error_release(d);
        (void)ex_run_loop_run_one(loop);  /* the item's last round says it is idle */
    }
    CHECK(d.code == EX_OK, "destroy: %d", d.code);
    if (loop) CHECK(ex_run_loop_destroy(loop).code == EX_OK, "run loop destroy");
    CHECK(ex_pool_destroy(pool).code == EX_OK, "pool destroy");
    printf("mpi_levels %s rank %d: %d passed, %d failed\n", funneled ? "funneled" : "serialized", rank, passed, failed);
    MPI_Finalize();
    return failed ? 1 : 0;
}
