/* SPDX-License-Identifier: MIT */
/* when_all.c - [exec.when.all], and ex_when_all_collect_n (a cexec
 * extension: a fan-out over a run-time number of children).
 *
 * One block: the header, one slot per child (its values, borrowed tuple
 * storage, its receiver identity), a collect's result, then the children's
 * operations.  Who completes, and with what, is exi_join's rule (shared
 * with the task fork); the two differ only in what the values become. */
#include <string.h>

#include <stdalign.h>
#include <cexec/cexec.h>

#include "adaptors/exi_on.h"
#include "base/exi_atomic.h"
#include "base/exi_macros.h"
#include "compose/exi_join.h"
#include "compose/exi_when_all.h"
#include "core/exi_domain.h"
#include "core/exi_env.h"
#include "core/exi_error_text.h"
#include "core/exi_sender.h"
#include "core/exi_value.h"
#include "resources/exi_pool.h"

struct when_all_op;

typedef struct wa_slot {
    struct when_all_op *op;
    ex_operation *child;
    uint8_t cap;          /* values this child may send (EX_MAX_ARITY if dynamic) */
    uint8_t n;            /* values it sent */
    bool hop;             /* the child is a starts_on (exi_on.h) */
    uint8_t index;        /* collect: the value signature its values matched */
    uint32_t variant;     /* collect: 1 + its copy in the op's variants (several value signatures), else 0 */
    ex_value *v;          /* cap values, inside the block */
    void *nested;         /* tuple contents, from the env's allocator */
    size_t nested_size;
} wa_slot;

typedef struct when_all_op {
    ex_operation base;
    ex_receiver r;
    size_t n;
    exi_join join;         /* count, disposition, the children's stop source (following token lazily) */
    ex_stop_token token;       /* the receiver's, read at connect with the allocator */
    ex_env_pair child_env;
    const ex_allocator *alloc;
    size_t size;               /* of the whole block (the sender's op_size) */
    size_t hops;               /* children that queue an item when started */
    ex_value *collected;       /* collect: the result's n elements, their n tuples, then variants_of; NULL: a when_all */
    wa_slot slots[];
} when_all_op;

typedef exi_when_all_sender when_all_sender;  /* exi_when_all.h */

/* What connect needs of each child, laid out once when the sender is
 * built: in the sender's block, after the children. */
typedef struct wa_child {
    size_t op_off;         /* its operation, in the when_all's */
    size_t v_off;          /* its value array, in the when_all's */
    uint8_t cap;           /* values it may send */
    bool hop;              /* a starts_on (exi_on.h) */
} wa_child;

_Static_assert(alignof(wa_child) <= alignof(ex_sender *), "the layout follows the children's pointers");

static const wa_child *child_layout(const when_all_sender *ws) {
    return (const wa_child *)(const void *)(ws->children + ws->n);
}

static void arrive(when_all_op *o);

/* ---------------------------------------------------------------- messages
 * (children counted from 0, their index in the array; made only on error
 * paths, out of line) */

/* Too many values in all, at run time. */
static __attribute__((noinline, cold)) const char *sent_too_many(const when_all_op *o) {
    size_t total = 0;
    for (size_t i = 0; i < o->n; i++) total += o->slots[i].n;
    const char *t = exi_error_text("ex_when_all: the children sent %zu values in all; at most EX_MAX_ARITY (%d) fit "
                                   "(ex_when_all_collect_n takes any number)", total, EX_MAX_ARITY);
    return t ? t : "ex_when_all: the children sent more than EX_MAX_ARITY values";
}

/* A child that sent more than its signature said. */
static __attribute__((noinline, cold)) const char *child_sent_too_many(const when_all_op *o, const wa_slot *s,
                                                                      const ex_value *v, size_t n) {
    char a[EXI_SIG_TEXT_SIZE];
    exi_values_text(v, n, a, sizeof a);
    const char *t = exi_error_text("ex_when_all: child %zu sent %zu values %s; its signature allows at most %u",
                                   (size_t)(s - o->slots), n, a, (unsigned)s->cap);
    return t ? t : "ex_when_all: a child sent more values than its signature allows";
}

static __attribute__((noinline, cold)) const char *null_child(const char *who, size_t i) {
    const char *t = exi_error_text("%s: child %zu is a NULL input sender", who, i);
    return t ? t : "ex_when_all: NULL input sender";
}

