/* SPDX-License-Identifier: MIT */
/* mpi_probe.c - ex_mpi_recv_any_size (probe, then receive into a buffer
 * made for the message), run by every rank (make mpi-test: mpiexec -n 1,
 * 2, 3 and 4; mpi_check.h).  Messages go around the ring (one rank: to
 * itself).  Prints "mpi_probe rank R: N passed, F failed". */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "mpi_check.h"

/* A ring exchange: this rank's message to the right, the left's received
 * by probe.  The result holds the received buffer (the test frees it). */
static ex_result ring_probe(const void *out, int count, MPI_Datatype type, MPI_Datatype recv_type, int tag,
                            MPI_Comm comm) {
    ex_sender *pair[2] = { ex_mpi_recv_any_size(engine, recv_type, left(), tag, comm),
                           ex_mpi_isend(engine, out, count, type, right(), tag, comm) };
    return ex_sync_wait(ex_when_all_n(pair, 2));
}

/* Sizes from 0 up: each message arrives whole, in a buffer of its size,
 * with its count, source and tag. */
static void test_ring_sizes(void) {
    for (int k = 0; k < 8; k++) {
        int len = (rank + 1) * k * 37, expect = (left() + 1) * k * 37;
        int *out = malloc(sizeof(int) * (size_t)(len ? len : 1));
        for (int i = 0; i < len; i++) out[i] = rank * 1000000 + i;
        ex_result r = ring_probe(len ? out : NULL, len, MPI_INT, MPI_INT, 300 + k, MPI_COMM_WORLD);
        CHECK(r.disposition == EX_DISP_VALUE && r.n == 4, "size %d: %s", expect, result_text(&r));
        if (r.disposition == EX_DISP_VALUE && r.n == 4) {
            const int *in = r.values[0].as.p;
            CHECK(r.values[1].as.i == expect && r.values[2].as.i == left() && r.values[3].as.i == 300 + k,
                  "size %d: (count %lld, source %lld, tag %lld)", expect, (long long)r.values[1].as.i,
                  (long long)r.values[2].as.i, (long long)r.values[3].as.i);
            CHECK((in == NULL) == (expect == 0), "size %d: buffer %p", expect, (const void *)in);
            int bad = 0;
            for (int i = 0; in && i < expect && i < r.values[1].as.i; i++) bad += in[i] != left() * 1000000 + i;
            CHECK(bad == 0, "size %d: %d elements wrong", expect, bad);
            CHECK(((uintptr_t)in % _Alignof(max_align_t)) == 0, "buffer %p not aligned", (const void *)in);
            ex_mpi_free(r.values[0].as.p);
        }
        ex_result_destroy(&r);
        free(out);
    }
    /* MPI_PROC_NULL: an empty message at once, as MPI_Recv gives it. */
    ex_result r = ex_sync_wait(ex_mpi_recv_any_size(engine, MPI_INT, MPI_PROC_NULL, 0, MPI_COMM_WORLD));
    CHECK(r.disposition == EX_DISP_VALUE && r.values[0].as.p == NULL && r.values[1].as.i == 0 &&
              r.values[2].as.i == MPI_PROC_NULL,
          "MPI_PROC_NULL: %s", result_text(&r));
    ex_result_destroy(&r);
}

/* Rank 0 takes one message from every rank through MPI_ANY_SOURCE and
 * MPI_ANY_TAG (on a communicator of its own, so that no later test's
 * message can match), and learns each sender and tag from the value. */
