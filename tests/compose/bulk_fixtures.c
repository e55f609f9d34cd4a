/* SPDX-License-Identifier: MIT */
/* bulk_fixtures.c - the bulk part of compose_fixtures.h. */
#include <sched.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "compose/compose_fixtures.h"

static void spin_us(long us) {
    double end = test_now_s() + (double)us / 1e6;
    while (test_now_s() < end) {}
}

/* ------------------------------------------- sequential recording body */


void seq_init(seq_ctx *c) {
    memset(c, 0, sizeof *c);
    c->fail_at = SIZE_MAX;
}

ex_error seq_fn(void *ctx, size_t i, const ex_value *v, size_t n) {
    seq_ctx *c = ctx;
    if (c->calls < SEQ_MAX) {
        c->order[c->calls] = i;
        c->thread[c->calls] = test_thread_id();
        c->n[c->calls] = n;
        if (n >= 1) c->v0[c->calls] = v[0];
        if (n >= 2) c->v1[c->calls] = v[1];
    }
    c->calls++;
    if (i == c->fail_at) return c->fail_err;
    return ex_ok();
}


/* ------------------------------------------------- parallel body */



/* A zeroed counter per index (freed by the caller). */
static atomic_int *new_hits(size_t shape) {
    atomic_int *hits = calloc(shape ? shape : 1, sizeof *hits);
    cr_assert_not_null(hits);
    for (size_t i = 0; i < shape; i++) atomic_init(&hits[i], 0);
    return hits;
}

void par_init(par_ctx *c, ex_pool *p, size_t shape) {
    memset(c, 0, sizeof *c);
    c->pool = p;
    c->shape = shape;
    c->hits = new_hits(shape);
    c->fail_at = SIZE_MAX;
    c->stop_at = SIZE_MAX;
}

void par_fini(par_ctx *c) {
    free(c->hits);
    c->hits = NULL;
}

void par_expect_values(par_ctx *c, const ex_value *v, size_t n) {
    c->expect_n = n;
    for (size_t i = 0; i < n; i++) c->expect[i] = v[i];
}

/* Every index in [0, shape) ran exactly once, nothing else ran. */
void par_expect_each_once(par_ctx *c) {
    cr_assert_eq(atomic_load(&c->out_of_range), 0, "an index >= shape was run");
    for (size_t i = 0; i < c->shape; i++)
        cr_assert_eq(atomic_load(&c->hits[i]), 1, "index %zu of %zu ran %d times", i, c->shape,
                     atomic_load(&c->hits[i]));
    cr_assert_eq(atomic_load(&c->calls), (long)c->shape);
}

/* Has an index run on an agent other than worker `self` (-1: a thread
 * outside the pool)? */
static bool other_agent_ran(par_ctx *c, int self) {
    unsigned mine = self >= 0 ? 1u << (self & 31) : 0;
    if (atomic_load(&c->workers) & ~mine) return true;
    return self >= 0 && atomic_load(&c->off_pool) > 0;
}

/* Waits (bounded) until some index ran on another agent. */
static bool wait_other_worker(par_ctx *c, int self) {
    double end = test_now_s() + TEST_WAIT_LIMIT_S / 2;
    while (!other_agent_ran(c, self) && test_now_s() < end) sched_yield();
    return other_agent_ran(c, self);
}

static void par_note(par_ctx *c, size_t i, const ex_value *v, size_t n) {
    int w = ex_pool_current_worker(c->pool);
    if (w >= 0) {
        atomic_fetch_or(&c->workers, 1u << (w & 31));
        atomic_fetch_add(&c->per_worker[w & 31], 1);
    } else {
        atomic_fetch_add(&c->off_pool, 1);
    }
    if (i < c->shape) atomic_fetch_add(&c->hits[i], 1);
    else atomic_fetch_add(&c->out_of_range, 1);
    bool ok = n == c->expect_n;
    for (size_t k = 0; ok && k < n; k++) ok = ex_value_equal(&v[k], &c->expect[k]);
    if (!ok) atomic_fetch_add(&c->bad_values, 1);
    atomic_fetch_add(&c->calls, 1);
}

static ex_error par_body(par_ctx *c, size_t i) {
    switch (c->body) {
    case BODY_GROWING:
        spin_us(2 + (long)(i / 100));  /* cost grows with the index */
        break;
    case BODY_BLOCK_FIRST:
        /* One very slow index: it holds its agent until every other index
         * ran, which only happens if the other agents keep taking chunks. */
        if (i == c->block_index) {
            double end = test_now_s() + TEST_WAIT_LIMIT_S / 2;
            while (atomic_load(&c->calls) < c->block_until && test_now_s() < end) sched_yield();
            if (atomic_load(&c->calls) < c->block_until) atomic_store(&c->block_timed_out, 1);
        }
        break;
    case BODY_WAIT_OTHER_WORKER:
        if (i == 0 && !wait_other_worker(c, ex_pool_current_worker(c->pool))) atomic_store(&c->block_timed_out, 1);
        break;
    default:
        break;
    }
    if (i == c->stop_at && c->stop) ex_stop_source_request_stop(c->stop);
    if (i == c->fail_at) return c->fail_err;
    return ex_ok();
}

ex_error par_fn(void *ctx, size_t i, const ex_value *v, size_t n) {
    par_ctx *c = ctx;
    par_note(c, i, v, n);
    return par_body(c, i);
}

/* ------------------------------------------------ chunked body */


void chunk_init(chunk_ctx *c, size_t shape, size_t grain) {
    memset(c, 0, sizeof *c);
    c->shape = shape;
    c->grain = grain;
    c->hits = new_hits(shape);
}

ex_error chunk_fn(void *ctx, size_t begin, size_t end, const ex_value *v, size_t n) {
    chunk_ctx *c = ctx;
    (void)v, (void)n;
    if (atomic_fetch_add(&c->chunks, 1) == 0) {
        atomic_store(&c->first_begin, begin);
        atomic_store(&c->first_end, end);
    }
    if (begin >= end || end > c->shape || (c->grain && end - begin > c->grain)) atomic_fetch_add(&c->bad_chunk, 1);
    if (c->expect_thread && test_thread_id() != c->expect_thread) atomic_fetch_add(&c->off_thread, 1);
    for (size_t i = begin; i < end && i < c->shape; i++) atomic_fetch_add(&c->hits[i], 1);
    return ex_ok();
}

void chunk_expect_cover(chunk_ctx *c) {
    cr_assert_eq(atomic_load(&c->bad_chunk), 0, "a chunk was empty, past shape or longer than the grain");
    for (size_t i = 0; i < c->shape; i++)
        cr_assert_eq(atomic_load(&c->hits[i]), 1, "index %zu covered %d times", i, atomic_load(&c->hits[i]));
}


void expect_value_result(ex_result *r) {
    cr_assert_eq(r->disposition, EX_DISP_VALUE, "expected a value, got disposition %d (%d: %s)", r->disposition,
                 r->error.code, r->error.msg ? r->error.msg : "");
}
