/* SPDX-License-Identifier: MIT */
/* debug.c - debug mode (cexec/debug.h): released senders kept in a
 * quarantine so that a later use is recognised, and operations wrapped so
 * that a second start or a destroy while running is. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cexec/cexec.h>

#include "allocators/exi_builtin.h"
#include "base/exi_atomic.h"
#include "core/exi_debug.h"

uint32_t exi_debug_on;

/* CEXEC_DEBUG=1 (any value but "0" or empty) at start-up. */
__attribute__((constructor)) static void debug_from_environment(void) {
    const char *v = getenv("CEXEC_DEBUG");
    if (v && *v && strcmp(v, "0") != 0) exi_store_rlx_u32(&exi_debug_on, 1);
}

/* ------------------------------------------------------------ quarantine */

#define QUARANTINE 65536u

/* A ring of released objects not yet freed: senders and error boxes.
 * Evicted (the oldest) or emptied entries are freed then. */
typedef struct kept {
    void *p;
    void (*free_fn)(void *p);
} kept;

static pthread_mutex_t quarantine_mu = PTHREAD_MUTEX_INITIALIZER;
static kept *quarantine;             /* QUARANTINE entries, allocated at first use */
static size_t quarantine_next, quarantine_count;

void exi_debug_keep(void *p, void (*free_fn)(void *p)) {
    kept evicted = { NULL, NULL };
    pthread_mutex_lock(&quarantine_mu);
    if (!quarantine) quarantine = calloc(QUARANTINE, sizeof *quarantine);
    if (!quarantine) {
        pthread_mutex_unlock(&quarantine_mu);
        free_fn(p);  /* no room to keep it: checked less, never wrong */
        return;
    }
    evicted = quarantine[quarantine_next];
    quarantine[quarantine_next].p = p;
    quarantine[quarantine_next].free_fn = free_fn;
    quarantine_next = (quarantine_next + 1) % QUARANTINE;
    if (quarantine_count < QUARANTINE) quarantine_count++;
    pthread_mutex_unlock(&quarantine_mu);
    if (evicted.p) evicted.free_fn(evicted.p);
}

static void free_sender(void *p) {
    ex_sender *s = p;
    exi_block_free(s->alloc, s, s->size);
}

void exi_debug_bury(ex_sender *s) {
    /* Builders look at the status first: a dead sender takes them to
     * ex_check_input, which recognises it. */
    s->status = ex_err(EX_EINVAL, "cexec debug: a released sender");
    exi_store_rlx_u32(&s->refs, EXI_SENDER_DEAD);
    exi_debug_keep(s, free_sender);
}

/* Frees every kept object (debug mode turned off). */
static void quarantine_empty(void) {
    pthread_mutex_lock(&quarantine_mu);
    kept *q = quarantine;
    quarantine = NULL;
    quarantine_next = quarantine_count = 0;
    pthread_mutex_unlock(&quarantine_mu);
    if (!q) return;
    for (size_t i = 0; i < QUARANTINE; i++)
        if (q[i].p) q[i].free_fn(q[i].p);
    free(q);
}

static const char *name_of(const ex_sender *s) { return s->vt && s->vt->name ? s->vt->name : "a sender of yours"; }

void exi_debug_dead_sender(const ex_sender *s, const char *call) {
    fprintf(stderr,
            "cexec debug: %s: the sender built by %s (%p) was already released for good: released more often than "
            "retained, or used after a builder took your only reference to it (give a second consumer "
            "ex_sender_retain(s))\n",
            call, name_of(s), (const void *)s);
    abort();
}

/* ------------------------------------------------------------ operations */

enum { OP_CONNECTED, OP_STARTED, OP_COMPLETED };

typedef struct debug_op {
    ex_operation base;       /* what the caller holds */
    ex_operation *inner;     /* the real operation, in the caller's storage */
    ex_receiver user;        /* the caller's receiver */
    const char *name;        /* the builder of the connected sender */
    uint32_t state;          /* OP_* */
} debug_op;

static __attribute__((noreturn, cold)) void op_abort(const debug_op *d, const char *call, const char *what) {
    fprintf(stderr, "cexec debug: %s: the operation of %s (%p) %s\n", call, d->name, (const void *)&d->base, what);
    abort();
}

static void debug_start(ex_operation *op) {
    debug_op *d = (debug_op *)op;
    uint32_t expected = OP_CONNECTED;
    if (!exi_cas_u32(&d->state, &expected, OP_STARTED))
        op_abort(d, "ex_start", "was started a second time (an operation is started at most once)");
    ex_start(d->inner);
}

static void debug_destroy(ex_operation *op) {
    debug_op *d = (debug_op *)op;
    if (exi_load_acq_u32(&d->state) == OP_STARTED)
        op_abort(d, "ex_operation_destroy", "is destroyed while it runs (started, and its completion was not delivered)");
    ex_operation_destroy(d->inner);
    free(d);
}

static const ex_operation_vtable debug_op_vt = { debug_start, debug_destroy };

/* The completion is marked delivered before it is passed on: the receiver
 * may destroy the operation inside it (d is not touched after). */
static void debug_value(void *self, const ex_value *v, size_t n) {
    debug_op *d = self;
    ex_receiver u = d->user;
    exi_store_rel_u32(&d->state, OP_COMPLETED);
    ex_set_value(u, v, n);
}

static void debug_error(void *self, ex_error e) {
    debug_op *d = self;
    ex_receiver u = d->user;
    exi_store_rel_u32(&d->state, OP_COMPLETED);
    ex_set_error(u, e);
}

static void debug_stopped(void *self) {
    debug_op *d = self;
    ex_receiver u = d->user;
    exi_store_rel_u32(&d->state, OP_COMPLETED);
    ex_set_stopped(u);
}

static ex_env debug_env(void *self) { return ex_receiver_env(((debug_op *)self)->user); }

static const ex_receiver_vtable debug_rcvr_vt = { debug_value, debug_error, debug_stopped, debug_env, NULL };

ex_error exi_debug_connect(const ex_sender *s, ex_receiver r, void *storage, ex_operation **op) {
    debug_op *d = malloc(sizeof *d);
    if (!d) return ex_err(EX_ENOMEM, "ex_connect: out of memory for the debug mode's operation wrapper");
    d->base.vt = &debug_op_vt;
    d->inner = storage;
    d->user = r;
    d->name = name_of(s);
    d->state = OP_CONNECTED;
    ex_receiver dr = { &debug_rcvr_vt, d };
    ex_error e = s->vt->connect(s, dr, storage);
    if (e.code) {
        free(d);
        return e;
    }
    *op = &d->base;
    return e;
}

ex_operation *exi_debug_inner(ex_operation *op) { return op->vt == &debug_op_vt ? ((debug_op *)op)->inner : op; }

/* ------------------------------------------------------------------ switch */

bool ex_debug_set(bool on) {
    bool was = exi_fas_u32(&exi_debug_on, on ? 1u : 0u) != 0;
    if (!on) quarantine_empty();
    return was;
}

bool ex_debug_enabled(void) { return exi_debug(); }