static void test_any_source_any_tag(void) {
    MPI_Comm comm;
    MPI_Comm_dup(MPI_COMM_WORLD, &comm);
    double out[8];
    for (int i = 0; i < 8; i++) out[i] = rank + i / 10.0;
    record sent;
    ex_operation *send_op = start_recorded(ex_mpi_isend(engine, out, rank + 1, MPI_DOUBLE, 0, 400 + rank, comm), &sent);
    CHECK(send_op != NULL, "isend to 0 did not start");
    if (rank == 0) {
        int seen = 0;
        for (int k = 0; k < nranks; k++) {
            ex_result r = ex_sync_wait(ex_mpi_recv_any_size(engine, MPI_DOUBLE, MPI_ANY_SOURCE, MPI_ANY_TAG, comm));
            CHECK(r.disposition == EX_DISP_VALUE, "receive %d: %s", k, result_text(&r));
            if (r.disposition != EX_DISP_VALUE) continue;
            const double *in = r.values[0].as.p;
            int src = (int)r.values[2].as.i;
            CHECK(src >= 0 && src < nranks && r.values[1].as.i == src + 1 && r.values[3].as.i == 400 + src,
                  "source %d: count %lld tag %lld", src, (long long)r.values[1].as.i, (long long)r.values[3].as.i);
            CHECK(in && in[0] == src && in[src] == src + src / 10.0, "source %d: contents", src);
            if (src >= 0 && src < nranks) seen |= 1 << src;
            ex_mpi_free(r.values[0].as.p);
            ex_result_destroy(&r);
        }
        CHECK(seen == (1 << nranks) - 1, "sources seen: %#x", (unsigned)seen);
    }
    if (send_op) {
        wait_recorded(&sent);
        CHECK(sent.hits == 1 && sent.disp == EX_DISP_VALUE, "isend: hits %u", sent.hits);
        ex_operation_free(send_op);
    }
    MPI_Comm_free(&comm);
}

/* A datatype with holes: the buffer is laid out as MPI_Recv lays it
 * (extent apart), so it must span (count - 1) * extent + true extent. */
static void test_strided_datatype(void) {
    MPI_Datatype every_other;  /* ints 0 and 2 of 3: size 8, extent 12 */
    MPI_Type_vector(2, 1, 2, MPI_INT, &every_other);
    MPI_Type_commit(&every_other);
    int out[6] = { rank, -1, rank + 10, rank + 20, -1, rank + 30 };
    ex_result r = ring_probe(out, 2, every_other, every_other, 310, MPI_COMM_WORLD);
    CHECK(r.disposition == EX_DISP_VALUE && r.values[1].as.i == 2, "strided: %s", result_text(&r));
    if (r.disposition == EX_DISP_VALUE) {
        const int *in = r.values[0].as.p;
        int l = left();
        CHECK(in && in[0] == l && in[2] == l + 10 && in[3] == l + 20 && in[5] == l + 30, "strided contents");
        ex_mpi_free(r.values[0].as.p);
    }
    ex_result_destroy(&r);
    MPI_Type_free(&every_other);
}

/* Three ints read as pairs of ints (legal: the message's type signature
 * is a prefix of the receive's): not a whole number of elements, EX_EIO
 * (and the buffer goes back: the ASan run checks it). */
static void test_partial_element(void) {
    MPI_Datatype pair;
    MPI_Type_contiguous(2, MPI_INT, &pair);
    MPI_Type_commit(&pair);
    int out[3] = { 1, 2, 3 };
    ex_result r = ring_probe(out, 3, MPI_INT, pair, 320, MPI_COMM_WORLD);
    CHECK(r.disposition == EX_DISP_ERROR && r.error.code == EX_EIO && strstr(r.error.msg, "whole number"),
          "3 ints as pairs: %s", result_text(&r));
    ex_result_destroy(&r);
    MPI_Type_free(&pair);
}

/* A source that is not a rank: MPI_Improbe's error, with MPI's text. */
static void test_bad_rank(void) {
    ex_result r = ex_sync_wait(ex_mpi_recv_any_size(engine, MPI_INT, nranks + 3, 0, MPI_COMM_WORLD));
    CHECK(r.disposition == EX_DISP_ERROR && r.error.code == EX_EIO, "bad rank: %s", result_text(&r));
    if (r.disposition == EX_DISP_ERROR) {
        CHECK(strstr(r.error.msg, "MPI_Improbe: ") && strstr(r.error.msg, "rank") && strstr(r.error.msg, "class"),
              "message: %s", r.error.msg);
        if (rank == 0) printf("mpi_probe: bad rank: %s\n", r.error.msg);
    }
    ex_result_destroy(&r);
}

