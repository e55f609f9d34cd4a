/* SPDX-License-Identifier: MIT */
/* parsched_stress.c - the parallel scheduler's first use, raced
 * (parallel_scheduler.h).
 *
 * First use happens once per process, so every round is a fork() child
 * of this single-threaded parent.  In the child, RACERS threads leave a
 * barrier together and call ex_parallel_scheduler() at once, then run
 * work through the handle they got.  Modes, in turn:
 *   - default: exactly one pool is created (all handles equal, the same
 *     ex_parallel_scheduler_pool everywhere, and exactly
 *     ex_default_thread_count() threads named cexec-par-*);
 *   - install: one more thread calls ex_parallel_scheduler_set_backend in
 *     the same instant: it either wins (EX_OK: every handle is the
 *     backend's, no pool, the backend ran the work) or loses (EX_EBUSY:
 *     every handle is the pool's, the backend never called); never a mix;
 *   - shutdown: once the racers run, one thread calls
 *     ex_parallel_scheduler_shutdown while they keep scheduling: each
 *     schedule completes exactly once, with a value before the shutdown
 *     and EX_ESHUTDOWN after it, and a bulk always covers its indices.
 * Each child then returns from its round through exit(), so the exit
 * handler runs (joining the workers when idle) in every round.  The
 * handles, counters and flags are plain memory written by the racers and
 * read after the joins: TSan checks the library's hand-overs.  Bounded:
 * rounds run for about 4 seconds. */
#include <dirent.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "stress_util.h"

enum { RACERS = 6, WORK = 40, BULK = 64, MAX_ROUNDS = 400 };
#define BUDGET_S 4.0

enum { M_DEFAULT, M_INSTALL, M_SHUTDOWN, M_COUNT };

static pthread_barrier_t barrier;
static int mode;

typedef struct racer {
    pthread_t thread;
    ex_scheduler sch;
    ex_pool *pool;
    int values, refused, dropped, other;  /* schedule completions (dropped: stopped by a shutdown) */
    int bulk_bad;                   /* bulks that missed or repeated an index */
    unsigned char seen[BULK];
} racer;

static racer racers[RACERS];
static atomic_int running;           /* racers that have made their first schedule */

/* ------------------------------------------------------ a small backend */

/* Two threads serving a FIFO under a mutex: the application's own pool. */
static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ex_work *head, *tail;
    bool stop;
    pthread_t threads[2];
    atomic_int calls;
} be;

static void *be_serve(void *arg) {
    (void)arg;
    pthread_mutex_lock(&be.mu);
    for (;;) {
        while (!be.stop && !be.head) pthread_cond_wait(&be.cv, &be.mu);
        if (be.stop) break;
        ex_work *w = be.head;
        be.head = w->next;
        if (!be.head) be.tail = NULL;
        pthread_mutex_unlock(&be.mu);
        w->execute(w);
        pthread_mutex_lock(&be.mu);
    }
    pthread_mutex_unlock(&be.mu);
    return NULL;
}

static ex_error be_schedule(void *self, ex_work *w) {
    (void)self;
    atomic_fetch_add(&be.calls, 1);
    pthread_mutex_lock(&be.mu);
    bool stopped = be.stop;
    if (!stopped) {
        w->next = NULL;
        if (be.tail) be.tail->next = w;
        else be.head = w;
        be.tail = w;
        pthread_cond_signal(&be.cv);
    }
    pthread_mutex_unlock(&be.mu);
    return stopped ? ex_err(EX_ESHUTDOWN, "stress backend: stopped") : ex_ok();
}

static void be_start(void) {
    pthread_mutex_init(&be.mu, NULL);
    pthread_cond_init(&be.cv, NULL);
    for (int i = 0; i < 2; i++) pthread_create(&be.threads[i], NULL, be_serve, NULL);
}

/* Stops the threads; cancels what they left. */
static void be_shutdown(void *self) {
    (void)self;
    pthread_mutex_lock(&be.mu);
    be.stop = true;
    pthread_cond_broadcast(&be.cv);
    pthread_mutex_unlock(&be.mu);
    for (int i = 0; i < 2; i++) pthread_join(be.threads[i], NULL);
    for (ex_work *w = be.head; w;) {
        ex_work *next = w->next;
        w->cancel(w);
        w = next;
    }
    be.head = be.tail = NULL;
}

