/* SPDX-License-Identifier: MIT */
/* exi_clock.h - the clock a resource keeps its timers on: CLOCK_MONOTONIC
 * (NULL) or a virtual clock (cexec/virtual_clock.h) that a test advances.
 *
 * A resource on a virtual clock attaches to it for its life.  It never
 * waits for a virtual deadline in real time: its timers become due only
 * when the clock is advanced, and the advance hands each due timer's
 * completion to the resource's agents (its queue), in deadline order
 * across every resource attached.  Lock order: the clock's, then the
 * resource's; a resource never calls the clock under its own lock.
 * Internal. */
#ifndef EXI_CLOCK_H
#define EXI_CLOCK_H

#include <pthread.h>
#include <cexec/cexec.h>

#include "base/exi_atomic.h"

/* What a resource on a virtual clock gives it.  Both take the resource's
 * lock. */
typedef struct exi_clock_client_vt {
    /* The earliest deadline armed on the resource; INT64_MAX if none. */
    int64_t (*earliest)(void *resource);
    /* Takes the earliest timer if its deadline <= now and queues its
     * completion on the resource's agents; whether it took one. */
    bool (*fire_due)(void *resource, int64_t now);
    /* Timers armed on the resource. */
    size_t (*armed)(void *resource);
} exi_clock_client_vt;

typedef struct exi_clock_client {
    void *resource;
    const exi_clock_client_vt *vt;
} exi_clock_client;

struct ex_clock {
    pthread_mutex_t mu;          /* the clients; held for a whole advance */
    uint64_t now;                /* ns; read without mu */
    exi_clock_client *clients;   /* what an advance walks */
    size_t n, cap;
    size_t users;                /* resources given the clock and not yet gone: destroy waits for 0 */
    ex_work *refused;            /* timers a resource could not take: dropped after the advance */
    const ex_allocator *alloc;   /* the default allocator at create: the clock's and its array's */
};

/* The time on c (NULL: CLOCK_MONOTONIC). */
static inline int64_t exi_clock_now(const ex_clock *c) {
    return c ? (int64_t)exi_load_acq_u64(&c->now) : ex_now();
}

/* Whether a resource on c waits for deadlines in real time. */
static inline bool exi_clock_is_real(const ex_clock *c) { return c == NULL; }

/* A resource on c (not NULL) from its init: an advance walks it, and it
 * counts as a user of c.  EX_ENOMEM. */
ex_error exi_clock_attach(ex_clock *c, void *resource, const exi_clock_client_vt *vt);

/* An advance no longer walks the resource (it shut down); waits for an
 * advance under way.  It still counts as a user. */
void exi_clock_detach(ex_clock *c, void *resource);

/* The resource no longer reads c at all (its memory goes): one user
 * fewer. */
void exi_clock_release(ex_clock *c);

/* From a fire_due (under c's mutex): a due timer's work the resource
 * could not queue (it shuts down).  The advance cancels it (the timer
 * completes set_stopped) once it released c's mutex: a completion may
 * call the clock. */
static inline void exi_clock_refused(ex_clock *c, ex_work *w) {
    w->next = c->refused;
    c->refused = w;
}

#endif
