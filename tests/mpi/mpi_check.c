/* SPDX-License-Identifier: MIT */
/* mpi_check.c - see mpi_check.h. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/exi_atomic.h"

#include "mpi_check.h"

int rank, nranks, passed, failed;
const char *check_program = "mpi";
ex_pool *pool;
ex_mpi_progress *engine;

void check_setup(int *argc, char ***argv, const char *program) {
    check_program = program;
    ex_error e = ex_mpi_init(argc, argv);
    if (e.code) {
        fprintf(stderr, "%s: ex_mpi_init: %s\n", program, e.msg);
        exit(1);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    /* One worker a rank: the machine has fewer cores than ranks. */
    ex_pool_config cfg = { 0 };
    cfg.threads = 1;
    e = ex_pool_create(&cfg, &pool);
    if (!e.code) e = ex_mpi_progress_create(ex_pool_scheduler(pool), &engine);
    if (e.code) {
        fprintf(stderr, "%s rank %d: setup: %s\n", program, rank, e.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
}

int check_finish(void) {
    /* Everyone is done before anyone tears down. */
    ex_result r = ex_sync_wait(ex_mpi_ibarrier(engine, MPI_COMM_WORLD));
    CHECK(r.disposition == EX_DISP_VALUE, "final barrier: %s", result_text(&r));
    ex_result_destroy(&r);
    ex_mpi_progress_stats st = ex_mpi_progress_get_stats(engine);
    CHECK(st.submitted == st.completed, "submitted %llu completed %llu", (unsigned long long)st.submitted,
          (unsigned long long)st.completed);
    CHECK(ex_mpi_progress_destroy(engine).code == EX_OK, "destroy");
    CHECK(ex_pool_destroy(pool).code == EX_OK, "pool destroy");
    printf("%s rank %d: %d passed, %d failed (rounds %llu, testsome %llu, backoffs %llu)\n", check_program, rank,
           passed, failed, (unsigned long long)st.rounds, (unsigned long long)st.testsome,
           (unsigned long long)st.backoffs);
    CHECK(ex_mpi_finalize().code == EX_OK, "finalize");
    return failed ? 1 : 0;
}

int left(void) { return (rank + nranks - 1) % nranks; }
int right(void) { return (rank + 1) % nranks; }

void nap(void) {
    struct timespec ts = { 0, 100000 };
    nanosleep(&ts, NULL);
}

const char *result_text(const ex_result *r) {
    switch (r->disposition) {
    case EX_DISP_VALUE: return "value";
    case EX_DISP_ERROR: return r->error.msg;
    case EX_DISP_STOPPED: return "stopped";
    default: return "not completed";
    }
}

/* ----------------------------------------------- a receiver that records */

static void rec_value(void *self, const ex_value *v, size_t n) {
    record *r = self;
    r->disp = EX_DISP_VALUE;
    r->n = n;
    for (size_t i = 0; i < n && i < 4; i++) r->v[i] = v[i];
    (void)exi_faa_u32(&r->hits, 1);
    exi_store_rel_u32(&r->done, 1);
}

static void rec_error(void *self, ex_error e) {
    record *r = self;
    r->disp = EX_DISP_ERROR;
    r->code = e.code;
    ex_error_release(e);
    (void)exi_faa_u32(&r->hits, 1);
    exi_store_rel_u32(&r->done, 1);
}

static void rec_stopped(void *self) {
    record *r = self;
    r->disp = EX_DISP_STOPPED;
    (void)exi_faa_u32(&r->hits, 1);
    exi_store_rel_u32(&r->done, 1);
}

static const ex_receiver_vtable rec_vt = { rec_value, rec_error, rec_stopped, NULL, NULL };

ex_operation *start_recorded(ex_sender *s, record *r) {
    memset(r, 0, sizeof *r);
    ex_operation *op = NULL;
    ex_receiver rcv = { &rec_vt, r };
    ex_error e = ex_connect_alloc(s, rcv, &op);
    ex_sender_release(s);
    if (e.code) {
        ex_error_release(e);
        return NULL;
    }
    ex_start(op);
    return op;
}

/* A completion that does not come in 20 s will not come: the job ends
 * here, with a message, rather than at make's timeout. */
void wait_recorded(const record *r) {
    for (long i = 0; !recorded(r); i++) {
        if (i == 200000) {
            fprintf(stderr, "%s rank %d: an operation did not complete in 20 s\n", check_program, rank);
            MPI_Abort(MPI_COMM_WORLD, 2);
        }
        nap();
    }
}

bool recorded(const record *r) { return exi_load_acq_u32(&r->done) != 0; }