/* Arguments: NULL engine and MPI_DATATYPE_NULL when built; datatypes no
 * buffer can be sized for when started (checked on the agent, before
 * any probe: no message is taken). */
static void test_invalid(void) {
    ex_sender *s[] = { ex_mpi_recv_any_size(NULL, MPI_INT, 0, 0, MPI_COMM_WORLD),
                       ex_mpi_recv_any_size(engine, MPI_DATATYPE_NULL, 0, 0, MPI_COMM_WORLD) };
    for (size_t i = 0; i < sizeof s / sizeof s[0]; i++) {
        CHECK(ex_sender_status(s[i]).code == EX_EINVAL, "sender %zu: status %d", i, ex_sender_status(s[i]).code);
        ex_result r = ex_sync_wait(s[i]);
        CHECK(r.disposition == EX_DISP_ERROR && r.error.code == EX_EINVAL, "sender %zu: %s", i, result_text(&r));
        ex_result_destroy(&r);
    }
    MPI_Datatype empty, before_start;
    MPI_Type_contiguous(0, MPI_INT, &empty);
    MPI_Type_commit(&empty);
    int one = 1;
    MPI_Aint back = -8;
    MPI_Type_create_hindexed(1, &one, &back, MPI_INT, &before_start);
    MPI_Type_commit(&before_start);
    MPI_Datatype bad[2] = { empty, before_start };
    for (int i = 0; i < 2; i++) {
        ex_result r = ex_sync_wait(ex_mpi_recv_any_size(engine, bad[i], MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD));
        CHECK(r.disposition == EX_DISP_ERROR && r.error.code == EX_EINVAL, "datatype %d: %s", i, result_text(&r));
        ex_result_destroy(&r);
        MPI_Type_free(&bad[i]);
    }
}

/* --------------------------------------------------------------- stop */

/* A probe nobody sends to: the engine refuses to go while it waits, and
 * a stop request ends it (set_stopped, once); then through ex_timeout. */
static void test_stop_pending(void) {
    ex_stop_source src;
    ex_stop_source_init(&src);
    record rec;
    ex_operation *op = start_recorded(
        ex_link_stop_token(ex_mpi_recv_any_size(engine, MPI_INT, MPI_ANY_SOURCE, 999, MPI_COMM_WORLD),
                           ex_stop_source_token(&src)),
        &rec);
    CHECK(op != NULL, "probe did not start");
    if (!op) return;
    ex_error busy = ex_mpi_progress_destroy(engine);
    CHECK(busy.code == EX_EBUSY, "destroy with a pending probe: %d", busy.code);
    for (int i = 0; i < 20; i++) nap();  /* the probe settles into its backoff */
    CHECK(!recorded(&rec), "a probe nobody sends to completed");
    ex_stop_source_request_stop(&src);
    wait_recorded(&rec);
    nap();  /* a second completion would come now */
    CHECK(rec.hits == 1 && rec.disp == EX_DISP_STOPPED, "hits %u disposition %d", rec.hits, (int)rec.disp);
    ex_operation_free(op);

    ex_result r = ex_sync_wait(ex_timeout(ex_mpi_recv_any_size(engine, MPI_INT, MPI_ANY_SOURCE, 998, MPI_COMM_WORLD),
                                          ex_pool_scheduler(pool), 5 * EX_NS_PER_MS));
    CHECK(r.disposition == EX_DISP_ERROR && r.error.code == EX_ETIMEDOUT, "timeout: %s", result_text(&r));
    ex_result_destroy(&r);
}

/* A token stopped before start: set_stopped, and the engine never sees
 * the operation. */
