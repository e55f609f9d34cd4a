/* SPDX-License-Identifier: MIT */
/* mpi_pipeline.c - a ring pipeline over the ranks, written as tasks
 * (build: make mpi-examples; run: mpiexec -n 4 build/mpi/examples/mpi_pipeline).
 *
 * Blocks of doubles travel around the ring 0 -> 1 -> ... -> n-1 -> 0.
 * Every rank runs a stage task that, for each block,
 *   1. awaits the receive of the block from its left neighbour,
 *   2. computes on the pool: x = 2x + (rank + 1) for every element
 *      (ex_transform_f64: every worker of the pool takes part),
 *   3. awaits the send of the block to its right neighbour.
 * Rank 0 instead produces the blocks (step 1 is filling it), and a second
 * task on rank 0, running beside the producer (when_all), consumes them
 * when they come back around and checks every element: each stage must
 * have run once, in rank order.  With one rank the ring is rank 0 alone.
 *
 * While a task waits for MPI it holds no thread: its stack is put aside,
 * and the pool's worker runs the other tasks, the transforms and the MPI
 * progress item.  The program exits 0 only if every block came back
 * right. */
#include <stdio.h>
#include <stdlib.h>

#include <cexec/cexec.h>
#include <cexec/mpi.h>

#define BLOCK ((size_t)1 << 15)  /* 256 KiB: large enough for MPI's rendezvous path */
#define BLOCKS 16

typedef struct ring {
    ex_mpi_progress *engine;
    ex_scheduler pool;
    int rank, nranks;
    int bad;  /* elements that came back wrong (rank 0) */
} ring;

static double first_value(int k, size_t i) { return (double)(k * 1000) + (double)(i % 1000); }

/* Stage r's work on one element; integers stay exact. */
static double stage(void *ctx, double x) { return 2.0 * x + (double)(*(const int *)ctx + 1); }

/* Step 2: the block, transformed in place on the pool. */
static ex_error compute(ex_task *t, ring *g, double *block) {
    ex_await_result r = ex_await(t, ex_transform_f64(g->pool, block, block, BLOCK, stage, &g->rank));
    return r.status == EX_AWAIT_ERROR ? r.error : ex_ok();
}

static ex_error send_right(ex_task *t, ring *g, double *block, int k) {
    int right = (g->rank + 1) % g->nranks;
    ex_await_result r = ex_await(t, ex_mpi_isend(g->engine, block, (int)BLOCK, MPI_DOUBLE, right, k, MPI_COMM_WORLD));
    return r.status == EX_AWAIT_ERROR ? r.error : ex_ok();
}

static ex_error receive_left(ex_task *t, ring *g, double *block, int k) {
    int left = (g->rank + g->nranks - 1) % g->nranks;
    ex_await_result r = ex_await(t, ex_mpi_irecv(g->engine, block, (int)BLOCK, MPI_DOUBLE, left, k, MPI_COMM_WORLD));
    return r.status == EX_AWAIT_ERROR ? r.error : ex_ok();
}

/* Rank 0's producer: fill, compute stage 0, send. */
static ex_task_result producer(ex_task *t, void *arg) {
    ring *g = arg;
    double *block = malloc(BLOCK * sizeof *block);
    if (!block) return ex_task_with_error(ex_err(EX_ENOMEM, "mpi_pipeline: no memory for a block"));
    ex_error e = ex_ok();
    for (int k = 0; k < BLOCKS && !e.code; k++) {
        for (size_t i = 0; i < BLOCK; i++) block[i] = first_value(k, i);
        e = compute(t, g, block);
        if (!e.code) e = send_right(t, g, block, k);
    }
    free(block);
    return e.code ? ex_task_with_error(e) : ex_task_void();
}

/* The value element i of block k has after every stage. */
static double expected(const ring *g, int k, size_t i) {
    double x = first_value(k, i);
    for (int r = 0; r < g->nranks; r++) x = 2.0 * x + (double)(r + 1);
    return x;
}

