/* SPDX-License-Identifier: MIT */
/* strand.c - serialising scheduler adaptor (see cexec/strand.h).
 *
 * A FIFO of intrusive work items under a mutex, plus `active`: true while a
 * drain is queued on, or running on, the underlying scheduler.  Whoever
 * makes the queue non-empty while inactive queues the drain; only the drain
 * clears `active`, under the lock, when it finds the queue empty.  So at
 * most one drain exists and no item waits without one. */
#include <pthread.h>

#include <string.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "base/exi_macros.h"
#include "core/exi_scheduler.h"

#define TURN_ITEMS 64  /* items per turn before the strand queues itself again */

struct ex_strand {
    ex_scheduler under;
    const ex_allocator *alloc;
    pthread_mutex_t mu;
    ex_work *head, *tail;       /* under mu */
    bool active;                /* under mu */
    uint32_t holders;           /* under mu: owning scheduler handles */
    uint64_t executed;          /* under mu */
    ex_work drain;              /* the drain, when `under` supports post */
    ex_operation *drain_op;     /* else a schedule operation, in drain_storage */
    size_t drain_size;
    alignas(max_align_t) unsigned char drain_storage[];
};

/* The drains running on this thread, innermost first (a strand over a
 * strand runs one drain inside the other): dispatch to any of them runs
 * inline. */
typedef struct drain_frame {
    ex_strand *s;
    struct drain_frame *outer;
} drain_frame;
static EXI_TLS drain_frame *current;

/* The kicks through a schedule operation whose start is running on this
 * thread, innermost first.  Its completion inside that start is inline:
 * the kicker runs the drain after start returns (a loop, not a
 * recursion).  A completion on any other thread is an agent of the
 * underlying scheduler and drains there, even before start returned
 * (telling the two apart by who came second ran items on the poster's
 * thread). */
typedef struct kick_frame {
    ex_strand *s;
    bool completed;
    struct kick_frame *outer;
} kick_frame;
static EXI_TLS kick_frame *kicking;

static bool kick(ex_strand *s, bool yield);

/* Runs what `under` refused to take: every queued item is dropped. */
static void drop_all(ex_strand *s) {
    for (;;) {
        pthread_mutex_lock(&s->mu);
        ex_work *w = s->head;
        if (w) {
            s->head = w->next;
            if (!s->head) s->tail = NULL;
        } else {
            s->active = false;
        }
        pthread_mutex_unlock(&s->mu);
        if (!w) return;
        if (w->cancel) w->cancel(w);
        else w->execute(w);
    }
}

/* Turns of up to TURN_ITEMS items; after each full turn the strand queues
 * itself again (behind other work), and carries on here only when that
 * kick completed inline (an inline scheduler): a loop, not a recursion. */
static void drain(ex_strand *s) {
    drain_frame frame = { s, current };
    current = &frame;
    for (int n = 0;; n++) {
        pthread_mutex_lock(&s->mu);
        ex_work *w = s->head;
        if (!w) {
            s->active = false;
            pthread_mutex_unlock(&s->mu);
            break;
        }
        if (n == TURN_ITEMS) {
            pthread_mutex_unlock(&s->mu);
            current = frame.outer;
            if (!kick(s, true)) return;  /* still active: the next turn is this strand's */
            current = &frame;
            n = -1;
            continue;
        }
        s->head = w->next;
        if (!s->head) s->tail = NULL;
        s->executed++;
        pthread_mutex_unlock(&s->mu);
        w->execute(w);
    }
    current = frame.outer;
}

static void drain_work(ex_work *w) { drain(EXI_CONTAINER_OF(w, ex_strand, drain)); }
static void drain_cancel(ex_work *w) { drop_all(EXI_CONTAINER_OF(w, ex_strand, drain)); }

/* The receiver of the drain's schedule operation (schedulers without post). */
static void drain_value(void *self, const ex_value *v, size_t n) {
    (void)v, (void)n;
    ex_strand *s = self;
    for (kick_frame *k = kicking; k; k = k->outer)
        if (k->s == s) {
            k->completed = true;  /* the kicker carries on */
            return;
        }
    drain(s);
}
static void drain_error(void *self, ex_error e) {
    (void)e;
    drop_all(self);
}
static void drain_stopped(void *self) { drop_all(self); }
static const ex_receiver_vtable drain_receiver_vt = { drain_value, drain_error, drain_stopped, NULL, NULL };

/* Queues the drain on the underlying scheduler (`active` is already set);
 * yield: behind the work waiting there.  Returns true when the caller (a
 * drain) must run the next turn itself: the underlying scheduler completed
 * the schedule operation inside its start. */
static bool kick(ex_strand *s, bool yield) {
    if (s->under.vt->post) {
        ex_error e = yield && s->under.vt->yield ? s->under.vt->yield(s->under.self, &s->drain)
                                                 : ex_post(s->under, &s->drain);
        if (e.code) drop_all(s);
        return false;
    }
    if (s->drain_op) ex_operation_destroy(s->drain_op);
    s->drain_op = NULL;
    ex_receiver r = { &drain_receiver_vt, s };
    if (ex_connect_schedule(s->under, r, s->drain_storage).code) {
        drop_all(s);
        return false;
    }
    s->drain_op = (ex_operation *)(void *)s->drain_storage;
    kick_frame frame = { s, false, kicking };
    kicking = &frame;
    ex_start(s->drain_op);
    kicking = frame.outer;
    if (!frame.completed) return false;  /* the completion drains, wherever it runs */
    if (yield) return true;
    drain(s);  /* the first turn, from a post */
    return false;
}

