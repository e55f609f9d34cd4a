/* SPDX-License-Identifier: MIT */
/* parallel_fixtures.h - a parallel-scheduler backend of the test's own
 * (ex_parallel_backend): a few threads serving one FIFO under a mutex,
 * counting every call, optionally with a bulk of its own, and able to hold
 * its items (paused) or refuse work.
 *
 * Criterion runs each test in a process of its own, so every test that
 * installs a backend does it before that process's first use of the
 * parallel scheduler. */
#ifndef CEXEC_TEST_PARALLEL_FIXTURES_H
#define CEXEC_TEST_PARALLEL_FIXTURES_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "common/helpers.h"

#define TEST_BACKEND_MAX_THREADS 8

/* The error a refusing backend gives. */
#define TEST_BACKEND_REFUSED (EX_EUSER + 22)

typedef struct test_backend {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ex_work *head, *tail;      /* under mu */
    bool stopping;             /* under mu: the shutdown hook ran */
    bool paused;               /* under mu: threads leave queued items alone */
    atomic_bool refuse;        /* schedule returns TEST_BACKEND_REFUSED */
    unsigned nthreads;
    pthread_t threads[TEST_BACKEND_MAX_THREADS];
    atomic_int schedules, bulks, shutdowns, executed, cancelled;
} test_backend;

/* Starts `threads` threads (at most TEST_BACKEND_MAX_THREADS). */
void test_backend_start(test_backend *b, unsigned threads);

/* Its interface: schedule, shutdown (joins the threads, cancels what is
 * queued), concurrency = threads, and its own bulk when own_bulk (else
 * NULL: the parallel scheduler shares jobs out through schedule). */
ex_parallel_backend test_backend_iface(test_backend *b, bool own_bulk);

/* test_backend_start and ex_parallel_scheduler_set_backend (asserted). */
void test_backend_install(test_backend *b, unsigned threads, bool own_bulk);

/* Lets paused threads run the queued items again. */
void test_backend_resume(test_backend *b);
void test_backend_pause(test_backend *b);

/* Items queued and not yet taken. */
int test_backend_queued(test_backend *b);

/* Whether the calling thread is one of a test backend's threads. */
bool test_backend_on_thread(void);

#endif