/* Rank 0's consumer: receive from the last rank, check. */
static ex_task_result consumer(ex_task *t, void *arg) {
    ring *g = arg;
    double *block = malloc(BLOCK * sizeof *block);
    if (!block) return ex_task_with_error(ex_err(EX_ENOMEM, "mpi_pipeline: no memory for a block"));
    ex_error e = ex_ok();
    for (int k = 0; k < BLOCKS && !e.code; k++) {
        e = receive_left(t, g, block, k);
        for (size_t i = 0; !e.code && i < BLOCK; i++) g->bad += block[i] != expected(g, k, i);
    }
    free(block);
    return e.code ? ex_task_with_error(e) : ex_task_void();
}

/* Ranks 1..n-1: receive, compute, send. */
static ex_task_result relay(ex_task *t, void *arg) {
    ring *g = arg;
    double *block = malloc(BLOCK * sizeof *block);
    if (!block) return ex_task_with_error(ex_err(EX_ENOMEM, "mpi_pipeline: no memory for a block"));
    ex_error e = ex_ok();
    for (int k = 0; k < BLOCKS && !e.code; k++) {
        e = receive_left(t, g, block, k);
        if (!e.code) e = compute(t, g, block);
        if (!e.code) e = send_right(t, g, block, k);
    }
    free(block);
    return e.code ? ex_task_with_error(e) : ex_task_void();
}

/* Rank 0 runs its producer and consumer side by side; the others relay.
 * The tasks live on the pool (ex_starts_on gives them its scheduler). */
static ex_sender *rank_work(ring *g) {
    if (g->rank > 0) return ex_starts_on(g->pool, ex_task_create(relay, g, NULL));
    return ex_starts_on(g->pool, ex_when_all(ex_task_create(producer, g, NULL), ex_task_create(consumer, g, NULL)));
}

int main(int argc, char **argv) {
    ex_error e = ex_mpi_init(&argc, &argv);
    if (e.code) {
        fprintf(stderr, "mpi_pipeline: %s\n", e.msg);
        return 1;
    }
    ring g = { NULL, { NULL, NULL }, 0, 1, 0 };
    MPI_Comm_rank(MPI_COMM_WORLD, &g.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &g.nranks);
    ex_pool_config cfg = { 0 };
    cfg.threads = 1;  /* one worker a rank: ranks share the machine's cores */
    ex_pool *pool = NULL;
    e = ex_pool_create(&cfg, &pool);
    if (!e.code) e = ex_mpi_progress_create(ex_pool_scheduler(pool), &g.engine);
    if (e.code) {
        fprintf(stderr, "mpi_pipeline rank %d: %s\n", g.rank, e.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    g.pool = ex_pool_scheduler(pool);

    double t0 = MPI_Wtime();
    ex_result r = ex_sync_wait(rank_work(&g));
    double dt = MPI_Wtime() - t0;
    int ok = r.disposition == EX_DISP_VALUE && g.bad == 0;
    if (r.disposition == EX_DISP_ERROR) fprintf(stderr, "mpi_pipeline rank %d: %s\n", g.rank, r.error.msg);
    ex_result_destroy(&r);

    int all_ok = 0;
    MPI_Allreduce(&ok, &all_ok, 1, MPI_INT, MPI_LAND, MPI_COMM_WORLD);
    if (g.rank == 0)
        printf("mpi_pipeline: %d blocks of %zu doubles around %d rank%s in %.1f ms: %s\n", BLOCKS, BLOCK, g.nranks,
               g.nranks > 1 ? "s" : "", dt * 1e3, all_ok ? "every element right" : "WRONG");
    (void)ex_mpi_progress_destroy(g.engine);
    (void)ex_pool_destroy(pool);
    (void)ex_mpi_finalize();
    return all_ok ? 0 : 1;
}
