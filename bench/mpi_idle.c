/* SPDX-License-Identifier: MIT */
/* mpi_idle.c - what MPI progress costs on an idle pool (make bench-mpi-idle,
 * one rank): the process's CPU time over 2 s with an engine and nothing
 * pending, then with one receive pending that nobody sends to.  Prints
 * milliseconds of CPU per second for each, and the engine's rounds. */
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

#include <cexec/cexec.h>
#include <cexec/mpi.h>

static double cpu_s(void) {
    struct rusage u;
    getrusage(RUSAGE_SELF, &u);
    return (double)(u.ru_utime.tv_sec + u.ru_stime.tv_sec) + (double)(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

static void pause_s(double s) {
    struct timespec ts = { (time_t)s, (long)((s - (double)(time_t)s) * 1e9) };
    nanosleep(&ts, NULL);
}

/* CPU milliseconds a second over a 2 s quiet window (after 0.5 s to settle). */
static double cpu_ms_per_s(void) {
    pause_s(0.5);
    double c0 = cpu_s();
    pause_s(2.0);
    return (cpu_s() - c0) / 2.0 * 1e3;
}

static void ignore_value(void *self, const ex_value *v, size_t n) { (void)self, (void)v, (void)n; }
static void ignore_error(void *self, ex_error e) { (void)self, ex_error_release(e); }
static void ignore_stopped(void *self) { (void)self; }
static const ex_receiver_vtable ignore_vt = { ignore_value, ignore_error, ignore_stopped, NULL, NULL };

int main(int argc, char **argv) {
    ex_error e = ex_mpi_init(&argc, &argv);
    ex_pool_config cfg = { 0 };
    cfg.threads = 2;
    ex_pool *pool = NULL;
    ex_mpi_progress *engine = NULL;
    if (!e.code) e = ex_pool_create(&cfg, &pool);
    if (!e.code) e = ex_mpi_progress_create(ex_pool_scheduler(pool), &engine);
    if (e.code) {
        fprintf(stderr, "mpi_idle: %s\n", e.msg);
        return 1;
    }
    printf("mpi_idle: 2-worker pool, engine, nothing pending: %.2f ms CPU/s\n", cpu_ms_per_s());

    int buf = 0;
    ex_stop_source src;
    ex_stop_source_init(&src);
    ex_operation *op = NULL;
    ex_receiver r = { &ignore_vt, NULL };
    e = ex_connect_alloc(ex_link_stop_token(ex_mpi_irecv(engine, &buf, 1, MPI_INT, 0, 4242, MPI_COMM_WORLD),
                                            ex_stop_source_token(&src)),
                         r, &op);
    if (e.code) {
        fprintf(stderr, "mpi_idle: %s\n", e.msg);
        return 1;
    }
    ex_start(op);
    ex_mpi_progress_stats before = ex_mpi_progress_get_stats(engine);
    double ms = cpu_ms_per_s();
    ex_mpi_progress_stats after = ex_mpi_progress_get_stats(engine);
    printf("mpi_idle: one receive pending: %.2f ms CPU/s (%llu rounds in 2.5 s)\n", ms,
           (unsigned long long)(after.rounds - before.rounds));
    ex_stop_source_request_stop(&src);
    while (ex_mpi_progress_destroy(engine).code == EX_EBUSY) pause_s(0.001);
    ex_operation_free(op);
    ex_pool_destroy(pool);
    ex_mpi_finalize();
    return 0;
}
