/* SPDX-License-Identifier: MIT */
/* linked_stop.c - a stop source that follows parent tokens.
 *
 * Each parent's token gets one of the source's links: an ordinary in-place
 * callback whose function requests stop on the source.  So everything the
 * in-place rules promise holds link by link: a parent's request runs the
 * link (and, through it, the source's own callbacks) on the requesting
 * thread; destroy deregisters each link, waiting for one a parent's
 * request runs on another thread, returning at once from inside one on
 * this thread.  Two parents stopping at once both run their link; the
 * first request on the source runs its callbacks, the second finds stop
 * already requested and returns. */
#include <cexec/cexec.h>

#include "base/exi_macros.h"
#include "core/exi_stop.h"

/* A parent's request reached l: the link's callback. */
static void link_fired(ex_stop_callback *cb) {
    ex_linked_stop_source *l = EXI_CONTAINER_OF(cb, ex_stop_link, cb)->owner;
    if (l->fire) l->fire(l);
    else (void)ex_stop_source_request_stop(&l->source);
}

static void init_unlinked(ex_linked_stop_source *l, void (*fire)(ex_linked_stop_source *l)) {
    ex_stop_source_init(&l->source);
    l->nlinks = 0;
    l->fire = fire;
    for (size_t i = 0; i < EX_STOP_LINK_MAX; i++) {
        l->links[i].owner = l;
        /* deregistering a link never registered does nothing */
        (void)ex_stop_callback_register(&l->links[i].cb, ex_never_stop_token(), link_fired);
    }
}

ex_error exi_linked_stop_source_init_fire(ex_linked_stop_source *l, const ex_stop_token *parents, size_t n,
                                          void (*fire)(ex_linked_stop_source *l)) {
    if (!l) return ex_err(EX_EINVAL, "ex_linked_stop_source_init: NULL source");
    init_unlinked(l, fire);
    if (n > EX_STOP_LINK_MAX) return ex_err(EX_EINVAL, "ex_linked_stop_source_init: more than EX_STOP_LINK_MAX parents");
    if (n && !parents) return ex_err(EX_EINVAL, "ex_linked_stop_source_init: NULL parents");
    for (size_t i = 0; i < n; i++) {
        if (!ex_stop_token_stop_possible(parents[i])) continue;
        ex_stop_link *link = &l->links[l->nlinks];
        /* Counted first: a link that ran at registration is not registered
         * (its deregistration does nothing), one that did not may run on
         * another thread from now on. */
        l->nlinks++;
        if (ex_stop_callback_register(&link->cb, parents[i], link_fired)) break;  /* l is stopped */
    }
    return ex_ok();
}

ex_error ex_linked_stop_source_init(ex_linked_stop_source *l, const ex_stop_token *parents, size_t n) {
    return exi_linked_stop_source_init_fire(l, parents, n, NULL);
}

void ex_linked_stop_source_destroy(ex_linked_stop_source *l) {
    if (!l) return;
    for (uint32_t i = 0; i < l->nlinks; i++) ex_stop_callback_deregister(&l->links[i].cb);
}

bool ex_linked_stop_source_request_stop(ex_linked_stop_source *l) { return l && ex_stop_source_request_stop(&l->source); }

bool ex_linked_stop_source_stop_requested(const ex_linked_stop_source *l) {
    return l && ex_stop_source_stop_requested(&l->source);
}