static __attribute__((noinline, cold)) const char *several_sigs(size_t i, const ex_sigs *cs) {
    char a[EX_MAX_VALUE_SIGS * (EXI_SIG_TEXT_SIZE + 8)];
    exi_sigs_text(cs, a, sizeof a);
    const char *t = exi_error_text("ex_when_all: child %zu sends %s; a when_all child may send at most one value "
                                   "signature (ex_when_all_with_variant takes several)", i, a);
    return t ? t : "ex_when_all: a child has more than one value signature; use ex_when_all_with_variant";
}

/* The children's values add up to more than EX_MAX_ARITY: child i takes
 * the count from `before` past it.  The total counts the children whose
 * one value signature is known (the others are checked at run time). */
static __attribute__((noinline, cold)) const char *too_many_values(ex_sender *const *children, size_t n, size_t i,
                                                                  unsigned before) {
    size_t total = before;
    for (size_t j = i; j < n; j++) {
        const ex_sender *c = children[j];
        if (c && !c->status.code && c->sigs.nvalues == 1 && !(c->sigs.flags & EX_SIGS_DYNAMIC))
            total += c->sigs.values[0].arity;
    }
    const char *t = exi_error_text("ex_when_all: the children send %zu values in all; at most EX_MAX_ARITY (%d) fit "
                                   "(child %zu takes the count from %u to %u; ex_when_all_collect_n takes any number)",
                                   total, EX_MAX_ARITY, i, before,
                                   before + (unsigned)children[i]->sigs.values[0].arity);
    return t ? t : "ex_when_all: the children's values add up to more than EX_MAX_ARITY";
}

/* A stop request on the receiver's token reached the children's source,
 * once linked: forward it to them (exi_join.h). */
static void request_stop_fire(exi_lazy_stop *l) {
    when_all_op *o = EXI_CONTAINER_OF(l, when_all_op, join.stop);
    if (exi_join_forward_stop(&o->join)) arrive(o);
}

/* A collect's value: one tuple whose element i is a tuple of child i's
 * values, each pointing at the child's slot (they stay put until the
 * operation is destroyed, which the receiver may not do before this call
 * returns). */
static void complete_collected(when_all_op *o) {
    size_t n = o->n;
    ex_value *elems = o->collected;
    ex_tuple *tuples = (ex_tuple *)(void *)(elems + n);
    for (size_t i = 0; i < n; i++) {
        const wa_slot *s = &o->slots[i];
        tuples[i].index = s->index;
        tuples[i].n = s->n;
        tuples[i].v = s->v;
        elems[i] = ex_tuple_value(&tuples[i]);
    }
    ex_tuple all = { 0, (uint32_t)n, elems };
    ex_value v = ex_tuple_value(&all);
    ex_set_value(o->r, &v, 1);
}

static void complete(when_all_op *o) {
    exi_lazy_stop_unfollow(&o->join.stop);
    uint32_t d = exi_load_acq_u32(&o->join.disposition);
    if (d == EXI_JOIN_ERROR) {
        ex_set_error(o->r, o->join.err);
    } else if (d == EXI_JOIN_STOPPED) {
        ex_set_stopped(o->r);
    } else if (o->collected) {
        complete_collected(o);
    } else {
        /* The slots' arrays follow each other in the block, each as long
         * as its child may send: the values close up in place, towards
         * the first (the first child's stay where they are; a value only
         * moves down, so a forward copy is safe). */
        ex_value *all = o->slots[0].v;
        size_t k = 0;
        for (size_t i = 0; i < o->n; i++) {
            const wa_slot *s = &o->slots[i];
            if (k + s->n > EX_MAX_ARITY) {
                ex_set_error(o->r, ex_err(EX_EINVAL, sent_too_many(o)));
                return;
            }
            if (s->v != all + k)
                for (size_t j = 0; j < s->n; j++) exi_value_copy(&all[k + j], &s->v[j]);
            k += s->n;
        }
        ex_set_value(o->r, all, k);
    }
}

static void arrive(when_all_op *o) {
    if (exi_join_arrive(&o->join)) complete(o);
}

static void fail(when_all_op *o, ex_error e) { exi_join_fail(&o->join, e); }

