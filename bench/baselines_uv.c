/* SPDX-License-Identifier: MIT */
/* baselines_uv.c - libuv's timers, the baseline of the timer group
 * (bench/timers.c): uv_timer_start / uv_timer_stop on a uv_loop_t of its
 * own.  libuv is single-threaded: every loop here runs on one thread, and
 * timers are armed on that thread.  Its loop time is in milliseconds
 * (uv_now), so every timeout is a whole number of milliseconds from the
 * loop time cached at the last uv_update_time. */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <uv.h>

#include "baselines.h"

static void uv_must(int rc, const char *what) {
    if (rc) {
        fprintf(stderr, "bench: libuv: %s: %s\n", what, uv_strerror(rc));
        exit(1);
    }
}

static int64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static void never_cb(uv_timer_t *t) {
    (void)t;
    fprintf(stderr, "bench: libuv: a timer fired that should not have\n");
    exit(1);
}

/* Closes every handle of the loop and closes the loop. */
static void close_walk(uv_handle_t *h, void *arg) {
    (void)arg;
    if (!uv_is_closing(h)) uv_close(h, NULL);
}
static void close_loop(uv_loop_t *loop) {
    uv_walk(loop, close_walk, NULL);
    uv_run(loop, UV_RUN_DEFAULT);
    uv_must(uv_loop_close(loop), "uv_loop_close");
}

/* ------------------------------------------------------------ arm+cancel */

double libuv_arm_cancel(size_t n, const uint64_t *others_ms, size_t k, bool update_time) {
    uv_loop_t loop;
    uv_must(uv_loop_init(&loop), "uv_loop_init");
    uv_timer_t *others = k ? malloc(k * sizeof *others) : NULL;
    if (k && !others) uv_must(UV_ENOMEM, "arm+cancel");
    for (size_t j = 0; j < k; j++) {
        uv_must(uv_timer_init(&loop, &others[j]), "uv_timer_init");
        uv_must(uv_timer_start(&others[j], never_cb, others_ms[j], 0), "uv_timer_start");
    }
    uv_timer_t t;
    uv_must(uv_timer_init(&loop, &t), "uv_timer_init");
    int64_t t0 = mono_ns();
    if (update_time) {
        for (size_t i = 0; i < n; i++) {
            uv_update_time(&loop);  /* the loop's time read at each start, as cexec's is */
            uv_timer_start(&t, never_cb, 1000, 0);
            uv_timer_stop(&t);
        }
    } else {
        for (size_t i = 0; i < n; i++) {
            uv_timer_start(&t, never_cb, 1000, 0);
            uv_timer_stop(&t);
        }
    }
    int64_t t1 = mono_ns();
    close_loop(&loop);  /* stops the others too */
    free(others);
    return (double)(t1 - t0) * 1e-9;
}

/* ------------------------------------------------------------ throughput */

typedef struct burst {
    size_t left;
    int64_t last_ns;  /* when the last callback ran */
} burst;

static void burst_cb(uv_timer_t *t) {
    burst *b = t->loop->data;
    if (--b->left == 0) b->last_ns = mono_ns();
}

double libuv_throughput(const uint64_t *ms, size_t n, double *arming) {
    uv_loop_t loop;
    uv_must(uv_loop_init(&loop), "uv_loop_init");
    uv_timer_t *t = malloc(n * sizeof *t);
    if (!t) uv_must(UV_ENOMEM, "throughput");
    for (size_t i = 0; i < n; i++) uv_must(uv_timer_init(&loop, &t[i]), "uv_timer_init");
    burst b = { n, 0 };
    loop.data = &b;
    uv_update_time(&loop);
    int64_t t0 = mono_ns();
    for (size_t i = 0; i < n; i++) uv_timer_start(&t[i], burst_cb, ms[i], 0);
    *arming = (double)(mono_ns() - t0) * 1e-9;
    uv_run(&loop, UV_RUN_DEFAULT);  /* returns once no timer is left */
    if (b.left) uv_must(UV_EINVAL, "throughput: uv_run returned before every timer fired");
    close_loop(&loop);
    free(t);
    return (double)(b.last_ns - t0) * 1e-9;
}

