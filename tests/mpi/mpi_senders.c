/* SPDX-License-Identifier: MIT */
/* mpi_senders.c - the MPI senders of <cexec/mpi.h>, run by every rank
 * (make mpi-test: mpiexec -n 1, 2, 3 and 4).  Not Criterion: Criterion
 * forks each test, which MPI does not survive.  Prints
 * "mpi_senders rank R: N passed, F failed" and exits non-zero on a
 * failure; every rank runs every check (the collectives need them all). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cexec/cexec.h>
#include <cexec/mpi.h>

#include "base/exi_atomic.h"

static int rank, nranks, passed, failed;
static ex_pool *pool;
static ex_mpi_progress *engine;

#define CHECK(cond, ...)                                                              \
    do {                                                                              \
        if (cond) passed++;                                                           \
        else {                                                                        \
            failed++;                                                                 \
            fprintf(stderr, "mpi_senders rank %d: %s:%d: %s: ", rank, __FILE__, __LINE__, #cond); \
            fprintf(stderr, __VA_ARGS__);                                             \
            fputc('\n', stderr);                                                      \
        }                                                                             \
    } while (0)

static int left(void) { return (rank + nranks - 1) % nranks; }
static int right(void) { return (rank + 1) % nranks; }

static void nap(void) {
    struct timespec ts = { 0, 100000 };
    nanosleep(&ts, NULL);
}

/* ----------------------------------------------- a receiver that records */

typedef struct record {
    uint32_t hits;      /* completions: must end at 1 */
    uint32_t done;      /* set last, with release */
    ex_disposition disp;
    int64_t v[3];
    size_t n;
    int code;
} record;