static void test_stopped_at_start(void) {
    ex_stop_source src;
    ex_stop_source_init(&src);
    ex_stop_source_request_stop(&src);
    ex_mpi_progress_stats before = ex_mpi_progress_get_stats(engine);
    ex_result r = ex_sync_wait(ex_link_stop_token(
        ex_mpi_recv_any_size(engine, MPI_INT, MPI_ANY_SOURCE, 997, MPI_COMM_WORLD), ex_stop_source_token(&src)));
    CHECK(r.disposition == EX_DISP_STOPPED, "stopped at start: %s", result_text(&r));
    ex_result_destroy(&r);
    CHECK(ex_mpi_progress_get_stats(engine).submitted == before.submitted, "the engine was given the operation");
}

/* An allocator that requests a stop on `src` when asked for the buffer:
 * so the stop comes exactly between the match and the receive. */
typedef struct stopping_alloc {
    ex_allocator base;
    ex_stop_source *src;
    uint32_t calls;
} stopping_alloc;

static void *stopping_allocate(void *ctx, size_t size, size_t align) {
    stopping_alloc *a = ctx;
    a->calls++;
    ex_stop_source_request_stop(a->src);
    const ex_allocator *d = ex_default_allocator();
    return d->allocate(d->ctx, size, align);
}

static void stopping_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx;
    const ex_allocator *d = ex_default_allocator();
    d->deallocate(d->ctx, p, size, align);
}

/* Once a message matched, a stop request changes nothing: it is received
 * and the operation completes with it. */
static void test_stop_after_match(void) {
    ex_stop_source src;
    ex_stop_source_init(&src);
    stopping_alloc a = { { stopping_allocate, stopping_deallocate, NULL, "stopping", NULL }, &src, 0 };
    a.base.ctx = &a;
    int out[3] = { rank, rank + 1, rank + 2 };
    ex_sender *recv = ex_write_env(ex_link_stop_token(ex_mpi_recv_any_size(engine, MPI_INT, left(), 330, MPI_COMM_WORLD),
                                                      ex_stop_source_token(&src)),
                                   &ex_key_get_allocator, ex_alloc_value(&a.base));
    ex_sender *pair[2] = { recv, ex_mpi_isend(engine, out, 3, MPI_INT, right(), 330, MPI_COMM_WORLD) };
    ex_result r = ex_sync_wait(ex_when_all_n(pair, 2));
    CHECK(a.calls == 1 && ex_stop_token_stop_requested(ex_stop_source_token(&src)), "calls %u", a.calls);
    CHECK(r.disposition == EX_DISP_VALUE && r.values[1].as.i == 3, "stop after the match: %s", result_text(&r));
    if (r.disposition == EX_DISP_VALUE) {
        const int *in = r.values[0].as.p;
        CHECK(in && in[0] == left() && in[2] == left() + 2, "contents");
        ex_mpi_free(r.values[0].as.p);
    }
    ex_result_destroy(&r);
}

/* A stop request racing the match: either the message is received
 * (value) or the probe gave up (stopped) and the message is still there
 * for the next receive.  Never lost, never twice, one completion. */
