/* SPDX-License-Identifier: MIT */
/* single_thread_context.c - P2300 §1.6.2: a run_loop and the thread that
 * runs it.
 *
 * Shutdown: every submission passes a gate, one word that counts the
 * submissions under way and carries CLOSED once destroy has begun.  destroy
 * sets CLOSED, waits until no admitted push is under way, and only then
 * finishes the loop: so everything admitted is queued before run() sees
 * finishing, run() executes all of it, and everything later is refused.
 * (Without the gate a push could land after run() had returned: accepted,
 * never run, and destroy reported EX_EBUSY after the join.) */
#include <sched.h>
#include <sys/prctl.h>
#include <time.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "base/exi_atomic.h"
#include "base/exi_fork.h"
#include "base/exi_macros.h"
#include "core/exi_scheduler.h"
#include "resources/exi_run_loop.h"
#include "resources/exi_single_thread_context.h"

#define CLOSED 0x80000000u

EXI_TLS bool exi_tls_context_thread;

static void *context_main(void *arg) {
    ex_single_thread_context *ctx = arg;
    exi_tls_context_thread = true;
    (void)prctl(PR_SET_TIMERSLACK, 1UL, 0UL, 0UL, 0UL);  /* timers wake on time (docs/time.md) */
    (void)ex_run_loop_run(&ctx->loop);
    return NULL;
}

/* Admits one submission unless destroy has begun; an admitted one must
 * leave() after its push.  A refused one writes nothing. */
static bool admit(ex_single_thread_context *ctx) {
    uint32_t g = exi_load_rlx_u32(&ctx->gate);
    do {
        if (g & CLOSED) return false;
    } while (!exi_cas_u32(&ctx->gate, &g, g + 1));
    return true;
}

static void leave(ex_single_thread_context *ctx) { exi_faa_u32(&ctx->gate, (uint32_t)-1); }

static ex_error refused(void) {
    return ex_err(EX_ESHUTDOWN, "ex_single_thread_context: the context is being destroyed");
}

static ex_error refused_forked(void) {
    return ex_err(EX_ESHUTDOWN,
                  "ex_single_thread_context: created before fork(); its thread does not exist in this process");
}

/* Queues w unless destroy has begun (EX_ESHUTDOWN). */
static ex_error submit(ex_single_thread_context *ctx, ex_work *w) {
    if (ctx->fork_gen != exi_fork_generation()) return refused_forked();
    if (!admit(ctx)) return refused();
    ex_run_loop_push(&ctx->loop, w);
    /* Still admitted: destroy waits for leave(), so it cannot finish the
     * loop before this item is queued. */
    leave(ctx);
    return ex_ok();
}

/* ------------------------------------------------------------ scheduler */

static void ctx_start(ex_operation *op) {
    exi_queued_op *o = (exi_queued_op *)op;
    ex_error e = submit(o->resource, &o->work);
    if (e.code) ex_set_error(o->r, e);
}

static const ex_operation_vtable ctx_op_vt = { ctx_start, NULL };

static ex_error ctx_connect(void *self, ex_receiver r, void *storage) {
    exi_queued_op_init(storage, &ctx_op_vt, self, r);
    return ex_ok();
}

static ex_error ctx_post(void *self, ex_work *w) { return submit(self, w); }

static ex_error ctx_dispatch(void *self, ex_work *w) {
    ex_single_thread_context *ctx = self;
    if (!pthread_equal(pthread_self(), ctx->thread)) return submit(ctx, w);
    w->execute(w);
    return ex_ok();
}

/* Timers go to the loop's heap through the same gate as items: none is
 * armed once destroy began, and those armed before are dropped (stopped)
 * by run() when destroy finishes the loop. */
static enum exi_timer_arm ctx_arm(void *self, exi_timer_op *op) {
    ex_single_thread_context *ctx = self;
    if (ctx->fork_gen != exi_fork_generation() || !admit(ctx)) return EXI_TIMER_REFUSED_SHUTDOWN;
    enum exi_timer_arm a = exi_run_loop_arm(&ctx->loop, op);
    leave(ctx);
    return a;
}