static void rec_value(void *self, const ex_value *v, size_t n) {
    record *r = self;
    r->disp = EX_DISP_VALUE;
    r->n = n;
    for (size_t i = 0; i < n && i < 3; i++) r->v[i] = v[i].as.i;
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

static ex_operation *start_recorded(ex_sender *s, record *r) {
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

static void wait_recorded(const record *r) {
    while (!exi_load_acq_u32(&r->done)) nap();
}

/* ------------------------------------------------------------------ tests */

/* Values around the ring: each rank sends rank*1000+i to its right and
 * receives left*1000+i from its left, with tag i (one rank: itself). */
static void test_ring_values(void) {
    for (int i = 0; i < 20; i++) {
        int out = rank * 1000 + i, in = -1;
        ex_sender *pair[2] = { ex_mpi_irecv(engine, &in, 1, MPI_INT, left(), i, MPI_COMM_WORLD),
                               ex_mpi_isend(engine, &out, 1, MPI_INT, right(), i, MPI_COMM_WORLD) };
        ex_result r = ex_sync_wait(ex_when_all_n(pair, 2));
        CHECK(r.disposition == EX_DISP_VALUE, "round %d: disposition %d (%s)", i, (int)r.disposition,
              r.disposition == EX_DISP_ERROR ? r.error.msg : "-");
        if (r.disposition == EX_DISP_VALUE) {
            CHECK(r.n == 3 && r.values[0].as.i == 1 && r.values[1].as.i == left() && r.values[2].as.i == i,
                  "round %d: (%lld, %lld, %lld)", i, (long long)r.values[0].as.i, (long long)r.values[1].as.i,
                  (long long)r.values[2].as.i);
            CHECK(in == left() * 1000 + i, "round %d: received %d", i, in);
        }
        ex_result_destroy(&r);
    }
}

/* Rank 0 receives one message from every rank through MPI_ANY_SOURCE and
 * learns who sent each from the completion's source value. */
static void test_any_source(void) {
    const int tag = 77;
    int out = rank + 100;
    record sent;
    ex_operation *send_op = start_recorded(ex_mpi_isend(engine, &out, 1, MPI_INT, 0, tag, MPI_COMM_WORLD), &sent);
    CHECK(send_op != NULL, "isend to 0 did not start");
    if (rank == 0) {
        int seen = 0;
        for (int k = 0; k < nranks; k++) {
            int in = -1;
            ex_result r = ex_sync_wait(ex_mpi_irecv(engine, &in, 1, MPI_INT, MPI_ANY_SOURCE, tag, MPI_COMM_WORLD));
            CHECK(r.disposition == EX_DISP_VALUE, "any-source receive %d: disposition %d", k, (int)r.disposition);
            if (r.disposition == EX_DISP_VALUE) {
                int src = (int)r.values[1].as.i;
                CHECK(src >= 0 && src < nranks && in == src + 100, "source %d sent %d", src, in);
                CHECK(r.values[2].as.i == tag, "tag %lld", (long long)r.values[2].as.i);
                if (src >= 0 && src < nranks) seen |= 1 << src;
            }
            ex_result_destroy(&r);
        }
        CHECK(seen == (1 << nranks) - 1, "sources seen: %#x", (unsigned)seen);
    }
    if (send_op) {
        wait_recorded(&sent);
        CHECK(sent.hits == 1 && sent.disp == EX_DISP_VALUE, "isend: hits %u, disposition %d", sent.hits, (int)sent.disp);
        ex_operation_free(send_op);
    }
}

/* Four ints into a buffer of two: MPI_ERR_TRUNCATE, as set_error(EX_EIO)
 * with MPI's text. */
static void test_truncated(void) {
    int out[4] = { 1, 2, 3, 4 }, in[2] = { 0, 0 };
    ex_sender *pair[2] = { ex_mpi_irecv(engine, in, 2, MPI_INT, left(), 5, MPI_COMM_WORLD),
                           ex_mpi_isend(engine, out, 4, MPI_INT, right(), 5, MPI_COMM_WORLD) };
    ex_result r = ex_sync_wait(ex_when_all_n(pair, 2));
    CHECK(r.disposition == EX_DISP_ERROR, "disposition %d", (int)r.disposition);
    if (r.disposition == EX_DISP_ERROR) {
        CHECK(r.error.code == EX_EIO, "code %d", r.error.code);
        CHECK(strstr(r.error.msg, "MPI_Irecv") != NULL, "message: %s", r.error.msg);
        CHECK(strstr(r.error.msg, "runcat") != NULL, "message without MPI's text: %s", r.error.msg);
        if (rank == 0) printf("mpi_senders: truncated receive: %s\n", r.error.msg);
    }
    ex_result_destroy(&r);
}

/* A send to a rank that does not exist fails at start (MPI_ERR_RANK:
 * MPI_COMM_WORLD returns errors after ex_mpi_init). */
static void test_bad_rank(void) {
    int out = 1;
    ex_result r = ex_sync_wait(ex_mpi_isend(engine, &out, 1, MPI_INT, nranks + 3, 0, MPI_COMM_WORLD));
    CHECK(r.disposition == EX_DISP_ERROR && r.error.code == EX_EIO, "disposition %d code %d", (int)r.disposition,
          r.disposition == EX_DISP_ERROR ? r.error.code : 0);
    ex_result_destroy(&r);
}

static void test_barrier_and_allreduce(void) {
    ex_result r = ex_sync_wait(ex_mpi_ibarrier(engine, MPI_COMM_WORLD));
    CHECK(r.disposition == EX_DISP_VALUE && r.n == 0, "ibarrier: disposition %d", (int)r.disposition);
    ex_result_destroy(&r);

    long in = rank + 1, sum = 0;
    r = ex_sync_wait(ex_mpi_iallreduce(engine, &in, &sum, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    CHECK(r.disposition == EX_DISP_VALUE, "iallreduce: disposition %d", (int)r.disposition);
    CHECK(sum == (long)nranks * (nranks + 1) / 2, "sum %ld", sum);
    ex_result_destroy(&r);

    double v[3] = { rank, 1.0, -rank };
    r = ex_sync_wait(ex_mpi_iallreduce(engine, MPI_IN_PLACE, v, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    CHECK(r.disposition == EX_DISP_VALUE && v[0] == nranks - 1 && v[1] == 1.0 && v[2] == 0.0, "max (%g %g %g)",
          v[0], v[1], v[2]);
    ex_result_destroy(&r);
}

/* A receive nobody sends to: the engine refuses to go while it is
 * pending, and a stop request cancels it (set_stopped).  Then the same
 * through ex_timeout (the stopped receive becomes EX_ETIMEDOUT). */
static void test_stop_pending_recv(void) {
    int in = 0;
    ex_stop_source src;
    ex_stop_source_init(&src);
    record rec;
    ex_operation *op = start_recorded(
        ex_link_stop_token(ex_mpi_irecv(engine, &in, 1, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD),
                           ex_stop_source_token(&src)),
        &rec);
    CHECK(op != NULL, "irecv did not start");
    if (!op) return;
    ex_error busy = ex_mpi_progress_destroy(engine);
    CHECK(busy.code == EX_EBUSY, "destroy with a pending receive: %d", busy.code);
    CHECK(!exi_load_acq_u32(&rec.done), "a receive nobody sends to completed");
    ex_stop_source_request_stop(&src);
    wait_recorded(&rec);
    CHECK(rec.hits == 1 && rec.disp == EX_DISP_STOPPED, "hits %u disposition %d", rec.hits, (int)rec.disp);
    ex_operation_free(op);

    ex_result r = ex_sync_wait(ex_timeout(ex_mpi_irecv(engine, &in, 1, MPI_INT, MPI_ANY_SOURCE, 998, MPI_COMM_WORLD),
                                          ex_pool_scheduler(pool), 5 * EX_NS_PER_MS));
    CHECK(r.disposition == EX_DISP_ERROR && r.error.code == EX_ETIMEDOUT, "timeout: disposition %d", (int)r.disposition);
    ex_result_destroy(&r);
}

/* Hundreds of requests outstanding at once, all completing exactly once
 * with the right values. */
#define MANY 300
static void test_many(void) {
    static int out[MANY], in[MANY];
    static record recv_rec[MANY], send_rec[MANY];
    static ex_operation *recv_op[MANY], *send_op[MANY];
    ex_mpi_progress_stats before = ex_mpi_progress_get_stats(engine);
    for (int i = 0; i < MANY; i++) {
        in[i] = -1;
        recv_op[i] = start_recorded(ex_mpi_irecv(engine, &in[i], 1, MPI_INT, left(), 1000 + i, MPI_COMM_WORLD),
                                    &recv_rec[i]);
    }
    for (int i = 0; i < MANY; i++) {
        out[i] = rank * 100000 + i;
        send_op[i] = start_recorded(ex_mpi_isend(engine, &out[i], 1, MPI_INT, right(), 1000 + i, MPI_COMM_WORLD),
                                    &send_rec[i]);
    }
    int bad = 0;
    for (int i = 0; i < MANY; i++) {
        if (!recv_op[i] || !send_op[i]) { bad++; continue; }
        wait_recorded(&recv_rec[i]);
        wait_recorded(&send_rec[i]);
        if (recv_rec[i].disp != EX_DISP_VALUE || in[i] != left() * 100000 + i || recv_rec[i].v[2] != 1000 + i) bad++;
        if (send_rec[i].disp != EX_DISP_VALUE) bad++;
    }
    nap();  /* a second completion would come now */
    int twice = 0;
    for (int i = 0; i < MANY; i++) {
        twice += recv_rec[i].hits != 1 || send_rec[i].hits != 1;
        ex_operation_free(recv_op[i]);
        ex_operation_free(send_op[i]);
    }
    CHECK(bad == 0, "%d of %d requests wrong", bad, 2 * MANY);
    CHECK(twice == 0, "%d operations completed other than once", twice);
    ex_mpi_progress_stats after = ex_mpi_progress_get_stats(engine);
    CHECK(after.completed - before.completed == 2 * MANY, "engine completed %llu",
          (unsigned long long)(after.completed - before.completed));
}

static void test_invalid(void) {
    int x = 0;
    ex_sender *s[] = {
        ex_mpi_isend(engine, NULL, 3, MPI_INT, 0, 0, MPI_COMM_WORLD),
        ex_mpi_irecv(engine, &x, -1, MPI_INT, 0, 0, MPI_COMM_WORLD),
        ex_mpi_irecv(NULL, &x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD),
        ex_mpi_ibarrier(NULL, MPI_COMM_WORLD),
        ex_mpi_iallreduce(engine, &x, NULL, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
    };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        CHECK(ex_sender_status(s[i]).code == EX_EINVAL, "sender %zu: status %d", i, ex_sender_status(s[i]).code);
        ex_result r = ex_sync_wait(s[i]);
        CHECK(r.disposition == EX_DISP_ERROR && r.error.code == EX_EINVAL, "sender %zu: disposition %d", i,
              (int)r.disposition);
        ex_result_destroy(&r);
    }
    /* Zero elements with a NULL buffer is a valid (empty) message. */
    ex_sender *pair[2] = { ex_mpi_irecv(engine, NULL, 0, MPI_INT, left(), 6, MPI_COMM_WORLD),
                           ex_mpi_isend(engine, NULL, 0, MPI_INT, right(), 6, MPI_COMM_WORLD) };
    ex_result r = ex_sync_wait(ex_when_all_n(pair, 2));
    CHECK(r.disposition == EX_DISP_VALUE && r.values[0].as.i == 0, "empty message: disposition %d", (int)r.disposition);
    ex_result_destroy(&r);
    ex_mpi_progress *none = NULL;
    CHECK(ex_mpi_progress_create(ex_inline_scheduler(), &none).code == EX_EINVAL, "inline scheduler has no post");
}

int main(int argc, char **argv) {
    ex_error e = ex_mpi_init(&argc, &argv);
    if (e.code) {
        fprintf(stderr, "mpi_senders: ex_mpi_init: %s\n", e.msg);
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    CHECK(ex_mpi_attach().code == EX_OK, "attach");
    /* One worker a rank: the machine has fewer cores than ranks. */
    ex_pool_config cfg = { 0 };
    cfg.threads = 1;
    e = ex_pool_create(&cfg, &pool);
    if (!e.code) e = ex_mpi_progress_create(ex_pool_scheduler(pool), &engine);
    if (e.code) {
        fprintf(stderr, "mpi_senders rank %d: setup: %s\n", rank, e.msg);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    test_invalid();
    test_ring_values();
    test_any_source();
    test_truncated();
    test_bad_rank();
    test_barrier_and_allreduce();
    test_stop_pending_recv();
    test_many();
    /* Everyone is done before anyone tears down. */
    ex_result r = ex_sync_wait(ex_mpi_ibarrier(engine, MPI_COMM_WORLD));
    CHECK(r.disposition == EX_DISP_VALUE, "final barrier");
    ex_result_destroy(&r);
    ex_mpi_progress_stats st = ex_mpi_progress_get_stats(engine);
    CHECK(st.submitted == st.completed, "submitted %llu completed %llu", (unsigned long long)st.submitted,
          (unsigned long long)st.completed);
    CHECK(ex_mpi_progress_destroy(engine).code == EX_OK, "destroy");
    CHECK(ex_pool_destroy(pool).code == EX_OK, "pool destroy");
    printf("mpi_senders rank %d: %d passed, %d failed (rounds %llu, testsome %llu, backoffs %llu)\n", rank, passed,
           failed, (unsigned long long)st.rounds, (unsigned long long)st.testsome, (unsigned long long)st.backoffs);
    CHECK(ex_mpi_finalize().code == EX_OK, "finalize");
    return failed ? 1 : 0;
}