static void test_stop_races_match(void) {
    int values = 0, stops = 0;
    for (int i = 0; i < 60; i++) {
        int out = rank * 100 + i, in = -1;
        record sent, got;
        ex_stop_source src;
        ex_stop_source_init(&src);
        ex_operation *send_op = start_recorded(ex_mpi_isend(engine, &out, 1, MPI_INT, right(), 340, MPI_COMM_WORLD), &sent);
        ex_operation *op = start_recorded(
            ex_link_stop_token(ex_mpi_recv_any_size(engine, MPI_INT, left(), 340, MPI_COMM_WORLD),
                               ex_stop_source_token(&src)),
            &got);
        if (!send_op || !op) {
            CHECK(false, "round %d did not start", i);
            return;
        }
        if (i % 3) nap();
        ex_stop_source_request_stop(&src);
        wait_recorded(&got);
        if (got.disp == EX_DISP_VALUE) {
            values++;
            const int *p = got.v[0].as.p;
            in = p ? *p : -1;
            ex_mpi_free(got.v[0].as.p);
        } else if (got.disp == EX_DISP_STOPPED) {
            stops++;
            ex_result r = ex_sync_wait(ex_mpi_irecv(engine, &in, 1, MPI_INT, left(), 340, MPI_COMM_WORLD));
            ex_result_destroy(&r);
        }
        CHECK(in == left() * 100 + i, "round %d: %s, then %d", i, got.disp == EX_DISP_VALUE ? "value" : "stopped", in);
        wait_recorded(&sent);
        nap();
        CHECK(got.hits == 1 && sent.hits == 1, "round %d: hits %u, %u", i, got.hits, sent.hits);
        ex_operation_free(op);
        ex_operation_free(send_op);
    }
    if (rank == 0) printf("mpi_probe: stop raced the match: %d values, %d stopped\n", values, stops);
}

/* ----------------------------------------------------- out of memory */

/* The sender itself cannot be allocated. */
static void test_sender_enomem(void) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, NULL);
    const ex_allocator *old = ex_default_allocator();
    ex_set_default_allocator(ex_fault_allocator_get(&f));
    ex_fault_allocator_fail_nth(&f, 1);
    ex_sender *s = ex_mpi_recv_any_size(engine, MPI_INT, 0, 0, MPI_COMM_WORLD);
    ex_set_default_allocator(old);
    CHECK(ex_sender_status(s).code == EX_ENOMEM, "status %d", ex_sender_status(s).code);
    ex_sender_release(s);
}

/* Two messages with one tag; the first (`ints` ints: large enough that
 * MPI sends it by rendezvous, so its send completes only once it is
 * received) finds no memory.  It completes with EX_ENOMEM, yet is
 * received and dropped: its send completes, the next probe gets the
 * second message, and nothing stays allocated. */
static void expect_dropped_then_next(MPI_Datatype recv_type, int ints, int tag, uint64_t failures, const char *what) {
    ex_fault_allocator f;
    ex_fault_allocator_init(&f, NULL);
    ex_fault_allocator_fail_nth(&f, 1);
    int *first = calloc((size_t)ints, sizeof(int)), second = rank + 7;
    record s1, s2;
    ex_operation *o1 = start_recorded(ex_mpi_isend(engine, first, ints, MPI_INT, right(), tag, MPI_COMM_WORLD), &s1);
    ex_operation *o2 = start_recorded(ex_mpi_isend(engine, &second, 1, MPI_INT, right(), tag, MPI_COMM_WORLD), &s2);
    ex_result r = ex_sync_wait(ex_write_env(ex_mpi_recv_any_size(engine, recv_type, left(), tag, MPI_COMM_WORLD),
                                            &ex_key_get_allocator, ex_alloc_value(ex_fault_allocator_get(&f))));
    CHECK(r.disposition == EX_DISP_ERROR && r.error.code == EX_ENOMEM, "%s: %s", what, result_text(&r));
    ex_result_destroy(&r);
    r = ex_sync_wait(ex_mpi_recv_any_size(engine, MPI_INT, left(), tag, MPI_COMM_WORLD));
    CHECK(r.disposition == EX_DISP_VALUE && r.values[1].as.i == 1 && r.values[0].as.p &&
              *(const int *)r.values[0].as.p == left() + 7,
          "%s: the next message: %s", what, result_text(&r));
    if (r.disposition == EX_DISP_VALUE) ex_mpi_free(r.values[0].as.p);
    ex_result_destroy(&r);
    ex_operation *ops[2] = { o1, o2 };
    const record *recs[2] = { &s1, &s2 };
    for (int i = 0; i < 2; i++) {
        CHECK(ops[i] != NULL, "%s: send %d did not start", what, i);
        if (!ops[i]) continue;
        wait_recorded(recs[i]);  /* the dropped message's send too */
        CHECK(recs[i]->disp == EX_DISP_VALUE, "%s: send %d: disposition %d", what, i, (int)recs[i]->disp);
        ex_operation_free(ops[i]);
    }
    free(first);
    ex_alloc_stats st;
    (void)ex_allocator_stats(ex_fault_allocator_get(&f), &st);
    CHECK(st.bytes_in_use == 0 && st.failures == failures, "%s: %llu bytes in use, %llu failures", what,
          (unsigned long long)st.bytes_in_use, (unsigned long long)st.failures);
}

