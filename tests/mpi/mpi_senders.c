/* SPDX-License-Identifier: MIT */
/* mpi_senders.c - the MPI senders of <cexec/mpi.h> but the probe, run by
 * every rank (make mpi-test: mpiexec -n 1, 2, 3 and 4; mpi_check.h).
 * Prints "mpi_senders rank R: N passed, F failed" and exits non-zero on a
 * failure; every rank runs every check (the collectives need them all). */
#include <string.h>

#include "mpi_check.h"

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
    CHECK(!recorded(&rec), "a receive nobody sends to completed");
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
        if (recv_rec[i].disp != EX_DISP_VALUE || in[i] != left() * 100000 + i || recv_rec[i].v[2].as.i != 1000 + i) bad++;
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

/* ------------------------------------------------------ collectives */

/* ibcast from every root in turn: every rank ends with the root's data. */
static void test_bcast(void) {
    for (int root = 0; root < nranks; root++) {
        int buf[5];
        for (int i = 0; i < 5; i++) buf[i] = rank == root ? root * 10 + i : -1;
        ex_result r = ex_sync_wait(ex_mpi_ibcast(engine, buf, 5, MPI_INT, root, MPI_COMM_WORLD));
        CHECK(r.disposition == EX_DISP_VALUE && r.n == 0, "ibcast root %d: %s", root, result_text(&r));
        int bad = 0;
        for (int i = 0; i < 5; i++) bad += buf[i] != root * 10 + i;
        CHECK(bad == 0, "ibcast root %d: %d elements wrong", root, bad);
        ex_result_destroy(&r);
    }
}

/* ireduce to every root: the root gets the sums; elsewhere recvbuf may
 * be NULL. */
static void test_reduce(void) {
    for (int root = 0; root < nranks; root++) {
        long in[2] = { rank + 1, 10 * rank }, out[2] = { -1, -1 };
        ex_result r = ex_sync_wait(
            ex_mpi_ireduce(engine, in, rank == root ? out : NULL, 2, MPI_LONG, MPI_SUM, root, MPI_COMM_WORLD));
        CHECK(r.disposition == EX_DISP_VALUE, "ireduce root %d: %s", root, result_text(&r));
        long n = nranks;
        if (rank == root)
            CHECK(out[0] == n * (n + 1) / 2 && out[1] == 10 * n * (n - 1) / 2, "ireduce root %d: (%ld, %ld)", root,
                  out[0], out[1]);
        ex_result_destroy(&r);
    }
}

/* iscan and iexscan of rank + 1: prefix sums in rank order (iexscan's
 * rank 0 is left as MPI leaves it and not checked); and a max scan of
 * several elements. */
