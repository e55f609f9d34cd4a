/* SPDX-License-Identifier: MIT */
/* mpi_stress.c - the MPI progress engine under concurrent use, for TSan
 * (make mpi-tsan: mpiexec -n 1, 2 and 4).
 *
 * Three threads per rank start operations at once on one engine (a pool
 * of two workers; a thread that waits lends itself to the pool, so the
 * progress item also runs on the starters).  Each round, each thread:
 *   - sends to itself and receives it;
 *   - sends to its right neighbour and receives from its left (the ring);
 *   - sends a message and receives it with a receive whose stop request
 *     races the message (the send gets a stop request too, which it must
 *     ignore);
 *   - the same with a probe-then-receive (ex_mpi_recv_any_size).
 * A raced receive completes with the message, or stopped; then the
 * message is still in MPI and a plain receive takes it.  Either way every
 * message arrives exactly once with its value, every operation completes
 * exactly once, and every block (probe buffers included) is freed.  The
 * number of rounds is fixed, not timed: every rank must post the same
 * messages. */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include <cexec/mpi.h>

#include "stress/stress_util.h"

enum { THREADS = 3, WORKERS = 2, ROUNDS = 200, KINDS = 4 };
enum { K_SELF, K_RING, K_RACE_RECV, K_RACE_PROBE };

static int rank, nranks;
static ex_mpi_progress *engine;

static int left(void) { return (rank + nranks - 1) % nranks; }
static int right(void) { return (rank + 1) % nranks; }

/* A distinct tag per thread, round and kind (all below 32767, the least
 * MPI_TAG_UB MPI allows). */
static int tag_of(int t, int round, int kind) { return 1 + (t * ROUNDS + round) * KINDS + kind; }
/* The payload rank `from` sends for (t, round, kind). */
static int payload(int from, int t, int round, int kind) { return from * 1000000 + tag_of(t, round, kind); }

typedef struct exchange {
    const char *what;
    int kind;
    int out, in;
    srec send, recv;
    ex_operation *send_op, *recv_op;
} exchange;

static ex_sender *receive_of(exchange *x, int t, int round) {
    int from = x->kind == K_SELF ? rank : left();
    int tag = tag_of(t, round, x->kind);
    if (x->kind == K_RACE_PROBE) return ex_mpi_recv_any_size(engine, MPI_INT, from, tag, MPI_COMM_WORLD);
    return ex_mpi_irecv(engine, &x->in, 1, MPI_INT, from, tag, MPI_COMM_WORLD);
}

/* Starts x's receive, then its send (the receive may already be
 * stopped: the stop source is the receiver's). */
static void exchange_start(exchange *x, int t, int round, int *checks) {
    bool raced = x->kind == K_RACE_RECV || x->kind == K_RACE_PROBE;
    int to = x->kind == K_SELF ? rank : right();
    void (*init)(srec *) = raced ? srec_init : srec_init_plain;
    init(&x->recv);
    init(&x->send);
    x->in = -1;
    x->out = payload(rank, t, round, x->kind);
    x->recv_op = srec_connect(&x->recv, receive_of(x, t, round), round, checks);
    x->send_op = srec_connect(&x->send, ex_mpi_isend(engine, &x->out, 1, MPI_INT, to, tag_of(t, round, x->kind),
                                                     MPI_COMM_WORLD),
                              round, checks);
    if (x->recv_op) ex_start(x->recv_op);
    if (x->send_op) ex_start(x->send_op);
}

/* What the receive got: the value, or (stopped) what a plain receive of
 * the same message then gets. */
static int received(exchange *x, int t, int round) {
    int from = x->kind == K_SELF ? rank : left();
    if (x->recv.disp == D_STOPPED) {
        int in = -1;
        ex_result r = ex_sync_wait(ex_mpi_irecv(engine, &in, 1, MPI_INT, from, tag_of(t, round, x->kind),
                                                MPI_COMM_WORLD));
        CHECK(r.disposition == EX_DISP_VALUE, "round %d: %s: the receive after the stop failed", round, x->what);
        ex_result_destroy(&r);
        return in;
    }
    if (x->recv.disp != D_VALUE) return -1;
    if (x->kind != K_RACE_PROBE) return x->in;
    const int *buf = x->recv.v[0].as.p;
    int in = buf && x->recv.v[1].as.i == 1 ? *buf : -1;
    ex_mpi_free(x->recv.v[0].as.p);
    return in;
}

