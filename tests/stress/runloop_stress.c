/* SPDX-License-Identifier: MIT */
/* runloop_stress.c - the run loop and the single-thread context at their
 * ends (issue 17), under ThreadSanitizer.
 *
 * 1. ex_run_loop_destroy racing run() on its way out: the loop is finished
 *    by its last item (on the running thread) or from outside, and freed
 *    as soon as destroy returns EX_OK.  destroy used to succeed once the
 *    state said finishing, while run() still executed the item and then
 *    locked the mutex of the freed loop.
 * 2. ex_single_thread_context_destroy racing submitters (ex_post items and
 *    schedule operations): every accepted submission runs exactly once,
 *    every refused one is refused with EX_ESHUTDOWN (set_error for a
 *    schedule operation) and never runs, and destroy returns EX_OK.  The
 *    old destroy accepted pushes after run() had returned: never run, and
 *    destroy said EX_EBUSY after the join. */
#include <pthread.h>
#include <sched.h>

#include <string.h>

#include <cexec/cexec.h>
#include "base/exi_macros.h"
#include "stress.h"
#include "stress_util.h"

enum { LOOP_ROUNDS = 3000, CTX_ROUNDS = 200, SUBMITTERS = 2, MAX_ITEMS = 3000 };

/* ------------------------------------------------- 1. run loop destroy */

typedef struct loop_item {
    ex_work work;
    ex_run_loop *loop;
    uint32_t spin;     /* busy wait after finishing */
    uint32_t ran;
} loop_item;

static void finish_then_spin(ex_work *w) {
    loop_item *it = EXI_CONTAINER_OF(w, loop_item, work);
    ex_run_loop_finish(it->loop);
    spin_delay(it->spin);
    __atomic_store_n(&it->ran, 1, __ATOMIC_RELAXED);
}

static void count_run(ex_work *w) { __atomic_fetch_add(&EXI_CONTAINER_OF(w, loop_item, work)->ran, 1, __ATOMIC_RELAXED); }

static void *run_loop_main(void *arg) {
    ex_error e = ex_run_loop_run(arg);
    return (void *)(uintptr_t)(e.code != 0);
}

/* Returns the number of failed checks of one round. */
static int loop_round(uint32_t round) {
    ex_run_loop *loop = malloc(sizeof *loop);
    if (!loop || ex_run_loop_init(loop).code) return 1;
    loop_item plain = { .work.execute = count_run, .loop = loop };
    loop_item last = { .work.execute = finish_then_spin, .loop = loop, .spin = rnd(2000) };
    bool finish_outside = round % 3 == 0;
    pthread_t th;
    pthread_create(&th, NULL, run_loop_main, loop);
    ex_run_loop_push(loop, &plain.work);
    if (finish_outside) ex_run_loop_finish(loop);
    else ex_run_loop_push(loop, &last.work);
    while (ex_run_loop_destroy(loop).code == EX_EBUSY) sched_yield();
    free(loop);  /* run() must be done with it: TSan/ASan see any later touch */
    void *failed = NULL;
    pthread_join(th, &failed);
    int bad = failed != NULL;
    if (__atomic_load_n(&plain.ran, __ATOMIC_RELAXED) != 1) bad++;
    if (!finish_outside && __atomic_load_n(&last.ran, __ATOMIC_RELAXED) != 1) bad++;
    return bad;
}

static int loop_rounds(void) {
    int bad = 0;
    for (uint32_t r = 0; r < LOOP_ROUNDS; r++) bad += loop_round(r);
    CHECK(bad == 0, "run loop destroy: %d failed checks in %d rounds", bad, LOOP_ROUNDS);
    return 1;
}

/* ------------------------------------- 2. single-thread context destroy */

typedef struct sub_item {
    ex_work work;
    uint32_t ran;
} sub_item;

typedef struct sub_op {
    _Alignas(max_align_t) unsigned char storage[128];
    ex_operation *op;
    uint32_t values, errors, stops, other_errors;
} sub_op;

typedef struct submitter_state {
    ex_single_thread_context *ctx;
    ex_sender *schedule;
    sub_item items[MAX_ITEMS];
    sub_op ops[MAX_ITEMS];
    uint32_t accepted;   /* items [0, accepted) and ops [0, accepted) were accepted */
    bool refused_post;   /* item `accepted` was refused (else op `accepted`, or none) */
} submitter_state;

static submitter_state subs[SUBMITTERS];
static uint32_t refused_submitters;  /* submitters that met a refusal */

static void item_run(ex_work *w) { __atomic_fetch_add(&EXI_CONTAINER_OF(w, sub_item, work)->ran, 1, __ATOMIC_RELAXED); }