/* ------------------------------------------------------------- racers */

static ex_error mark(void *ctx, size_t i, const ex_value *v, size_t n) {
    (void)v, (void)n;
    ((unsigned char *)ctx)[i]++;  /* plain: each index once, read after the bulk completed */
    return ex_ok();
}

static void one_schedule(racer *r) {
    ex_result res = ex_sync_wait(ex_schedule(r->sch));
    if (res.disposition == EX_DISP_VALUE) r->values++;
    else if (res.disposition == EX_DISP_ERROR && res.error.code == EX_ESHUTDOWN) r->refused++;
    else if (res.disposition == EX_DISP_STOPPED) r->dropped++;  /* queued, then dropped by the shutdown */
    else r->other++;
    ex_result_destroy(&res);
}

static void one_bulk(racer *r) {
    memset(r->seen, 0, sizeof r->seen);
    ex_result res = ex_sync_wait(ex_bulk(ex_schedule(r->sch), EX_PAR, BULK, mark, r->seen));
    bool ran = res.disposition == EX_DISP_VALUE;
    ex_result_destroy(&res);
    if (!ran) return;  /* refused: the schedule before it failed */
    for (int i = 0; i < BULK; i++) r->bulk_bad += r->seen[i] != 1;
}

static void *race(void *arg) {
    racer *r = arg;
    pthread_barrier_wait(&barrier);
    r->sch = ex_parallel_scheduler();
    r->pool = ex_parallel_scheduler_pool();
    for (int k = 0; k < WORK; k++) {
        one_schedule(r);
        if (k == 0) atomic_fetch_add(&running, 1);
        if (k % 8 == 0) one_bulk(r);
    }
    return NULL;
}

static ex_error install_code;

static void *install(void *arg) {
    (void)arg;
    ex_parallel_backend b = { be_schedule, NULL, be_shutdown, 2, NULL };
    pthread_barrier_wait(&barrier);
    install_code = ex_parallel_scheduler_set_backend(&b);
    return NULL;
}

static void *shut_down(void *arg) {
    (void)arg;
    pthread_barrier_wait(&barrier);
    while (atomic_load(&running) < RACERS) sched_yield();
    spin_delay(rnd(20000));
    ex_error e = ex_parallel_scheduler_shutdown();
    CHECK(e.code == EX_OK, "shutdown: %s", e.msg ? e.msg : "");
    return NULL;
}

/* Threads of this process named cexec-par-*. */
static int parallel_threads(void) {
    DIR *d = opendir("/proc/self/task");
    if (!d) return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (e->d_name[0] == '.') continue;
        char path[300], comm[32] = "";
        snprintf(path, sizeof path, "/proc/self/task/%s/comm", e->d_name);
        FILE *f = fopen(path, "r");
        if (!f) continue;
        if (fgets(comm, sizeof comm, f) && !strncmp(comm, "cexec-par-", 10)) n++;
        fclose(f);
    }
    closedir(d);
    return n;
}

/* ---------------------------------------------------------- one round */

static int totals(int *values, int *refused) {
    int other = 0, bad = 0, dropped = 0;
    *values = *refused = 0;
    for (int i = 0; i < RACERS; i++) {
        *values += racers[i].values;
        *refused += racers[i].refused;
        dropped += racers[i].dropped;
        other += racers[i].other;
        bad += racers[i].bulk_bad;
    }
    CHECK(other == 0, "%d schedule(s) completed neither with a value nor EX_ESHUTDOWN", other);
    /* A schedule queued just before the shutdown is dropped by it and
     * completes stopped (as on any pool); without a shutdown, none is. */
    CHECK(mode == M_SHUTDOWN || dropped == 0, "%d schedule(s) completed stopped with no shutdown", dropped);
    CHECK(bad == 0, "%d bulk index(es) missed or run twice", bad);
    return 3;
}

