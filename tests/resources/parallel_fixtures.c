/* SPDX-License-Identifier: MIT */
/* parallel_fixtures.c - see parallel_fixtures.h. */
#include "base/exi_atomic.h"
#include "resources/parallel_fixtures.h"

static _Thread_local bool on_backend;

bool test_backend_on_thread(void) { return on_backend; }

/* Under mu: the oldest item, or NULL. */
static ex_work *pop(test_backend *b) {
    ex_work *w = b->head;
    if (!w) return NULL;
    b->head = w->next;
    if (!b->head) b->tail = NULL;
    w->next = NULL;
    return w;
}

static void *serve(void *arg) {
    test_backend *b = arg;
    on_backend = true;
    pthread_mutex_lock(&b->mu);
    for (;;) {
        while (!b->stopping && (b->paused || !b->head)) pthread_cond_wait(&b->cv, &b->mu);
        if (b->stopping) break;
        ex_work *w = pop(b);
        pthread_mutex_unlock(&b->mu);
        atomic_fetch_add(&b->executed, 1);
        w->execute(w);
        pthread_mutex_lock(&b->mu);
    }
    pthread_mutex_unlock(&b->mu);
    return NULL;
}

static ex_error tb_schedule(void *self, ex_work *w) {
    test_backend *b = self;
    atomic_fetch_add(&b->schedules, 1);
    if (atomic_load(&b->refuse)) return ex_err(TEST_BACKEND_REFUSED, "test backend: refused");
    pthread_mutex_lock(&b->mu);
    if (b->stopping) {
        pthread_mutex_unlock(&b->mu);
        return ex_err(EX_ESHUTDOWN, "test backend: stopped");
    }
    w->next = NULL;
    if (b->tail) b->tail->next = w;
    else b->head = w;
    b->tail = w;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
    return ex_ok();
}

/* Stops the threads, then cancels what they left queued. */
static void tb_shutdown(void *self) {
    test_backend *b = self;
    atomic_fetch_add(&b->shutdowns, 1);
    pthread_mutex_lock(&b->mu);
    b->stopping = true;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    for (unsigned i = 0; i < b->nthreads; i++) pthread_join(b->threads[i], NULL);
    for (ex_work *w; (w = pop(b));) {
        atomic_fetch_add(&b->cancelled, 1);
        w->cancel(w);
    }
}

/* ------------------------------------------------------------ own bulk */

/* One index at a time claimed from scratch[0]; scratch[1] counts the
 * helpers still inside.  The caller does not take part: every index runs
 * on the backend's threads. */
static void own_bulk_leave(ex_bulk_job *job) {
    if (exi_faa_u64(&job->scratch[1], (uint64_t)-1) == 1) ex_bulk_job_done(job);
}

static void own_bulk_run(ex_work *w) {
    ex_bulk_job *job = ((ex_bulk_helper *)(void *)w)->job;
    for (;;) {
        uint64_t i = exi_faa_u64(&job->scratch[0], 1);
        if (i >= job->shape) break;
        if (!ex_bulk_job_run(job, (size_t)i, (size_t)i + 1)) break;
    }
    own_bulk_leave(job);
}

static void own_bulk_cancel(ex_work *w) { own_bulk_leave(((ex_bulk_helper *)(void *)w)->job); }

static void tb_bulk(void *self, ex_bulk_job *job) {
    test_backend *b = self;
    atomic_fetch_add(&b->bulks, 1);
    exi_store_rlx_u64(&job->scratch[0], 0);
    exi_store_rel_u64(&job->scratch[1], EX_BULK_INLINE_HELPERS);
    for (unsigned i = 0; i < EX_BULK_INLINE_HELPERS; i++) {
        ex_bulk_helper *h = &job->helpers[i];
        h->job = job;
        h->work.next = NULL;
        h->work.execute = own_bulk_run;
        h->work.cancel = own_bulk_cancel;
        if (tb_schedule(b, &h->work).code) own_bulk_run(&h->work);  /* refused: run it here */
    }
}

/* ------------------------------------------------------------- set up */

void test_backend_start(test_backend *b, unsigned threads) {
    cr_assert(threads >= 1 && threads <= TEST_BACKEND_MAX_THREADS);
    pthread_mutex_init(&b->mu, NULL);
    pthread_cond_init(&b->cv, NULL);
    b->head = b->tail = NULL;
    b->stopping = b->paused = false;
    atomic_init(&b->refuse, false);
    atomic_init(&b->schedules, 0);
    atomic_init(&b->bulks, 0);
    atomic_init(&b->shutdowns, 0);
    atomic_init(&b->executed, 0);
    atomic_init(&b->cancelled, 0);
    b->nthreads = threads;
    for (unsigned i = 0; i < threads; i++) cr_assert_eq(pthread_create(&b->threads[i], NULL, serve, b), 0);
}

ex_parallel_backend test_backend_iface(test_backend *b, bool own_bulk) {
    ex_parallel_backend be = { tb_schedule, own_bulk ? tb_bulk : NULL, tb_shutdown, b->nthreads, b };
    return be;
}

void test_backend_install(test_backend *b, unsigned threads, bool own_bulk) {
    test_backend_start(b, threads);
    ex_parallel_backend be = test_backend_iface(b, own_bulk);
    ex_error e = ex_parallel_scheduler_set_backend(&be);
    cr_assert_eq(e.code, EX_OK, "set_backend before first use: %s", e.msg ? e.msg : "");
}

void test_backend_pause(test_backend *b) {
    pthread_mutex_lock(&b->mu);
    b->paused = true;
    pthread_mutex_unlock(&b->mu);
}

void test_backend_resume(test_backend *b) {
    pthread_mutex_lock(&b->mu);
    b->paused = false;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

int test_backend_queued(test_backend *b) {
    pthread_mutex_lock(&b->mu);
    int n = 0;
    for (ex_work *w = b->head; w; w = w->next) n++;
    pthread_mutex_unlock(&b->mu);
    return n;
}
