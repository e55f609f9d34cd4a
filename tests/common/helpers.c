/* helpers.c - shared test fixtures. */
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/helpers.h"

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_LSAN 1
#endif
#endif
#ifdef HAVE_LSAN
#include <sanitizer/lsan_interface.h>

/* A request malloc cannot meet (a size near SIZE_MAX, where cexec must
 * report EX_ENOMEM) returns NULL under ASan too, as in plain builds,
 * instead of aborting the test (ASAN_OPTIONS still overrides this). */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1"; }
#endif

test_alloc_stats test_stats;
static pthread_mutex_t stats_mu = PTHREAD_MUTEX_INITIALIZER;

/* With CEXEC_OOM_TALLY=path, every injected failure appends one byte to
 * the file (tests run in separate processes): `wc -c path` after a run is
 * the number of out-of-memory points the suite went through. */
static void tally_injected_failure(void) {
    const char *path = getenv("CEXEC_OOM_TALLY");
    if (!path) return;
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return;
    ssize_t w = write(fd, "x", 1);
    (void)w;
    close(fd);
}

static void *t_allocate(void *ctx, size_t size, size_t align) {
    (void)ctx;
    pthread_mutex_lock(&stats_mu);
    long nth = ++test_stats.allocs;
    bool fail = test_stats.fail_at && nth == test_stats.fail_at;
    if (fail) test_stats.failed++;
    pthread_mutex_unlock(&stats_mu);
    if (fail) {
        tally_injected_failure();
        return NULL;
    }
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size ? size : 1)) return NULL;
    pthread_mutex_lock(&stats_mu);
    test_stats.in_use++;
    pthread_mutex_unlock(&stats_mu);
    return p;
}

static void t_deallocate(void *ctx, void *p, size_t size, size_t align) {
    (void)ctx, (void)size, (void)align;
    free(p);
    pthread_mutex_lock(&stats_mu);
    test_stats.frees++;
    test_stats.in_use--;
    pthread_mutex_unlock(&stats_mu);
}

ex_allocator test_allocator = { t_allocate, t_deallocate, NULL, "test", NULL };

void test_alloc_reset(void) {
    pthread_mutex_lock(&stats_mu);
    long in_use = test_stats.in_use;
    memset(&test_stats, 0, sizeof test_stats);
    test_stats.in_use = in_use;
    pthread_mutex_unlock(&stats_mu);
}

void test_alloc_fail_at(long nth) {
    pthread_mutex_lock(&stats_mu);
    test_stats.fail_at = test_stats.allocs + nth;
    pthread_mutex_unlock(&stats_mu);
}

long test_alloc_count(void) {
    pthread_mutex_lock(&stats_mu);
    long n = test_stats.allocs;
    pthread_mutex_unlock(&stats_mu);
    return n;
}

void test_setup(void) {
    memset(&test_stats, 0, sizeof test_stats);
    ex_set_default_allocator(&test_allocator);
}

void test_teardown(void) { ex_set_default_allocator(NULL); }

void expect_no_leaks(void) {
    pthread_mutex_lock(&stats_mu);
    long in_use = test_stats.in_use;
    pthread_mutex_unlock(&stats_mu);
    cr_expect_eq(in_use, 0, "%ld block(s) from the test allocator were not freed", in_use);
#ifdef HAVE_LSAN
    cr_expect_eq(__lsan_do_recoverable_leak_check(), 0, "LeakSanitizer found leaks");
#endif
}

/* ------------------------------------------------------ recording receiver */

static _Thread_local char thread_marker;
const void *test_thread_id(void) { return &thread_marker; }

static void rec_set_value(void *self, const ex_value *v, size_t n) {
    rec *r = self;
    r->values++;
    r->n = n;
    for (size_t i = 0; i < n && i < EX_MAX_ARITY; i++) r->v[i] = v[i];
    r->thread = test_thread_id();
}

static void rec_set_error(void *self, ex_error e) {
    rec *r = self;
    r->errors++;
    r->err = e;
    r->thread = test_thread_id();
}

static void rec_set_stopped(void *self) {
    rec *r = self;
    r->stops++;
    r->thread = test_thread_id();
}

static ex_env rec_env(void *self) { return ((rec *)self)->env; }

void rec_init(rec *r) {
    memset(r, 0, sizeof *r);
    r->vt.set_value = rec_set_value;
    r->vt.set_error = rec_set_error;
    r->vt.set_stopped = rec_set_stopped;
    r->vt.env = rec_env;
    r->env = ex_env_empty();
    ex_stop_source_init(&r->stop);
}

ex_receiver rec_receiver(rec *r) {
    ex_receiver x = { &r->vt, r };
    return x;
}