static bool ctx_cancel(void *self, exi_timer_op *op) {
    return exi_run_loop_cancel(&((ex_single_thread_context *)self)->loop, op);
}

static const exi_timer_service_vtable ctx_timers = { ctx_arm, ctx_cancel };

static ex_error ctx_connect_at(void *self, ex_timer_when when, ex_receiver r, void *storage) {
    exi_timer_op_init(storage, &ctx_timers, self, NULL, when, r);
    return ex_ok();
}

/* Holders (a task on the context, or one that left it, holds it until it
 * completes): destroy waits for the last one, so a hold's release is the
 * last touch of the context by anyone. */
static void ctx_retain(void *self) { exi_faa_u32(&((ex_single_thread_context *)self)->holders, 1); }
static void ctx_release(void *self) { exi_faa_u32(&((ex_single_thread_context *)self)->holders, (uint32_t)-1); }

static const ex_scheduler_vtable ctx_vt = {
    .name = "single_thread_context",
    .schedule_op_size = sizeof(exi_queued_op),
    .schedule_op_align = alignof(exi_queued_op),
    .schedule_flags = EX_SIGS_STOPPED | EX_SIGS_ERROR,
    .connect_schedule = ctx_connect,
    .progress = EX_PROGRESS_WEAKLY_PARALLEL,
    .equal = NULL,
    .post = ctx_post,
    .dispatch = ctx_dispatch,
    .retain = ctx_retain,
    .release = ctx_release,
    .timer_op_size = sizeof(exi_timer_op),
    .timer_op_align = alignof(exi_timer_op),
    .connect_schedule_at = ctx_connect_at,
};

ex_scheduler ex_single_thread_context_scheduler(ex_single_thread_context *ctx) {
    ex_scheduler s = { ctx ? &ctx_vt : NULL, ctx };  /* NULL: the invalid handle */
    return s;
}

/* --------------------------------------------------------- life cycle */

ex_error ex_single_thread_context_init(ex_single_thread_context *ctx) {
    ex_error e = ex_run_loop_init(&ctx->loop);
    if (e.code) return e;
    ctx->gate = 0;
    ctx->holders = 0;
    ctx->fork_gen = exi_fork_watch();
    if (pthread_create(&ctx->thread, NULL, context_main, ctx)) {
        (void)ex_run_loop_destroy(&ctx->loop);
        return ex_err(EX_EAGAIN, "ex_single_thread_context_init: pthread_create failed");
    }
    return ex_ok();
}

pthread_t ex_single_thread_context_thread_id(ex_single_thread_context *ctx) { return ctx->thread; }

ex_error ex_single_thread_context_destroy(ex_single_thread_context *ctx) {
    if (ctx->fork_gen != exi_fork_generation())
        return ex_err(EX_EINVAL, "ex_single_thread_context_destroy: created before fork(), in another process");
    if (pthread_equal(pthread_self(), ctx->thread))
        return ex_err(EX_EINVAL, "ex_single_thread_context_destroy: called on the context's own thread");
    if (exi_fas_or_u32(&ctx->gate, CLOSED) & CLOSED)
        return ex_err(EX_EINVAL, "ex_single_thread_context_destroy: destroy has already begun");
    /* Pushes admitted before CLOSED finish queueing; later ones are refused. */
    for (unsigned spins = 0; exi_load_acq_u32(&ctx->gate) != CLOSED; spins++) {
        if (spins < 64) exi_pause();
        else sched_yield();
    }
    ex_run_loop_finish(&ctx->loop);
    pthread_join(ctx->thread, NULL);
    /* Tasks that hold the context (away on other resources: their hops
     * back are refused now) finish elsewhere; the storage stays theirs
     * until the last releases its hold. */
    while (exi_load_acq_u32(&ctx->holders) != 0) {
        struct timespec nap = { 0, 200 * 1000 };
        nanosleep(&nap, NULL);
    }
    /* run() has returned with the queue empty and nothing can be queued any
     * more, so this cannot be EX_EBUSY. */
    return ex_run_loop_destroy(&ctx->loop);
}
