/* SPDX-License-Identifier: MIT */
/* allocations.c - the leak check over allocators' counters
 * (cexec/testing.h, ex_test_allocations). */
#include <string.h>
#include <time.h>

#include <cexec/cexec.h>
#include <cexec/testing.h>

#include "testing/exi_test_text.h"

/* How long a check waits for frees in flight, unless the test says. */
#define SETTLE_MS_DEFAULT 2000u

void ex_test_allocations_begin(ex_test_allocations *c) {
    memset(c, 0, sizeof *c);
    c->settle_ms = SETTLE_MS_DEFAULT;
    ex_test_allocations_watch(c, ex_default_allocator());
}

/* Notes why the check cannot be trusted (the first reason is kept). */
static void cannot_check(ex_test_allocations *c, const char *problem, const ex_allocator *a) {
    if (c->problem) return;
    c->problem = problem;
    c->problem_name = a && a->name ? a->name : "(unnamed)";
}

void ex_test_allocations_watch(ex_test_allocations *c, const ex_allocator *a) {
    if (!a) {
        cannot_check(c, "ex_test_allocations_watch was given a NULL allocator", NULL);
        return;
    }
    for (unsigned i = 0; i < c->n; i++)
        if (c->watched[i].a == a) return;
    if (c->n == EX_TEST_WATCH_MAX) {
        cannot_check(c, "more than EX_TEST_WATCH_MAX allocators watched", a);
        return;
    }
    ex_test_watched *w = &c->watched[c->n];
    if (ex_allocator_stats(a, &w->begin).code) {
        cannot_check(c, "it keeps no statistics (ex_alloc_stats); wrap it in an ex_budget_allocator to watch it", a);
        return;
    }
    w->a = a;
    c->n++;
}

/* What one allocator did since its watch began. */
typedef struct change {
    int64_t blocks, bytes;            /* more out than at the start */
    uint64_t allocations, frees;      /* during the check */
} change;

static change change_of(const ex_test_watched *w) {
    ex_alloc_stats now;
    change d = { 0, 0, 0, 0 };
    if (ex_allocator_stats(w->a, &now).code) return d;  /* watched: it has statistics */
    d.allocations = now.allocations - w->begin.allocations;
    d.frees = now.frees - w->begin.frees;
    d.blocks = (int64_t)(d.allocations - d.frees);
    d.bytes = (int64_t)(now.bytes_in_use - w->begin.bytes_in_use);
    return d;
}

static bool leaked(change d) { return d.blocks > 0 || d.bytes > 0; }

static bool any_leaked(const ex_test_allocations *c) {
    for (unsigned i = 0; i < c->n; i++)
        if (leaked(change_of(&c->watched[i]))) return true;
    return false;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether every block came back within settle_ms: another thread may
 * free the last ones a moment after the test saw its completion. */
static bool settled(const ex_test_allocations *c) {
    double deadline = now_s() + c->settle_ms / 1000.0;
    while (any_leaked(c)) {
        if (now_s() >= deadline) return false;
        struct timespec nap = { 0, 1000 * 1000 };
        nanosleep(&nap, NULL);
    }
    return true;
}

static void add_leak(exi_text *t, const ex_test_allocations *c, unsigned i, change d) {
    const ex_allocator *a = c->watched[i].a;
    exi_text_add(t, "\"%s\"%s leaked %lld block%s (%lld bytes) during the check (%llu allocations, %llu frees)",
                 a->name ? a->name : "(unnamed)", i == 0 ? " (the default allocator)" : "", (long long)d.blocks,
                 d.blocks == 1 ? "" : "s", (long long)(d.bytes > 0 ? d.bytes : 0), (unsigned long long)d.allocations,
                 (unsigned long long)d.frees);
}

bool ex_test_check_no_leaks(char *msg, size_t size, const ex_test_allocations *c) {
    exi_text t;
    exi_text_init(&t, msg, size);
    if (!c) {
        exi_text_add(&t, "the check was given a NULL ex_test_allocations");
        exi_text_end(&t);
        return false;
    }
    if (c->problem) {
        exi_text_add(&t, "cannot check allocator \"%s\": %s", c->problem_name, c->problem);
        exi_text_end(&t);
        return false;
    }
    bool clean = settled(c);
    unsigned shown = 0;
    for (unsigned i = 0; !clean && i < c->n; i++) {
        change d = change_of(&c->watched[i]);
        if (!leaked(d)) continue;
        if (shown++) exi_text_add(&t, "; ");
        add_leak(&t, c, i, d);
    }
    /* (A block that came back just after the wait ended is no leak.) */
    if (!shown) exi_text_add(&t, "no block leaked through the %u allocator%s watched", c->n, c->n == 1 ? "" : "s");
    exi_text_end(&t);
    return shown == 0;
}