int rec_total(const rec *r) { return r->values + r->errors + r->stops; }

void rec_with_stop(rec *r) {
    ex_env_pair_init(&r->pair, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&r->stop)), ex_env_empty());
    r->env = ex_env_of_pair(&r->pair);
}

void rec_with_scheduler(rec *r, ex_scheduler sch) {
    if (r->pair.node.query) {
        r->pair.key2 = &ex_key_get_scheduler;
        r->pair.value2 = ex_sched_value(sch);
    } else {
        ex_env_pair_init(&r->pair, &ex_key_get_scheduler, ex_sched_value(sch), ex_env_empty());
    }
    r->env = ex_env_of_pair(&r->pair);
}

static void tr_value(void *self, const ex_value *v, size_t n) {
    trec *a = self;
    a->r.vt.set_value(&a->r, v, n);
    atomic_store(&a->done, 1);
}
static void tr_error(void *self, ex_error e) {
    trec *a = self;
    a->r.vt.set_error(&a->r, e);
    atomic_store(&a->done, 1);
}
static void tr_stopped(void *self) {
    trec *a = self;
    a->r.vt.set_stopped(&a->r);
    atomic_store(&a->done, 1);
}
static ex_env tr_env(void *self) {
    trec *a = self;
    return a->r.vt.env(&a->r);
}

void trec_init(trec *a) {
    rec_init(&a->r);
    a->vt.set_value = tr_value;
    a->vt.set_error = tr_error;
    a->vt.set_stopped = tr_stopped;
    a->vt.env = tr_env;
    a->vt.accepts = NULL;
    atomic_init(&a->done, 0);
}

ex_receiver trec_receiver(trec *a) {
    ex_receiver x = { &a->vt, a };
    return x;
}

static void arec_note(arec *r) {
    r->worker = r->pool ? ex_pool_current_worker(r->pool) : -1;
    r->thread = test_thread_id();
}

static void arec_value(void *self, const ex_value *v, size_t n) {
    arec *r = self;
    arec_note(r);
    r->n = n;
    for (size_t i = 0; i < n && i < EX_MAX_ARITY; i++) r->v[i] = v[i];
    atomic_fetch_add(&r->values, 1);
    atomic_fetch_add(&r->total, 1);
}

static void arec_error(void *self, ex_error e) {
    arec *r = self;
    arec_note(r);
    r->err = e;
    atomic_fetch_add(&r->errors, 1);
    atomic_fetch_add(&r->total, 1);
}

static void arec_stopped(void *self) {
    arec *r = self;
    arec_note(r);
    atomic_fetch_add(&r->stops, 1);
    atomic_fetch_add(&r->total, 1);
}

static ex_env arec_env(void *self) {
    arec *r = self;
    return r->has_env ? ex_env_of_pair(&r->pair) : ex_env_empty();
}

const ex_receiver_vtable arec_vt = { arec_value, arec_error, arec_stopped, arec_env, NULL };

void arec_init(arec *r, ex_pool *p) {
    memset(r, 0, sizeof *r);
    r->pool = p;
    r->worker = -2;
    ex_stop_source_init(&r->stop);
}

ex_receiver arec_receiver(arec *r) {
    ex_receiver x = { &arec_vt, r };
    return x;
}

void arec_with_stop(arec *r) {
    ex_env_pair_init(&r->pair, &ex_key_get_stop_token, ex_token_value(ex_stop_source_token(&r->stop)), ex_env_empty());
    r->has_env = true;
}


ex_operation *run_start(ex_sender *s, rec *r) {
    ex_operation *op = NULL;
    ex_error e = ex_connect_alloc(s, rec_receiver(r), &op);
    cr_assert_eq(e.code, 0, "connect failed: %s", e.msg ? e.msg : "");
    ex_start(op);
    return op;
}

void run_destroy(ex_operation *op) { ex_operation_free(op); }

void expect_value_int(ex_result *r, int64_t v) {
    cr_assert_eq(r->disposition, EX_DISP_VALUE, "expected a value, got disposition %d (%s)", r->disposition,
                 r->error.msg ? r->error.msg : "");
    cr_assert_eq(r->n, 1);
    cr_assert_eq(r->values[0].type, EX_T_INT);
    cr_assert_eq(r->values[0].as.i, v);
}

void expect_error(ex_result *r, int code) {
    cr_assert_eq(r->disposition, EX_DISP_ERROR, "expected an error, got disposition %d", r->disposition);
    cr_assert_eq(r->error.code, code, "expected error %d, got %d (%s)", code, r->error.code,
                 r->error.msg ? r->error.msg : "");
    cr_assert_not_null(r->error.msg);
}

double test_now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void test_sleep_ms(long ms) {
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0) {}
}