/* Whether a collect keeps a copy of a child's signatures, to tell which
 * one its values matched (the tuple's index). */
static inline bool has_variants(const ex_sigs *cs) { return cs->nvalues > 1; }

/* Where a collect's copies of signatures go: after its n elements and n
 * tuples. */
static ex_sigs *variants_of(ex_value *collected, size_t n) {
    return (ex_sigs *)(void *)((ex_tuple *)(void *)(collected + n) + n);
}

/* Which of a child's value signatures (v, n) matches, as into_variant
 * tells it (0 if none does). */
static uint8_t matched_signature(const ex_sigs *cs, const ex_value *v, size_t n) {
    int i = ex_sigs_find(cs, v, n);
    return i < 0 ? 0 : (uint8_t)i;
}

static void wa_set_value(void *self, const ex_value *v, size_t n) {
    wa_slot *s = self;
    when_all_op *o = s->op;
    if (exi_load_acq_u32(&o->join.disposition) == EXI_JOIN_VALUE) {
        if (n > s->cap) {
            fail(o, ex_err(EX_EINVAL, child_sent_too_many(o, s, v, n)));
        } else {
            ex_error e = exi_values_copy(s->v, v, n, o->alloc, &s->nested, &s->nested_size);
            if (e.code) {
                fail(o, e);
            } else {
                s->n = (uint8_t)n;
                if (s->variant) s->index = matched_signature(&variants_of(o->collected, o->n)[s->variant - 1], v, n);
            }
        }
    }
    arrive(o);
}

static void wa_set_error(void *self, ex_error e) {
    when_all_op *o = ((wa_slot *)self)->op;
    fail(o, e);
    arrive(o);
}

static void wa_set_stopped(void *self) {
    when_all_op *o = ((wa_slot *)self)->op;
    exi_join_stopped(&o->join);
    arrive(o);
}

static ex_env wa_env(void *self) { return ex_env_of_pair(&((wa_slot *)self)->op->child_env); }

static const ex_receiver_vtable wa_rcvr_vt = { wa_set_value, wa_set_error, wa_set_stopped, wa_env, NULL };

/* A fork-join on the pool, as the task fork does it (task/task_await.c):
 * children that hop onto the pool (starts_on(pool, x)) started by one of
 * its agents are run by that agent itself, nested in this start, once the
 * other children are started, unless a thief took them meanwhile:
 *  - lazy: while the agent's deque already holds work for thieves, the
 *    first such child is not queued at all but held back
 *    (exi_pool_hold_started; queued should the agent wait for something);
 *  - take-back: a child queued and not stolen is the newest item of the
 *    agent's deque, which it would run next anyway once this start
 *    returns: taken back, it runs here without the worker loop.  Only
 *    the items' addresses are compared with the block's: the operation
 *    may have completed and be gone. */
static void run_taken_back(uintptr_t lo, uintptr_t hi, size_t hops) {
    ex_work *w;
    for (; hops && (w = exi_pool_take_own_within(lo, hi)); hops--) w->execute(w);
}

static void wa_start(ex_operation *op) {
    when_all_op *o = (when_all_op *)op;
    /* Below another fork-join's source this registers nothing
     * (exi_lazy_stop.h). */
    if (exi_lazy_stop_follow(&o->join.stop, o->token)) {
        /* Stop was already requested: start no child. */
        ex_set_stopped(o->r);
        return;
    }
    /* The last child to complete may destroy the operation: read nothing
     * from it after starting the last child. */
    size_t n = o->n;
    wa_slot *slots = o->slots;
    uintptr_t lo = (uintptr_t)o, hi = lo + o->size;
    size_t hops = o->hops;
    if (__builtin_expect(n == 0, 0)) {  /* a collect of no children: nothing to wait for */
        complete(o);
        return;
    }
    ex_work *held = NULL;  /* while set, the operation cannot complete */
    for (size_t i = 0; i < n; i++) {
        if (!held && slots[i].hop) held = exi_starts_on_start_lazy(slots[i].child);  /* (started, if not held) */
        else ex_start(slots[i].child);
    }
    if (held && exi_pool_unhold(held)) {
        hops--;
        held->execute(held);
    }
    run_taken_back(lo, hi, hops);
}

