/* SPDX-License-Identifier: MIT */
/* virtual_clock.c - a clock that moves only when a test advances it
 * (cexec/virtual_clock.h), and the resources attached to it
 * (core/exi_clock.h). */
#include <stdalign.h>
#include <string.h>

#include "core/exi_clock.h"

ex_error ex_virtual_clock_create(int64_t start_ns, ex_clock **out) {
    if (!out) return ex_err(EX_EINVAL, "ex_virtual_clock_create: NULL out");
    *out = NULL;
    if (start_ns < 0) return ex_err(EX_EINVAL, "ex_virtual_clock_create: negative start time");
    const ex_allocator *a = ex_default_allocator();
    ex_clock *c = ex_allocate(a, sizeof *c, alignof(ex_clock));
    if (!c) return ex_err(EX_ENOMEM, "ex_virtual_clock_create: out of memory");
    memset(c, 0, sizeof *c);
    if (pthread_mutex_init(&c->mu, NULL)) {
        ex_deallocate(a, c, sizeof *c, alignof(ex_clock));
        return ex_err(EX_EAGAIN, "ex_virtual_clock_create: pthread_mutex_init failed");
    }
    c->now = (uint64_t)start_ns;
    c->alloc = a;
    *out = c;
    return ex_ok();
}

ex_error ex_virtual_clock_destroy(ex_clock *c) {
    if (!c) return ex_ok();
    pthread_mutex_lock(&c->mu);
    size_t users = c->users;
    pthread_mutex_unlock(&c->mu);
    if (users)
        return ex_err(EX_EBUSY, "ex_virtual_clock_destroy: resources still keep time on the clock (destroy them first)");
    const ex_allocator *a = c->alloc;  /* not today's default: the process may have changed it since */
    if (c->clients) ex_deallocate(a, c->clients, c->cap * sizeof *c->clients, alignof(exi_clock_client));
    pthread_mutex_destroy(&c->mu);
    ex_deallocate(a, c, sizeof *c, alignof(ex_clock));
    return ex_ok();
}

int64_t ex_clock_now(const ex_clock *c) { return exi_clock_now(c); }

ex_error exi_clock_attach(ex_clock *c, void *resource, const exi_clock_client_vt *vt) {
    pthread_mutex_lock(&c->mu);
    if (c->n == c->cap) {
        const ex_allocator *a = c->alloc;
        size_t cap = c->cap ? 2 * c->cap : 4;
        exi_clock_client *grown = ex_allocate(a, cap * sizeof *grown, alignof(exi_clock_client));
        if (!grown) {
            pthread_mutex_unlock(&c->mu);
            return ex_err(EX_ENOMEM, "out of memory to attach a resource to its virtual clock");
        }
        if (c->n) memcpy(grown, c->clients, c->n * sizeof *grown);
        if (c->clients) ex_deallocate(a, c->clients, c->cap * sizeof *c->clients, alignof(exi_clock_client));
        c->clients = grown;
        c->cap = cap;
    }
    c->clients[c->n++] = (exi_clock_client){ resource, vt };
    c->users++;
    pthread_mutex_unlock(&c->mu);
    return ex_ok();
}

void exi_clock_release(ex_clock *c) {
    pthread_mutex_lock(&c->mu);
    c->users--;
    pthread_mutex_unlock(&c->mu);
}

void exi_clock_detach(ex_clock *c, void *resource) {
    pthread_mutex_lock(&c->mu);
    for (size_t i = 0; i < c->n; i++) {
        if (c->clients[i].resource != resource) continue;
        memmove(&c->clients[i], &c->clients[i + 1], (c->n - i - 1) * sizeof *c->clients);
        c->n--;
        break;
    }
    pthread_mutex_unlock(&c->mu);
}

/* Under mu: the client with the earliest deadline, or NULL if none is due
 * by `until`. */