static void test_scans(void) {
    long in = rank + 1, incl = -1, excl = -1, me = rank;
    ex_result r = ex_sync_wait(ex_mpi_iscan(engine, &in, &incl, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    CHECK(r.disposition == EX_DISP_VALUE && incl == (me + 1) * (me + 2) / 2, "iscan: %s, %ld", result_text(&r), incl);
    ex_result_destroy(&r);
    r = ex_sync_wait(ex_mpi_iexscan(engine, &in, &excl, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD));
    CHECK(r.disposition == EX_DISP_VALUE && (rank == 0 || excl == me * (me + 1) / 2), "iexscan: %s, %ld",
          result_text(&r), excl);
    ex_result_destroy(&r);
    double v[3] = { -rank, rank % 2, rank }, m[3] = { 0, 0, 0 };
    r = ex_sync_wait(ex_mpi_iscan(engine, v, m, 3, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD));
    CHECK(r.disposition == EX_DISP_VALUE && m[0] == 0 && m[1] == (rank >= 1) && m[2] == rank, "iscan max (%g %g %g)",
          m[0], m[1], m[2]);
    ex_result_destroy(&r);
}

/* iallgather: every rank's block, in rank order. */
static void test_allgather(void) {
    int mine[2] = { rank, rank * rank }, all[8];
    for (int i = 0; i < 8; i++) all[i] = -1;
    ex_result r = ex_sync_wait(ex_mpi_iallgather(engine, mine, 2, MPI_INT, all, 2, MPI_INT, MPI_COMM_WORLD));
    CHECK(r.disposition == EX_DISP_VALUE, "iallgather: %s", result_text(&r));
    int bad = 0;
    for (int k = 0; k < nranks; k++) bad += all[2 * k] != k || all[2 * k + 1] != k * k;
    CHECK(bad == 0, "iallgather: %d blocks wrong", bad);
    ex_result_destroy(&r);
}

/* A root or source that is not a rank: each call fails at once, on every
 * rank, with EX_EIO and MPI's text (no rank waits for another). */
static void test_bad_roots(void) {
    int buf[2] = { 0, 0 }, out[2] = { 0, 0 };
    struct {
        const char *call;
        ex_sender *s;
    } cases[] = {
        { "MPI_Ibcast", ex_mpi_ibcast(engine, buf, 2, MPI_INT, nranks + 1, MPI_COMM_WORLD) },
        { "MPI_Ireduce", ex_mpi_ireduce(engine, buf, out, 2, MPI_INT, MPI_SUM, -5, MPI_COMM_WORLD) },
        { "MPI_Irecv", ex_mpi_irecv(engine, buf, 2, MPI_INT, nranks + 2, 0, MPI_COMM_WORLD) },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ex_result r = ex_sync_wait(cases[i].s);
        CHECK(r.disposition == EX_DISP_ERROR && r.error.code == EX_EIO, "%s: %s", cases[i].call, result_text(&r));
        if (r.disposition == EX_DISP_ERROR)
            CHECK(strstr(r.error.msg, cases[i].call) && strstr(r.error.msg, "(MPI error class "), "message: %s",
                  r.error.msg);
        ex_result_destroy(&r);
    }
}

/* Every builder's argument checks: EX_EINVAL senders. */
static void test_invalid_collectives(void) {
    int x = 0, y = 0;
    ex_sender *s[] = {
        ex_mpi_isend(NULL, &x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD),
        ex_mpi_isend(engine, &x, -1, MPI_INT, 0, 0, MPI_COMM_WORLD),
        ex_mpi_irecv(engine, NULL, 1, MPI_INT, 0, 0, MPI_COMM_WORLD),
        ex_mpi_iallreduce(NULL, &x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
        ex_mpi_iallreduce(engine, NULL, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
        ex_mpi_iallreduce(engine, &x, &y, -2, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
        ex_mpi_ibcast(NULL, &x, 1, MPI_INT, 0, MPI_COMM_WORLD),
        ex_mpi_ibcast(engine, NULL, 1, MPI_INT, 0, MPI_COMM_WORLD),
        ex_mpi_ibcast(engine, &x, -1, MPI_INT, 0, MPI_COMM_WORLD),
        ex_mpi_ireduce(NULL, &x, &y, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD),
        ex_mpi_ireduce(engine, NULL, &y, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD),
        ex_mpi_ireduce(engine, &x, &y, -1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD),
        ex_mpi_iscan(NULL, &x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
        ex_mpi_iscan(engine, &x, NULL, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
        ex_mpi_iexscan(NULL, &x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
        ex_mpi_iexscan(engine, &x, NULL, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD),
        ex_mpi_iallgather(NULL, &x, 1, MPI_INT, &y, 1, MPI_INT, MPI_COMM_WORLD),
        ex_mpi_iallgather(engine, NULL, 1, MPI_INT, &y, 1, MPI_INT, MPI_COMM_WORLD),
        ex_mpi_iallgather(engine, &x, 1, MPI_INT, NULL, 1, MPI_INT, MPI_COMM_WORLD),
        ex_mpi_iallgather(engine, &x, -1, MPI_INT, &y, 1, MPI_INT, MPI_COMM_WORLD),
        ex_mpi_iallgather(engine, &x, 1, MPI_INT, &y, -1, MPI_INT, MPI_COMM_WORLD),
    };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        CHECK(ex_sender_status(s[i]).code == EX_EINVAL, "sender %zu: status %d", i, ex_sender_status(s[i]).code);
        ex_result r = ex_sync_wait(s[i]);
        CHECK(r.disposition == EX_DISP_ERROR && r.error.code == EX_EINVAL, "sender %zu: %s", i, result_text(&r));
        ex_result_destroy(&r);
    }
}

/* A token stopped before start: a receive completes stopped without MPI
 * (the engine never sees it); a send ignores it and is delivered. */
static void test_stopped_at_start(void) {
    ex_stop_source src;
    ex_stop_source_init(&src);
    ex_stop_source_request_stop(&src);
    int in = -1, out = rank + 500;
    ex_mpi_progress_stats before = ex_mpi_progress_get_stats(engine);
    ex_result r = ex_sync_wait(ex_link_stop_token(ex_mpi_irecv(engine, &in, 1, MPI_INT, left(), 30, MPI_COMM_WORLD),
                                                  ex_stop_source_token(&src)));
    CHECK(r.disposition == EX_DISP_STOPPED, "irecv: %s", result_text(&r));
    ex_result_destroy(&r);
    CHECK(ex_mpi_progress_get_stats(engine).submitted == before.submitted, "the engine was given the receive");
    /* (A send to itself completes only once received: MPICH's self path.) */
    record sent;
    ex_operation *op = start_recorded(ex_link_stop_token(ex_mpi_isend(engine, &out, 1, MPI_INT, right(), 30,
                                                                      MPI_COMM_WORLD),
                                                         ex_stop_source_token(&src)),
                                      &sent);
    CHECK(op != NULL, "isend did not start");
    r = ex_sync_wait(ex_mpi_irecv(engine, &in, 1, MPI_INT, left(), 30, MPI_COMM_WORLD));
    CHECK(r.disposition == EX_DISP_VALUE && in == left() + 500, "the send arrived: %s, %d", result_text(&r), in);
    ex_result_destroy(&r);
    if (!op) return;
    wait_recorded(&sent);
    CHECK(sent.hits == 1 && sent.disp == EX_DISP_VALUE, "isend with a stopped token: disposition %d", (int)sent.disp);
    ex_operation_free(op);
}

/* ---------------------------------------------------- out of memory */

/* Every builder under a default allocator that fails its next
 * allocation: an EX_ENOMEM invalid sender. */
static void test_senders_enomem(void) {
    int x = 0, y = 0;
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, NULL);
    const ex_allocator *old = ex_default_allocator();
    ex_set_default_allocator(ex_fault_allocator_get(&f));
    ex_sender *s[10];
    int k = 0;
#define FAILING(build)                      \
    do {                                    \
        ex_fault_allocator_fail_nth(&f, 1); \
        s[k++] = (build);                   \
    } while (0)
    FAILING(ex_mpi_isend(engine, &x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD));
    FAILING(ex_mpi_irecv(engine, &x, 1, MPI_INT, 0, 0, MPI_COMM_WORLD));
    FAILING(ex_mpi_ibarrier(engine, MPI_COMM_WORLD));
    FAILING(ex_mpi_iallreduce(engine, &x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    FAILING(ex_mpi_ibcast(engine, &x, 1, MPI_INT, 0, MPI_COMM_WORLD));
    FAILING(ex_mpi_ireduce(engine, &x, &y, 1, MPI_INT, MPI_SUM, 0, MPI_COMM_WORLD));
    FAILING(ex_mpi_iscan(engine, &x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    FAILING(ex_mpi_iexscan(engine, &x, &y, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD));
    FAILING(ex_mpi_iallgather(engine, &x, 1, MPI_INT, &y, 1, MPI_INT, MPI_COMM_WORLD));
    FAILING(ex_mpi_recv_any_size(engine, MPI_INT, 0, 0, MPI_COMM_WORLD));
#undef FAILING
    /* The engine itself: nothing made, nothing added to the pool. */
    ex_mpi_progress *none = engine;
    ex_fault_allocator_fail_nth(&f, 1);
    ex_error e = ex_mpi_progress_create(ex_pool_scheduler(pool), &none);
    CHECK(e.code == EX_ENOMEM && none == NULL, "engine create: %d", e.code);
    ex_error_release(e);
    ex_set_default_allocator(old);
    for (int i = 0; i < k; i++) {
        CHECK(ex_sender_status(s[i]).code == EX_ENOMEM, "builder %d: status %d", i, ex_sender_status(s[i]).code);
        ex_sender_release(s[i]);
    }
    ex_alloc_stats st;
    (void)ex_allocator_stats(ex_fault_allocator_get(&f), &st);
    CHECK(st.failures == (uint64_t)k + 1 && st.bytes_in_use == 0, "%llu failures, %llu bytes in use",
          (unsigned long long)st.failures, (unsigned long long)st.bytes_in_use);
}

int main(int argc, char **argv) {
    check_setup(&argc, &argv, "mpi_senders");
    CHECK(ex_mpi_attach().code == EX_OK, "attach");
    test_invalid();
    test_ring_values();
    test_any_source();
    test_truncated();
    test_bad_rank();
    test_barrier_and_allreduce();
    test_stop_pending_recv();
    test_many();
    test_bcast();
    test_reduce();
    test_scans();
    test_allgather();
    test_bad_roots();
    test_invalid_collectives();
    test_stopped_at_start();
    test_senders_enomem();
    return check_finish();
}