static void wa_destroy_op(ex_operation *op) {
    when_all_op *o = (when_all_op *)op;
    for (size_t i = 0; i < o->n; i++) {
        wa_slot *s = &o->slots[i];
        ex_operation_destroy(s->child);
        if (s->nested) ex_deallocate(o->alloc, s->nested, s->nested_size, alignof(ex_value));
        s->nested = NULL;
    }
}

static const ex_operation_vtable wa_op_vt = { wa_start, wa_destroy_op };

static inline __attribute__((always_inline)) ex_error wa_connect_now(const ex_sender *s, ex_receiver r, void *storage) {
    const when_all_sender *ws = (const when_all_sender *)s;
    when_all_op *o = storage;
    o->base.vt = &wa_op_vt;
    o->r = r;
    o->n = ws->n;
    o->size = s->op_size;
    o->hops = ws->hops;
    exi_join_init_lazy(&o->join, (uint32_t)ws->n, request_stop_fire);
    ex_env env = ex_receiver_env(r);
    o->alloc = ex_get_allocator(env);
    o->token = ex_get_stop_token(env);
    exi_env_pair_init_token_alloc(&o->child_env, exi_join_token(&o->join), o->alloc, ex_env_forward(env));
    ex_sigs *variants = NULL;
    uint32_t nvariants = 0;
    o->collected = NULL;
    if (ws->collect_off) {
        o->collected = (ex_value *)(void *)((char *)storage + ws->collect_off);
        variants = variants_of(o->collected, ws->n);
    }
    /* The layout lay_out made: value arrays, a collect's result, then the
     * children's operations at their alignments. */
    const wa_child *layout = child_layout(ws);
    for (size_t i = 0; i < ws->n; i++) {
        const wa_child *lc = &layout[i];
        wa_slot *sl = &o->slots[i];
        sl->op = o;
        sl->cap = lc->cap;
        sl->hop = lc->hop;
        sl->n = 0;
        sl->index = 0;
        sl->variant = 0;
        if (variants && has_variants(&ws->children[i]->sigs)) {
            variants[nvariants++] = ws->children[i]->sigs;
            sl->variant = nvariants;
        }
        sl->v = (ex_value *)(void *)((char *)storage + lc->v_off);
        sl->nested = NULL;
        sl->child = (ex_operation *)(void *)((char *)storage + lc->op_off);
        ex_receiver cr = { &wa_rcvr_vt, sl };
        ex_error e = ex_connect_child(ws->children[i], cr, sl->child);
        if (e.code) {
            for (size_t j = 0; j < i; j++) ex_operation_destroy(o->slots[j].child);
            return e;
        }
    }
    return ex_ok();
}

static ex_error wa_connect(const ex_sender *s, ex_receiver r, void *storage) {
    if (s->vt->tag && exi_late_wants(s)) return exi_connect_late(s, r, storage, wa_connect_now);
    return wa_connect_now(s, r, storage);
}

static void wa_destroy(ex_sender *s) {
    when_all_sender *ws = (when_all_sender *)s;
    for (size_t i = 0; i < ws->n; i++) exi_sender_release(ws->children[i]);
}

const ex_sender_vtable exi_when_all_vt = { "ex_when_all", wa_connect, NULL, wa_destroy, &ex_tag_when_all };
/* Its own vtable: the task layer runs an awaited ex_when_all as a fork
 * (exi_is_when_all), which completes with the values concatenated.  No
 * tag: a cexec extension, which no domain is offered. */
static const ex_sender_vtable when_all_collect_vt = { "ex_when_all_collect", wa_connect, NULL, wa_destroy, NULL };

/* a * b, saturating at SIZE_MAX as ex_size_add does. */
static inline size_t size_mul(size_t a, size_t b) {
    size_t p;
    return __builtin_mul_overflow(a, b, &p) ? SIZE_MAX : p;
}

/* More children than a when_all can count (its join and a collect's
 * tuple count in 32 bits) or than its sender can list. */
static inline bool too_many_children(size_t n) {
    return n >= UINT32_MAX || n > (SIZE_MAX - sizeof(when_all_sender)) / (sizeof(ex_sender *) + sizeof(wa_child));
}