static exi_clock_client *earliest_due(ex_clock *c, int64_t until, int64_t *deadline) {
    exi_clock_client *best = NULL;
    int64_t best_d = INT64_MAX;
    for (size_t i = 0; i < c->n; i++) {
        int64_t d = c->clients[i].vt->earliest(c->clients[i].resource);
        if (d < best_d) best_d = d, best = &c->clients[i];
    }
    if (!best || best_d > until) return NULL;
    *deadline = best_d;
    return best;
}

/* Under mu: moves the time to `until`, firing what falls due on the way,
 * each at its own deadline. */
static size_t advance_locked(ex_clock *c, int64_t until) {
    size_t fired = 0;
    int64_t d;
    for (exi_clock_client *cl; (cl = earliest_due(c, until, &d));) {
        int64_t now = (int64_t)exi_load_rlx_u64(&c->now);
        if (d > now) exi_store_rel_u64(&c->now, (uint64_t)d);
        /* A cancel between the look and the take leaves nothing due. */
        fired += cl->vt->fire_due(cl->resource, d > now ? d : now);
    }
    exi_store_rel_u64(&c->now, (uint64_t)until);
    return fired;
}

/* Takes the refused timers (under mu), to cancel after unlocking. */
static ex_work *take_refused(ex_clock *c) {
    ex_work *w = c->refused;
    c->refused = NULL;
    return w;
}

static void cancel_refused(ex_work *w) {
    while (w) {
        ex_work *next = w->next;  /* the cancel may free w's operation */
        w->cancel(w);
        w = next;
    }
}

ex_error ex_virtual_clock_advance_to(ex_clock *c, int64_t deadline_ns, size_t *fired) {
    if (fired) *fired = 0;
    if (!c) return ex_err(EX_EINVAL, "ex_virtual_clock_advance_to: NULL clock");
    pthread_mutex_lock(&c->mu);
    int64_t now = (int64_t)exi_load_rlx_u64(&c->now);
    if (deadline_ns < now) {
        pthread_mutex_unlock(&c->mu);
        return ex_err(EX_EINVAL, "ex_virtual_clock_advance_to: the deadline is before the clock's time");
    }
    size_t n = advance_locked(c, deadline_ns);
    ex_work *refused = take_refused(c);
    pthread_mutex_unlock(&c->mu);
    cancel_refused(refused);
    if (fired) *fired = n;
    return ex_ok();
}

ex_error ex_virtual_clock_advance(ex_clock *c, int64_t duration_ns, size_t *fired) {
    if (fired) *fired = 0;
    if (!c) return ex_err(EX_EINVAL, "ex_virtual_clock_advance: NULL clock");
    if (duration_ns < 0) return ex_err(EX_EINVAL, "ex_virtual_clock_advance: negative duration");
    pthread_mutex_lock(&c->mu);
    int64_t now = (int64_t)exi_load_rlx_u64(&c->now);
    if (duration_ns > INT64_MAX - now) {
        pthread_mutex_unlock(&c->mu);
        return ex_err(EX_EINVAL, "ex_virtual_clock_advance: the duration overflows the clock");
    }
    size_t n = advance_locked(c, now + duration_ns);
    ex_work *refused = take_refused(c);
    pthread_mutex_unlock(&c->mu);
    cancel_refused(refused);
    if (fired) *fired = n;
    return ex_ok();
}

int64_t ex_virtual_clock_next_deadline(ex_clock *c) {
    if (!c) return INT64_MAX;
    pthread_mutex_lock(&c->mu);
    int64_t d = INT64_MAX;
    for (size_t i = 0; i < c->n; i++) {
        int64_t e = c->clients[i].vt->earliest(c->clients[i].resource);
        if (e < d) d = e;
    }
    pthread_mutex_unlock(&c->mu);
    return d;
}

size_t ex_virtual_clock_armed(ex_clock *c) {
    if (!c) return 0;
    pthread_mutex_lock(&c->mu);
    size_t n = 0;
    for (size_t i = 0; i < c->n; i++) n += c->clients[i].vt->armed(c->clients[i].resource);
    pthread_mutex_unlock(&c->mu);
    return n;
}