static int check_round(void) {
    int checks = 0;
    for (int i = 1; i < RACERS; i++) {
        CHECK(ex_scheduler_equal(racers[i].sch, racers[0].sch), "racer %d got another handle", i);
        CHECK(racers[i].pool == racers[0].pool, "racer %d saw another pool", i);
        checks += 2;
    }
    int values, refused;
    checks += totals(&values, &refused);
    bool on_pool = racers[0].pool != NULL;
    if (mode == M_INSTALL) {
        CHECK(install_code.code == (on_pool ? EX_EBUSY : EX_OK), "set_backend gave %d with%s a pool", install_code.code,
              on_pool ? "" : "out");
        CHECK(on_pool == (atomic_load(&be.calls) == 0), "the backend was called %d time(s) %s a pool",
              atomic_load(&be.calls), on_pool ? "beside" : "without");
        checks += 2;
    } else {
        CHECK(on_pool, "no pool was created");
        checks++;
    }
    if (on_pool) {
        unsigned want = ex_default_thread_count();
        if (want > 4096) want = 4096;
        /* Workers name themselves when they start: wait for that. */
        int threads = parallel_threads();
        for (double until = now_s() + 20; mode != M_SHUTDOWN && threads < (int)want && now_s() < until;
             threads = parallel_threads())
            usleep(1000);
        if (mode != M_SHUTDOWN) {  /* (shut down: its workers are gone) */
            CHECK(threads == (int)want, "%d threads named cexec-par-*, not %u: more than one pool", threads, want);
            checks++;
        }
    }
    if (mode == M_SHUTDOWN) {
        CHECK(values >= RACERS, "a racer's first schedule, before the shutdown, was refused");
        checks++;
    } else {
        CHECK(values == RACERS * WORK && refused == 0, "%d values, %d refused, of %d", values, refused, RACERS * WORK);
        checks++;
    }
    return checks;
}

static void run_round(int m) {
    mode = m;
    if (m == M_INSTALL) be_start();
    int extra = m == M_DEFAULT ? 0 : 1;
    pthread_barrier_init(&barrier, NULL, (unsigned)(RACERS + extra));
    for (int i = 0; i < RACERS; i++) pthread_create(&racers[i].thread, NULL, race, &racers[i]);
    pthread_t other;
    if (m == M_INSTALL) pthread_create(&other, NULL, install, NULL);
    if (m == M_SHUTDOWN) pthread_create(&other, NULL, shut_down, NULL);
    for (int i = 0; i < RACERS; i++) pthread_join(racers[i].thread, NULL);
    if (extra) pthread_join(other, NULL);
    int checks = check_round();
    if (m == M_INSTALL && install_code.code == EX_OK) ex_parallel_scheduler_shutdown();
    if (m == M_INSTALL && install_code.code != EX_OK) be_shutdown(NULL);
    pthread_barrier_destroy(&barrier);
    /* Through exit(): the exit handler runs. */
    exit(stress_failures ? 1 : checks > 0 ? 0 : 1);
}

int main(void) {
    double t0 = now_s();
    int rounds = 0, failed = 0, per_mode[M_COUNT] = { 0 };
    while (rounds < MAX_ROUNDS && (rounds < M_COUNT * 2 || now_s() - t0 < BUDGET_S)) {
        int m = rounds % M_COUNT;
        fflush(NULL);
        pid_t pid = fork();
        if (pid < 0) {
            CHECK(pid >= 0, "fork failed");
            break;
        }
        if (pid == 0) run_round(m);
        int status = 0;
        waitpid(pid, &status, 0);
        bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
        CHECK(ok, "round %d (mode %d) failed: status %d", rounds, m, status);
        failed += !ok;
        per_mode[m]++;
        rounds++;
        if (failed > 5) break;
    }
    printf("parsched_stress: %d rounds in %.1f s (default %d, install %d, shutdown %d)\n", rounds, now_s() - t0,
           per_mode[M_DEFAULT], per_mode[M_INSTALL], per_mode[M_SHUTDOWN]);
    return stress_finish("parsched_stress", rounds);
}