static void op_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    __atomic_fetch_add(&((sub_op *)self)->values, 1, __ATOMIC_RELAXED);
}
static void op_error(void *self, ex_error e) {
    sub_op *o = self;
    __atomic_fetch_add(e.code == EX_ESHUTDOWN ? &o->errors : &o->other_errors, 1, __ATOMIC_RELAXED);
}
static void op_stopped(void *self) { __atomic_fetch_add(&((sub_op *)self)->stops, 1, __ATOMIC_RELAXED); }
static const ex_receiver_vtable op_rvt = { op_value, op_error, op_stopped, NULL, NULL };

/* Alternates a post and a schedule operation until one is refused. */
static void *submit_until_refused(void *arg) {
    submitter_state *s = arg;
    ex_scheduler sch = ex_single_thread_context_scheduler(s->ctx);
    for (uint32_t i = 0; i < MAX_ITEMS; i++) {
        sub_item *it = &s->items[i];
        it->work.execute = item_run;
        if (ex_post(sch, &it->work).code) {
            s->refused_post = true;
            break;
        }
        sub_op *o = &s->ops[i];
        ex_receiver r = { &op_rvt, o };
        if (ex_connect(s->schedule, r, o->storage, sizeof o->storage, &o->op).code) abort();
        ex_start(o->op);
        if (__atomic_load_n(&o->errors, __ATOMIC_RELAXED)) break;  /* refused: completed inline */
        s->accepted = i + 1;
    }
    return NULL;
}

/* Failed checks of one submitter's round. */
static int settle(submitter_state *s, uint32_t *accepted_total) {
    int bad = 0;
    uint32_t n = s->accepted;
    *accepted_total += n;
    for (uint32_t i = 0; i < MAX_ITEMS; i++) {
        sub_op *o = &s->ops[i];
        uint32_t item_ran = __atomic_load_n(&s->items[i].ran, __ATOMIC_RELAXED);
        uint32_t v = __atomic_load_n(&o->values, __ATOMIC_RELAXED), e = __atomic_load_n(&o->errors, __ATOMIC_RELAXED);
        uint32_t other = __atomic_load_n(&o->stops, __ATOMIC_RELAXED) + __atomic_load_n(&o->other_errors, __ATOMIC_RELAXED);
        bool item_accepted = i < n || (i == n && n < MAX_ITEMS && !s->refused_post);
        if (item_ran != (item_accepted ? 1u : 0u)) bad++;
        if (other) bad++;
        if (i < n && (v != 1 || e != 0)) bad++;                           /* accepted: ran once */
        if (i == n && item_accepted && (v != 0 || e != 1)) bad++;          /* refused: error once */
        if ((i > n || (i == n && !item_accepted)) && (v | e)) bad++;      /* never started */
        if (o->op) ex_operation_destroy(o->op);
    }
    if (n < MAX_ITEMS && !s->refused_post && s->ops[n].errors != 1) bad++;  /* it stopped for a reason */
    if (n < MAX_ITEMS) refused_submitters++;
    return bad;
}

static int ctx_round(uint32_t round, uint32_t *accepted_total) {
    ex_single_thread_context ctx;
    if (ex_single_thread_context_init(&ctx).code) return 1;
    ex_sender *schedule = ex_schedule(ex_single_thread_context_scheduler(&ctx));
    pthread_t th[SUBMITTERS];
    for (int i = 0; i < SUBMITTERS; i++) {
        memset(&subs[i], 0, sizeof subs[i]);
        subs[i].ctx = &ctx;
        subs[i].schedule = schedule;
        pthread_create(&th[i], NULL, submit_until_refused, &subs[i]);
    }
    spin_delay(rnd(20000) * (round % 4));
    ex_error e = ex_single_thread_context_destroy(&ctx);
    /* Submitters still running are refused; ctx's storage outlives them. */
    for (int i = 0; i < SUBMITTERS; i++) pthread_join(th[i], NULL);
    int bad = e.code != 0;
    for (int i = 0; i < SUBMITTERS; i++) bad += settle(&subs[i], accepted_total);
    ex_sender_release(schedule);
    return bad;
}

static int ctx_rounds(void) {
    int bad = 0;
    uint32_t accepted = 0;
    for (uint32_t r = 0; r < CTX_ROUNDS; r++) {
        int b = ctx_round(r, &accepted);
        if (b) fprintf(stderr, "context round %u: %d failed checks\n", r, b);
        bad += b;
    }
    CHECK(bad == 0, "single-thread context destroy: %d failed checks in %d rounds", bad, CTX_ROUNDS);
    printf("runloop_stress: %u posts and as many schedules accepted over %d context rounds; %u of %d submitters refused\n",
           accepted, CTX_ROUNDS, refused_submitters, CTX_ROUNDS * SUBMITTERS);
    return 1;
}

int main(void) {
    int checks = 0;
    checks += loop_rounds();
    checks += ctx_rounds();
    return stress_finish("runloop_stress", checks);
}