static void exchange_finish(exchange *x, int t, int round, int *checks) {
    if (!x->recv_op || !x->send_op) return;  /* reported by srec_connect */
    if (!srec_wait(&x->recv, x->what, round, checks)) return;
    int expect = payload(x->kind == K_SELF ? rank : left(), t, round, x->kind);
    /* Before waiting for the send: MPICH completes a send to the same
     * rank only once it is received. */
    int in = received(x, t, round);
    if (!srec_wait(&x->send, x->what, round, checks)) return;
    CHECK(in == expect, "round %d: %s: received %d, sent %d", round, x->what, in, expect);
    CHECK(x->send.disp == D_VALUE, "round %d: %s: the send completed with %d", round, x->what, x->send.disp);
    *checks += 2;
    srec_expect_once(&x->recv, x->what, round, checks);
    srec_expect_once(&x->send, x->what, round, checks);
    ex_operation_free(x->recv_op);
    ex_operation_free(x->send_op);
}

typedef struct thread_arg {
    int t;
    int checks;
    int values, stops;  /* raced receives that got the message / were stopped */
} thread_arg;

static void *thread_main(void *p) {
    thread_arg *a = p;
    rng_state = UINT64_C(0x9E3779B97F4A7C15) * (uint64_t)(rank * THREADS + a->t + 1);
    static const char *const names[KINDS] = { "self", "ring", "raced receive", "raced probe" };
    exchange x[KINDS];
    for (int round = 0; round < ROUNDS; round++) {
        for (int k = 0; k < KINDS; k++) {
            x[k].what = names[k];
            x[k].kind = k;
            exchange_start(&x[k], a->t, round, &a->checks);
        }
        /* The stop requests race the messages. */
        spin_delay(rnd(2000));
        ex_stop_source_request_stop(&x[K_RACE_RECV].recv.stop);
        ex_stop_source_request_stop(&x[K_RACE_PROBE].send.stop);
        spin_delay(rnd(500));
        ex_stop_source_request_stop(&x[K_RACE_PROBE].recv.stop);
        ex_stop_source_request_stop(&x[K_RACE_RECV].send.stop);
        for (int k = 0; k < KINDS; k++) {
            exchange_finish(&x[k], a->t, round, &a->checks);
            if (k < K_RACE_RECV) continue;
            a->values += x[k].recv.disp == D_VALUE;
            a->stops += x[k].recv.disp == D_STOPPED;
        }
    }
    return NULL;
}

int main(int argc, char **argv) {
    ex_error e = ex_mpi_init(&argc, &argv);
    if (e.code) {
        fprintf(stderr, "mpi_stress: ex_mpi_init: %s\n", e.msg);
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &nranks);
    int checks = 0;
    long baseline = stress_in_use();
    ex_pool *pool = stress_pool_new(WORKERS, &checks);
    if (pool) e = ex_mpi_progress_create(ex_pool_scheduler(pool), &engine);
    if (!pool || e.code) {
        fprintf(stderr, "mpi_stress rank %d: setup failed\n", rank);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    pthread_t th[THREADS];
    thread_arg args[THREADS];
    double t0 = now_s();
    for (int t = 0; t < THREADS; t++) {
        args[t] = (thread_arg){ t, 0, 0, 0 };
        pthread_create(&th[t], NULL, thread_main, &args[t]);
    }
    int values = 0, stops = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        checks += args[t].checks;
        values += args[t].values;
        stops += args[t].stops;
    }
    double secs = now_s() - t0;
    MPI_Barrier(MPI_COMM_WORLD);
    ex_mpi_progress_stats st = ex_mpi_progress_get_stats(engine);
    CHECK(st.submitted == st.completed, "submitted %llu, completed %llu", (unsigned long long)st.submitted,
          (unsigned long long)st.completed);
    e = ex_mpi_progress_destroy(engine);
    CHECK(e.code == 0, "engine destroy: %d", e.code);
    checks += 2;
    stress_pool_free(pool, &checks);
    expect_round_freed(&baseline, ROUNDS, &checks);
    printf("mpi_stress rank %d: %d threads x %d rounds in %.2f s; raced receives: %d values, %d stopped; %llu "
           "requests\n",
           rank, THREADS, ROUNDS, secs, values, stops, (unsigned long long)st.submitted);
    char name[48];
    snprintf(name, sizeof name, "mpi_stress rank %d", rank);
    int rc = stress_finish(name, checks);
    (void)ex_mpi_finalize();
    return rc;
}