/* -------------------------------------------------------------- lateness */

typedef struct chain {
    size_t i, n;
    double *lateness, *own_due;
    int64_t requested_ns;   /* CLOCK_MONOTONIC at the start + 1 ms */
    uint64_t due_ms;        /* libuv's own deadline, loop time in ms */
} chain;

static void chain_cb(uv_timer_t *t);

/* Starts the next 1 ms timer: requested 1 ms after now on CLOCK_MONOTONIC;
 * libuv's own deadline is the loop time (ms) + 1. */
static void chain_arm(uv_timer_t *t, chain *c) {
    uv_update_time(t->loop);  /* the freshest loop time libuv can give */
    c->requested_ns = mono_ns() + 1000000;
    uv_must(uv_timer_start(t, chain_cb, 1, 0), "uv_timer_start");
    c->due_ms = uv_now(t->loop) + uv_timer_get_due_in(t);
}

static void chain_cb(uv_timer_t *t) {
    int64_t now = mono_ns();
    chain *c = t->loop->data;
    c->lateness[c->i] = (double)(now - c->requested_ns) * 1e-9;
    c->own_due[c->i] = (double)(now - (int64_t)c->due_ms * 1000000) * 1e-9;
    if (++c->i < c->n) chain_arm(t, c);
}

void libuv_lateness(size_t samples, double *lateness, double *own_due) {
    uv_loop_t loop;
    uv_must(uv_loop_init(&loop), "uv_loop_init");
    chain c = { 0, samples, lateness, own_due, 0, 0 };
    loop.data = &c;
    uv_timer_t t;
    uv_must(uv_timer_init(&loop, &t), "uv_timer_init");
    chain_arm(&t, &c);
    uv_run(&loop, UV_RUN_DEFAULT);
    close_loop(&loop);
}

/* -------------------------------------------------------------- idle CPU */

struct libuv_idle {
    uv_loop_t loop;
    uv_timer_t timer;
    uv_async_t stop;
    pthread_t thread;
    uint64_t ticks;
};

static void idle_tick(uv_timer_t *t) { ((libuv_idle *)t->loop->data)->ticks++; }

static void idle_stop(uv_async_t *a) {
    libuv_idle *s = a->loop->data;
    uv_close((uv_handle_t *)&s->timer, NULL);
    uv_close((uv_handle_t *)&s->stop, NULL);
}

static void *idle_main(void *arg) {
    libuv_idle *s = arg;
    uv_run(&s->loop, UV_RUN_DEFAULT);  /* until idle_stop closed both handles */
    return NULL;
}

libuv_idle *libuv_idle_start(uint64_t period_ms) {
    libuv_idle *s = calloc(1, sizeof *s);
    if (!s) uv_must(UV_ENOMEM, "idle");
    uv_must(uv_loop_init(&s->loop), "uv_loop_init");
    s->loop.data = s;
    uv_must(uv_timer_init(&s->loop, &s->timer), "uv_timer_init");
    uv_must(uv_async_init(&s->loop, &s->stop, idle_stop), "uv_async_init");
    if (period_ms) uv_must(uv_timer_start(&s->timer, idle_tick, period_ms, period_ms), "uv_timer_start");
    else uv_must(uv_timer_start(&s->timer, idle_tick, 3600 * 1000, 0), "uv_timer_start");
    if (pthread_create(&s->thread, NULL, idle_main, s)) uv_must(UV_EAGAIN, "pthread_create");
    return s;
}

uint64_t libuv_idle_stop(libuv_idle *s) {
    uv_must(uv_async_send(&s->stop), "uv_async_send");
    pthread_join(s->thread, NULL);
    uv_must(uv_loop_close(&s->loop), "uv_loop_close");
    uint64_t ticks = s->ticks;
    free(s);
    return ticks;
}