/* Allocates the sender of n children (not too_many_children) and lays
 * out its operation: the header and a slot per child, the children's
 * value arrays (`nvalues` in all; with `collect`, each as long as the
 * longest of the child's value signatures), `extra` bytes (a collect's
 * result), then the children's operations at their alignments.  Takes
 * the children; sizes saturate, so an absurd layout stays absurd and
 * connect refuses it.  NULL when out of memory (the children not taken). */
static inline __attribute__((always_inline)) when_all_sender *lay_out(const ex_sender_vtable *vt, ex_sender *const *children,
                                                                       size_t n, size_t nvalues, size_t extra, bool collect) {
    ex_sender *s = exi_sender_alloc_bare(vt, sizeof(when_all_sender) + n * (sizeof(ex_sender *) + sizeof(wa_child)));
    if (!s) return NULL;
    when_all_sender *ws = (when_all_sender *)s;
    ws->n = n;
    wa_child *layout = (wa_child *)(void *)(ws->children + n);
    size_t off = ex_align_up(ex_size_add(sizeof(when_all_op), size_mul(n, sizeof(wa_slot))), alignof(ex_value));
    ws->values_off = off;
    size_t v_off = off;
    off = ex_size_add(off, size_mul(nvalues, sizeof(ex_value)));
    ws->collect_off = collect ? off : 0;
    off = ex_size_add(off, extra);
    ws->ops_off = off;
    size_t align = alignof(when_all_op);
    size_t hops = 0;
    for (size_t i = 0; i < n; i++) {
        ex_sender *c = children[i];
        wa_child *lc = &layout[i];
        ws->children[i] = c;
        lc->cap = collect ? exi_sigs_max_arity(&c->sigs) : exi_value_cap(&c->sigs);
        lc->hop = exi_is_starts_on(c);
        lc->v_off = v_off;
        v_off = ex_size_add(v_off, (size_t)lc->cap * sizeof(ex_value));
        hops += lc->hop;
        off = ex_align_up(off, c->op_align);
        lc->op_off = off;
        off = ex_size_add(off, c->op_size);
        align = ex_max_size(align, c->op_align);
    }
    ws->hops = hops;
    s->op_size = off;
    s->op_align = align;
    return ws;
}

ex_sender *ex_when_all_n(ex_sender *const *children, size_t n) {
    if (!children || n == 0) return ex_invalid_sender(EX_EINVAL, "ex_when_all: needs at least one sender");
    /* One pass over the children for the signatures and the sizes, one to
     * fill the sender in (a when_all of two tasks is a fork-join step:
     * every instruction here is paid per step). */
    uint8_t flags = EX_SIGS_STOPPED;
    ex_sig out = { 0, { 0 } };
    bool dynamic = false;
    bool can_value = true;   /* a child that never sends a value rules one out */
    uint32_t depth = 0;      /* the deepest child's */
    size_t nvalues = 0;
    for (size_t i = 0; i < n; i++) {
        if (__builtin_expect(!children[i] || children[i]->status.code != EX_OK ||
                                 children[i]->depth >= EX_SENDER_MAX_DEPTH, 0)) {
            /* (ex_check_input only here: its result, returned through memory,
             * stalled every when_all on store forwarding) */
            ex_error e = ex_check_input(children[i], "ex_when_all: NULL input sender");
            return ex_reject(e.code, children[i] ? e.msg : null_child("ex_when_all", i), n, children);
        }
        const ex_sigs *cs = &children[i]->sigs;
        if (children[i]->depth > depth) depth = children[i]->depth;
        if (cs->nvalues > 1) return ex_reject(EX_EINVAL, several_sigs(i, cs), n, children);
        flags |= (uint8_t)(cs->flags & EX_SIGS_ERROR);
        nvalues += exi_value_cap(cs);
        if (cs->flags & EX_SIGS_DYNAMIC) {
            dynamic = true;
            flags |= EX_SIGS_ERROR;  /* checked at run time */
        } else if (cs->nvalues == 1) {
            const ex_sig *v = &cs->values[0];
            if (out.arity + v->arity > EX_MAX_ARITY)
                return ex_reject(EX_EINVAL, too_many_values(children, n, i, out.arity), n, children);
            memcpy(&out.types[out.arity], v->types, v->arity);
            out.arity = (uint8_t)(out.arity + v->arity);
            for (unsigned k = 0; k < v->arity; k++)
                if (v->types[k] == EX_T_TUPLE || v->types[k] == EX_T_ANY) flags |= EX_SIGS_ERROR;  /* copy may fail */
        } else {
            can_value = false;
        }
    }
    bool one_sig = can_value && !dynamic;
    if (can_value && dynamic) flags |= EX_SIGS_DYNAMIC;
    if (too_many_children(n)) return ex_reject(EX_EINVAL, "ex_when_all: too many children", n, children);

    when_all_sender *ws = lay_out(&exi_when_all_vt, children, n, nvalues, 0, false);
    if (!ws) return ex_reject(EX_ENOMEM, NULL, n, children);
    ex_sender *s = &ws->base;
    s->depth = depth + 1;
    /* Only the used part (at most one value signature): copying a whole
     * ex_sigs built aside stalls on store forwarding. */
    s->sigs.flags = flags;
    s->sigs.nvalues = one_sig ? 1 : 0;
    if (one_sig) s->sigs.values[0] = out;
    return exi_early_from_children(s, children, n);
}

