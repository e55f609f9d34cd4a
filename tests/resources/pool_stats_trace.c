/* SPDX-License-Identifier: MIT */
/* The pool: per-worker statistics, parking, and the Chrome trace it
 * writes (suite exec_pool, declared in pool_create.c). */
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "resources/pool_fixtures.h"

/* ================================================================== stats */

Test(exec_pool, stats_bad_index_is_einval) {
    ex_pool *p = test_pool_new(2);
    ex_pool_worker_stats st;
    cr_assert_eq(ex_pool_lend_slots(p), 2u, "as many lent slots as workers by default");
    cr_assert_eq(ex_pool_worker_stats_get(p, 3, &st).code, 0, "lent slots have counters");
    ex_error e = ex_pool_worker_stats_get(p, 4, &st);
    cr_assert_eq(e.code, EX_EINVAL);
    cr_assert_not_null(e.msg);
    cr_assert_eq(ex_pool_worker_stats_get(p, 0xffffffffu, &st).code, EX_EINVAL);
    cr_assert_eq(ex_pool_worker_stats_get(p, 1, &st).code, 0);
    cr_assert_eq(ex_pool_worker_stats_get(p, 0, &st).code, 0);
    test_pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, stats_executed_sums_to_items_run) {
    enum { N = 3000 };
    ex_pool *p = test_pool_new(4);
    ex_pool_worker_stats before = stats_sum(p);
    cr_assert_eq(before.executed, 0u, "a fresh pool ran nothing");
    slot *s = slots_new(N);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
    slots_start(s, N, p, snd);
    cr_assert_eq(wait_long_reaches(&g_completed, N), N);
    ex_pool_worker_stats sum = stats_sum(p);
    cr_assert_eq(sum.executed, (uint64_t)N, "executed %llu of %d", (unsigned long long)sum.executed, N);
    /* per-worker counts add up and none exceeds the total */
    uint64_t per = 0;
    for (unsigned i = 0; i < ex_pool_size(p); i++) {
        ex_pool_worker_stats st;
        cr_assert_eq(ex_pool_worker_stats_get(p, i, &st).code, 0);
        cr_assert_leq(st.executed, (uint64_t)N);
        cr_assert_leq(st.stolen, st.executed, "worker %u stole more than it ran", i);
        per += st.executed;
    }
    cr_assert_eq(per, (uint64_t)N);
    slots_destroy(s, N);
    ex_sender_release(snd);
    free(s);
    test_pool_free(p);
    expect_no_leaks();
}

Test(exec_pool, idle_workers_park_and_are_woken_for_new_work) {
    ex_pool_config c = test_pool_config(2, NULL);
    c.spin_rounds = 1;
    c.lend_slots = -1;  /* the waiting caller would run the items itself */
    ex_pool *p = test_pool_new_cfg(&c);
    /* Every worker parks once it finds nothing (bounded wait). */
    double end = test_now_s() + TEST_WAIT_LIMIT_S;
    bool all_parked = false;
    while (!all_parked && test_now_s() < end) {
        test_sleep_ms(5);
        all_parked = true;
        for (unsigned i = 0; i < 2; i++) {
            ex_pool_worker_stats st;
            cr_assert_eq(ex_pool_worker_stats_get(p, i, &st).code, 0);
            if (st.parked == 0) all_parked = false;
        }
    }
    cr_assert(all_parked, "an idle worker never parked");
    /* Work for a parked pool wakes a worker. */
    uint64_t woken0 = stats_sum(p).woken;
    int items = 0;
    end = test_now_s() + TEST_WAIT_LIMIT_S;
    while (stats_sum(p).woken == woken0 && test_now_s() < end) {
        test_sleep_ms(20);
        where w;
        run_where(p, &w);
        items++;
        cr_assert_geq(w.worker, 0);
    }
    ex_pool_worker_stats sum = stats_sum(p);
    cr_assert_gt(sum.woken, woken0, "no worker was counted as woken for work");
    cr_assert_eq(sum.executed, (uint64_t)items);
    test_pool_free(p);
    expect_no_leaks();
}

static double cpu_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

Test(exec_pool, idle_pool_uses_almost_no_cpu) {
    ex_pool *p = test_pool_new(2);
    for (int i = 0; i < 100; i++) {
        where w;
        run_where(p, &w);
    }
    test_sleep_ms(20); /* let the workers finish spinning */
    double c0 = cpu_s();
    test_sleep_ms(200);
    double used = cpu_s() - c0;
    /* Resource check, generous: spinning workers would use ~400 ms here. */
    cr_assert_lt(used, 0.050, "an idle 2-thread pool used %.1f ms of CPU in 200 ms", used * 1000);
    test_pool_free(p);
    expect_no_leaks();
}

/* ================================================================== trace */

/* A strict little JSON checker (RFC 8259 syntax). */
typedef struct jp {
    const char *s;
    int depth;
} jp;

static void j_ws(jp *j) {
    while (*j->s == ' ' || *j->s == '\t' || *j->s == '\n' || *j->s == '\r') j->s++;
}

static bool j_value(jp *j);