/* The buffer's allocation fails (drained into scratch); a datatype so
 * sparse that scratch cannot be mapped either (drained by a truncated
 * receive of nothing); one whose span overflows a size_t (no allocator
 * is even asked). */
#define BLOCK 65536
static void test_buffer_enomem(void) {
    expect_dropped_then_next(MPI_INT, 2 * BLOCK, 350, 1, "no buffer");
    MPI_Datatype block, sparse;  /* BLOCK ints every 2^62 bytes */
    MPI_Type_contiguous(BLOCK, MPI_INT, &block);
    MPI_Type_create_resized(block, 0, (MPI_Aint)1 << 62, &sparse);
    MPI_Type_commit(&sparse);
    expect_dropped_then_next(sparse, 2 * BLOCK, 351, 1, "no scratch");
    expect_dropped_then_next(sparse, 5 * BLOCK, 352, 0, "span beyond SIZE_MAX");
    MPI_Type_free(&sparse);
    MPI_Type_free(&block);
}

/* --------------------------------------------------------------- many */

/* Many probes outstanding at once, posted in the reverse order of their
 * messages; each completes once with its own message. */
#define MANY 100
static void test_many(void) {
    static int out[MANY][MANY / 10 + 1];
    static record rec[MANY], sent[MANY];
    static ex_operation *op[MANY], *send_op[MANY];
    for (int i = MANY - 1; i >= 0; i--)
        op[i] = start_recorded(ex_mpi_recv_any_size(engine, MPI_INT, left(), 2000 + i, MPI_COMM_WORLD), &rec[i]);
    for (int i = 0; i < MANY; i++) {
        for (int j = 0; j <= i / 10; j++) out[i][j] = rank * 10000 + i;
        send_op[i] = start_recorded(ex_mpi_isend(engine, out[i], i / 10 + 1, MPI_INT, right(), 2000 + i, MPI_COMM_WORLD),
                                    &sent[i]);
    }
    int bad = 0;
    for (int i = 0; i < MANY; i++) {
        if (!op[i] || !send_op[i]) { bad++; continue; }
        wait_recorded(&rec[i]);
        wait_recorded(&sent[i]);
        const int *in = rec[i].v[0].as.p;
        if (rec[i].disp != EX_DISP_VALUE || rec[i].v[1].as.i != i / 10 + 1 || !in || in[i / 10] != left() * 10000 + i)
            bad++;
        if (rec[i].disp == EX_DISP_VALUE) ex_mpi_free(rec[i].v[0].as.p);
    }
    nap();
    int twice = 0;
    for (int i = 0; i < MANY; i++) {
        twice += rec[i].hits != 1 || sent[i].hits != 1;
        ex_operation_free(op[i]);
        ex_operation_free(send_op[i]);
    }
    CHECK(bad == 0, "%d of %d probes wrong", bad, MANY);
    CHECK(twice == 0, "%d operations completed other than once", twice);
}

int main(int argc, char **argv) {
    check_setup(&argc, &argv, "mpi_probe");
    test_invalid();
    test_ring_sizes();
    test_any_source_any_tag();
    test_strided_datatype();
    test_partial_element();
    test_bad_rank();
    test_stop_pending();
    test_stopped_at_start();
    test_stop_after_match();
    test_stop_races_match();
    test_sender_enomem();
    test_buffer_enomem();
    test_many();
    return check_finish();
}