static ex_error strand_post(void *self, ex_work *w) {
    ex_strand *s = self;
    w->next = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->tail) s->tail->next = w;
    else s->head = w;
    s->tail = w;
    bool start = !s->active;
    s->active = true;
    pthread_mutex_unlock(&s->mu);
    if (start) kick(s, false);
    return ex_ok();
}

static ex_error strand_dispatch(void *self, ex_work *w) {
    for (drain_frame *f = current; f; f = f->outer)
        if (f->s == self) {
            w->execute(w);
            return ex_ok();
        }
    return strand_post(self, w);
}

static void strand_op_start(ex_operation *op) {
    exi_queued_op *o = (exi_queued_op *)op;
    strand_post(o->resource, &o->work);
}

static const ex_operation_vtable strand_op_vt = { strand_op_start, NULL };

static ex_error strand_connect(void *self, ex_receiver r, void *storage) {
    exi_queued_op_init(storage, &strand_op_vt, self, r);
    return ex_ok();
}

static const ex_allocator *strand_allocator(void *self) {
    ex_scheduler under = ((ex_strand *)self)->under;
    return under.vt->allocator ? under.vt->allocator(under.self) : NULL;
}

static void strand_retain(void *self) {
    ex_strand *s = self;
    pthread_mutex_lock(&s->mu);
    s->holders++;
    pthread_mutex_unlock(&s->mu);
}

static void strand_release(void *self) {
    ex_strand *s = self;
    pthread_mutex_lock(&s->mu);
    s->holders--;
    pthread_mutex_unlock(&s->mu);
}

static const ex_scheduler_vtable strand_vt = {
    .name = "strand",
    .schedule_op_size = sizeof(exi_queued_op),
    .schedule_op_align = alignof(exi_queued_op),
    .schedule_flags = EX_SIGS_STOPPED,
    .connect_schedule = strand_connect,
    .progress = EX_PROGRESS_WEAKLY_PARALLEL,
    .equal = NULL,
    .post = strand_post,
    .dispatch = strand_dispatch,
    .allocator = strand_allocator,
    .retain = strand_retain,
    .release = strand_release,
};

ex_error ex_strand_create(ex_scheduler under, const ex_allocator *alloc, ex_strand **out) {
    if (!out) return ex_err(EX_EINVAL, "ex_strand_create: out is NULL");
    *out = NULL;
    if (!under.vt || !under.vt->connect_schedule)
        return ex_err(EX_EINVAL, "ex_strand_create: invalid underlying scheduler");
    if (!alloc) alloc = ex_default_allocator();
    size_t op = under.vt->post ? 0 : under.vt->schedule_op_size;
    if (under.vt->schedule_op_align > alignof(max_align_t))
        return ex_err(EX_EINVAL, "ex_strand_create: the scheduler's schedule operation is over-aligned");
    if (op > EX_ALLOC_MAX_SIZE - sizeof(ex_strand))  /* sizeof *s + op below must not wrap */
        return ex_err(EX_ENOMEM, "ex_strand_create: the scheduler's schedule operation is larger than any allocation");
    ex_strand *s = ex_allocate(alloc, sizeof *s + op, alignof(ex_strand));
    if (!s) return ex_err(EX_ENOMEM, "ex_strand_create: out of memory");
    memset(s, 0, sizeof *s);
    if (pthread_mutex_init(&s->mu, NULL)) {
        ex_deallocate(alloc, s, sizeof *s + op, alignof(ex_strand));
        return ex_err(EX_EAGAIN, "ex_strand_create: pthread_mutex_init failed");
    }
    s->under = under;
    s->alloc = alloc;
    s->drain_size = op;
    s->drain = (ex_work){ NULL, drain_work, drain_cancel };
    *out = s;
    return ex_ok();
}

ex_scheduler ex_strand_scheduler(ex_strand *s) {
    ex_scheduler sch = { s ? &strand_vt : NULL, s };  /* NULL: the invalid handle */
    return sch;
}

uint64_t ex_strand_executed(const ex_strand *s) {
    ex_strand *m = (ex_strand *)(uintptr_t)s;
    pthread_mutex_lock(&m->mu);
    uint64_t n = m->executed;
    pthread_mutex_unlock(&m->mu);
    return n;
}

ex_error ex_strand_destroy(ex_strand *s) {
    if (!s) return ex_ok();
    pthread_mutex_lock(&s->mu);
    bool busy = s->active || s->holders;
    pthread_mutex_unlock(&s->mu);
    if (busy) return ex_err(EX_EBUSY, "ex_strand_destroy: work is queued or running, or a task holds the strand");
    if (s->drain_op) ex_operation_destroy(s->drain_op);
    pthread_mutex_destroy(&s->mu);
    ex_deallocate(s->alloc, s, sizeof *s + s->drain_size, alignof(ex_strand));
    return ex_ok();
}