static bool j_string(jp *j) {
    if (*j->s != '"') return false;
    j->s++;
    for (;;) {
        unsigned char ch = (unsigned char)*j->s;
        if (ch == '\0' || ch < 0x20) return false;
        j->s++;
        if (ch == '"') return true;
        if (ch == '\\') {
            char e = *j->s++;
            if (e == 'u') {
                for (int i = 0; i < 4; i++, j->s++) {
                    char h = *j->s;
                    if (!((h >= '0' && h <= '9') || (h >= 'a' && h <= 'f') || (h >= 'A' && h <= 'F'))) return false;
                }
            } else if (!strchr("\"\\/bfnrt", e) || e == '\0') {
                return false;
            }
        }
    }
}

static bool j_number(jp *j) {
    const char *p = j->s;
    if (*p == '-') p++;
    if (*p == '0') p++;
    else if (*p >= '1' && *p <= '9') while (*p >= '0' && *p <= '9') p++;
    else return false;
    if (*p == '.') {
        p++;
        if (!(*p >= '0' && *p <= '9')) return false;
        while (*p >= '0' && *p <= '9') p++;
    }
    if (*p == 'e' || *p == 'E') {
        p++;
        if (*p == '+' || *p == '-') p++;
        if (!(*p >= '0' && *p <= '9')) return false;
        while (*p >= '0' && *p <= '9') p++;
    }
    j->s = p;
    return true;
}

/* The members of an object (keyed) or the elements of an array, after
 * its opening bracket, up to and including the closing one. */
static bool j_members(jp *j, char close, bool keyed) {
    j_ws(j);
    if (*j->s == close) {
        j->s++;
        return true;
    }
    for (;;) {
        j_ws(j);
        if (keyed) {
            if (!j_string(j)) return false;
            j_ws(j);
            if (*j->s++ != ':') return false;
        }
        if (!j_value(j)) return false;
        j_ws(j);
        if (*j->s != ',') break;
        j->s++;
    }
    if (*j->s != close) return false;
    j->s++;
    return true;
}

static bool j_value(jp *j) {
    j_ws(j);
    if (++j->depth > 64) return false;
    bool ok = false;
    if (*j->s == '{' || *j->s == '[') {
        char open = *j->s++;
        ok = j_members(j, open == '{' ? '}' : ']', open == '{');
    } else if (*j->s == '"') {
        ok = j_string(j);
    } else if (!strncmp(j->s, "true", 4) || !strncmp(j->s, "null", 4)) {
        j->s += 4;
        ok = true;
    } else if (!strncmp(j->s, "false", 5)) {
        j->s += 5;
        ok = true;
    } else {
        ok = j_number(j);
    }
    j->depth--;
    return ok;
}

static bool json_valid(const char *text) {
    jp j = { text, 0 };
    if (!j_value(&j)) return false;
    j_ws(&j);
    return *j.s == '\0';
}

static char *read_all(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len < 2) {
            char *nb = realloc(buf, cap * 2);
            if (!nb) { free(buf); buf = NULL; break; }
            buf = nb;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[len] = '\0';
    return buf;
}

static int count_substr(const char *hay, const char *needle) {
    int n = 0;
    size_t len = strlen(needle);
    for (const char *p = hay; (p = strstr(p, needle)) != NULL; p += len) n++;
    return n;
}

static void temp_path(char *buf) {
    int fd = mkstemp(buf);
    cr_assert_geq(fd, 0);
    close(fd);
    unlink(buf); /* the pool creates it */
}

/* A pool of `threads` workers named prefix-<i> (NULL: the default) that
 * traces to path (NULL: where CEXEC_TRACE says) at most capacity events
 * (0: the default). */
static ex_pool *traced_pool(unsigned threads, const char *prefix, const char *path, unsigned capacity) {
    ex_pool_config c = test_pool_config(threads, prefix);
    c.trace_path = path;
    c.trace_capacity = capacity;
    return test_pool_new_cfg(&c);
}

/* Runs `items` items on p and destroys it. */
static void run_items_and_destroy(ex_pool *p, int items) {
    for (int i = 0; i < items; i++) {
        where w;
        run_where(p, &w);
    }
    test_pool_free(p);
}

/* In a new temporary file (its name into path): the trace of a pool as
 * traced_pool makes it that ran `items` items and was destroyed. */
static void traced_run(char *path, unsigned threads, const char *prefix, unsigned capacity, int items) {
    temp_path(path);
    run_items_and_destroy(traced_pool(threads, prefix, path, capacity), items);
}

static void check_trace(const char *path, const char *prefix, unsigned threads, int min_runs) {
    char *text = read_all(path);
    cr_assert_not_null(text, "no trace written to %s", path);
    cr_assert(json_valid(text), "the trace is not valid JSON:\n%.2000s", text);
    cr_assert_not_null(strstr(text, "\"traceEvents\""));
    /* The pools here have the default lent slots: one per worker. */
    cr_assert_eq(count_substr(text, "\"thread_name\""), 2 * (int)threads, "one thread_name per worker and lent slot");
    char name[64];
    for (unsigned i = 0; i < threads; i++) {
        snprintf(name, sizeof name, "\"name\":\"%s-%u\"", prefix, i);
        cr_assert_not_null(strstr(text, name), "no thread_name for worker %u (%s)", i, name);
        snprintf(name, sizeof name, "\"name\":\"%s-lent%u\"", prefix, i);
        cr_assert_not_null(strstr(text, name), "no thread_name for lent slot %u (%s)", i, name);
    }
    int runs = count_substr(text, "\"name\":\"run\"");
    cr_assert_geq(runs, min_runs, "%d run events, expected at least %d", runs, min_runs);
    free(text);
}