ex_sender *ex_when_all_collect_n(ex_sender *const *children, size_t n) {
    static const char who[] = "ex_when_all_collect";
    if (!children && n) return ex_invalid_sender(EX_EINVAL, "ex_when_all_collect: NULL array of children");
    if (too_many_children(n)) return ex_reject(EX_EINVAL, "ex_when_all_collect: too many children", n, children);
    uint8_t flags = EX_SIGS_STOPPED;
    bool can_value = true;   /* a child that never sends a value rules one out */
    uint32_t depth = 0;
    size_t nvalues = 0, nvariants = 0;
    for (size_t i = 0; i < n; i++) {
        const ex_sender *c = children[i];
        if (!c || c->status.code != EX_OK || c->depth >= EX_SENDER_MAX_DEPTH) {
            ex_error e = ex_check_input(c, "ex_when_all_collect: NULL input sender");
            return ex_reject(e.code, c ? e.msg : null_child(who, i), n, children);
        }
        const ex_sigs *cs = &c->sigs;
        if (c->depth > depth) depth = c->depth;
        flags |= (uint8_t)(cs->flags & EX_SIGS_ERROR);
        if (exi_sigs_keeping_may_fail(cs)) flags |= EX_SIGS_ERROR;  /* tuples to copy, or arities checked at run time */
        if (cs->nvalues == 0 && !(cs->flags & EX_SIGS_DYNAMIC)) can_value = false;
        nvalues = ex_size_add(nvalues, exi_sigs_max_arity(cs));
        nvariants += has_variants(cs);
    }
    /* Per child an element and its tuple; per child of several value
     * signatures a copy of them. */
    size_t extra = ex_size_add(size_mul(n, sizeof(ex_value) + sizeof(ex_tuple)), size_mul(nvariants, sizeof(ex_sigs)));
    when_all_sender *ws = lay_out(&when_all_collect_vt, children, n, nvalues, extra, true);
    if (!ws) return ex_reject(EX_ENOMEM, NULL, n, children);
    ex_sender *s = &ws->base;
    s->depth = depth + 1;
    static const ex_sig one_tuple = { 1, { EX_T_TUPLE } };
    s->sigs.flags = flags;
    s->sigs.nvalues = can_value ? 1 : 0;
    if (can_value) s->sigs.values[0] = one_tuple;
    return s;
}

ex_sender *ex_when_all_with_variant_n(ex_sender *const *children, size_t n) {
    if (!children || n == 0) return ex_invalid_sender(EX_EINVAL, "ex_when_all_with_variant: needs at least one sender");
    ex_sender *wrapped_stack[16];
    ex_sender **wrapped = wrapped_stack;
    if (n > 16 && !(wrapped = ex_allocate(NULL, n * sizeof *wrapped, alignof(ex_sender *))))
        return ex_reject(EX_ENOMEM, NULL, n, children);
    for (size_t i = 0; i < n; i++) wrapped[i] = ex_into_variant(children[i]);
    ex_sender *s = ex_when_all_n(wrapped, n);
    if (wrapped != wrapped_stack) ex_deallocate(NULL, wrapped, n * sizeof *wrapped, alignof(ex_sender *));
    return s;
}