Test(exec_pool, trace_path_gets_chrome_trace_json) {
    char path[] = "/tmp/cexec_pool_trace_XXXXXX";
    traced_run(path, 2, "trc", 0, 100);
    check_trace(path, "trc", 2, 100);
    unlink(path);
    expect_no_leaks();
}

Test(exec_pool, trace_capacity_drops_later_events_and_stays_valid) {
    char path[] = "/tmp/cexec_pool_trace_XXXXXX";
    traced_run(path, 1, "cap", 4, 50);
    check_trace(path, "cap", 1, 1);
    char *text = read_all(path);
    cr_assert_not_null(text);
    /* 4 a slot: the worker and its lent slot (main ran some items there). */
    cr_assert_leq(count_substr(text, "\"ph\":\"X\""), 2 * 4, "more events than the capacity");
    cr_assert_not_null(strstr(text, "dropped"), "dropped events are reported");
    free(text);
    unlink(path);
    expect_no_leaks();
}

/* A pool made while CEXEC_TRACE names env_path (a new temporary file),
 * tracing to cfg_path if not NULL, that ran `items` items and was
 * destroyed. */
static void traced_run_with_env(char *env_path, unsigned threads, const char *cfg_path, int items) {
    temp_path(env_path);
    cr_assert_eq(setenv("CEXEC_TRACE", env_path, 1), 0);
    ex_pool *p = traced_pool(threads, NULL, cfg_path, 0);
    unsetenv("CEXEC_TRACE");
    run_items_and_destroy(p, items);
}

Test(exec_pool, trace_from_cexec_trace_env_var) {
    char path[] = "/tmp/cexec_pool_trace_XXXXXX";
    traced_run_with_env(path, 2, NULL, 20);
    check_trace(path, "cexec", 2, 20);
    unlink(path);
    expect_no_leaks();
}

Test(exec_pool, trace_path_in_config_wins_over_env_var) {
    char env_path[] = "/tmp/cexec_pool_trace_env_XXXXXX";
    char cfg_path[] = "/tmp/cexec_pool_trace_cfg_XXXXXX";
    temp_path(cfg_path);
    traced_run_with_env(env_path, 1, cfg_path, 5);
    check_trace(cfg_path, "cexec", 1, 5);
    cr_assert_neq(access(env_path, F_OK), 0, "the env var's path was written although the config named one");
    unlink(cfg_path);
    unlink(env_path);
    expect_no_leaks();
}

Test(exec_pool, trace_is_valid_json_with_quotes_in_the_prefix) {
    char path[] = "/tmp/cexec_pool_trace_XXXXXX";
    traced_run(path, 1, "a\"b\\c", 0, 3);
    char *text = read_all(path);
    cr_assert_not_null(text);
    cr_assert(json_valid(text), "a prefix with a quote and a backslash breaks the trace JSON:\n%.600s", text);
    free(text);
    unlink(path);
    expect_no_leaks();
}

/* More than 64 workers: several words of the idle mask, and the trace
 * writer's path for many workers. */
Test(exec_pool, pool_with_more_than_64_workers) {
    enum { THREADS = 130, N = 4000 };
    char path[] = "/tmp/cexec_pool_trace_XXXXXX";
    temp_path(path);
    ex_pool *p = traced_pool(THREADS, "big", path, 64);
    cr_assert_eq(ex_pool_size(p), (unsigned)THREADS);
    slot *s = slots_new(N);
    ex_sender *snd = ex_schedule(ex_pool_scheduler(p));
    for (int round = 0; round < 2; round++) {
        slots_start(s, N, p, snd);
        long got = wait_long_reaches(&g_completed, N);
        cr_assert_eq(got, N, "round %d: %ld of %d", round, got, N);
        cr_assert_eq(slots_expect_once(s, N), N);
        for (int i = 0; i < N; i++) cr_assert(s[i].r.worker >= 0 && s[i].r.worker < THREADS);
        slots_destroy(s, N);
        test_sleep_ms(20); /* let workers park between rounds: wake-ups across idle-mask words */
    }
    cr_assert_eq(stats_sum(p).executed, 2u * N);
    ex_pool_worker_stats st;
    cr_assert_eq(ex_pool_worker_stats_get(p, 2 * THREADS - 1, &st).code, 0);
    cr_assert_eq(ex_pool_worker_stats_get(p, 2 * THREADS, &st).code, EX_EINVAL);
    ex_sender_release(snd);
    free(s);
    test_pool_free(p);
    check_trace(path, "big", THREADS, 1);
    unlink(path);
    expect_no_leaks();
}

