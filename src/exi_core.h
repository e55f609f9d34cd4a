/* exi_core.h - helpers shared by the sender implementations. Internal. */
#ifndef EXI_CORE_H
#define EXI_CORE_H

#include <stdalign.h>
#include <string.h>

#include <cexec/cexec.h>

#include "exi_atomic.h"

#define EXI_CONTAINER_OF(ptr, type, member) ((type *)(void *)((char *)(ptr) - offsetof(type, member)))

/* Value storage with deep-copied tuples: the inline array covers the
 * common case; tuple contents go to one block from `alloc`. */
typedef struct exi_store {
    size_t n;
    ex_value v[EX_MAX_ARITY];
    void *nested;
    size_t nested_size;
    const ex_allocator *alloc;
} exi_store;

static inline void exi_store_init(exi_store *st) { st->n = 0; st->nested = NULL; st->nested_size = 0; st->alloc = NULL; }
/* Deep-copies (v, n) into st, replacing what it held.  EX_ENOMEM when
 * tuple storage cannot be allocated, EX_EINVAL when n > EX_MAX_ARITY (st
 * is then empty). */
ex_error exi_store_set(exi_store *st, const ex_value *v, size_t n, const ex_allocator *alloc);
void exi_store_clear(exi_store *st);

/* ex_when_all's sender (vtable exi_when_all_vt): ex_await runs a when_all
 * of tasks as a fork (task.c) from its children. */
extern const ex_sender_vtable exi_when_all_vt;
typedef struct exi_when_all_sender {
    ex_sender base;
    size_t n;
    size_t values_off;     /* in the operation: the value arrays ... */
    size_t ops_off;        /* ... then the children's operations (aligned each) */
    ex_sender *children[];
} exi_when_all_sender;

/* How many values a sender of signatures cs may send (all a dynamic one may). */
static inline uint8_t exi_value_cap(const ex_sigs *cs) {
    return (cs->flags & EX_SIGS_DYNAMIC) ? EX_MAX_ARITY : cs->nvalues ? cs->values[0].arity : 0;
}

/* Whether the built-in allocators serve a request (allocator.h): size at
 * most EX_ALLOC_MAX_SIZE, alignment a power of two (0: none) at most
 * EX_ALLOC_MAX_ALIGN.  Below these bounds size + alignment + a header
 * cannot wrap. */
static inline bool exi_alloc_request_ok(size_t size, size_t align) {
    return size <= EX_ALLOC_MAX_SIZE && align <= EX_ALLOC_MAX_ALIGN && (align & (align - 1)) == 0;
}

/* Deep copy of n values into a caller array of EX_MAX_ARITY plus a nested
 * block (for ex_result and just).  *nested is NULL when no tuple is
 * present.  EX_EINVAL (nothing copied) when n > EX_MAX_ARITY. */
ex_error exi_values_copy(ex_value *dst, const ex_value *src, size_t n, const ex_allocator *alloc,
                         void **nested, size_t *nested_size);

/* Sigs helpers. */
static inline ex_sigs exi_sigs_of(const ex_sig *value, uint8_t flags) {
    ex_sigs s = ex_sigs_none();
    if (value) { s.values[0] = *value; s.nvalues = 1; }
    s.flags = flags;
    return s;
}
/* Sig describing the types of (v, n). */
ex_sig exi_sig_of_values(const ex_value *v, size_t n);

/* Receiver check of a run-time connected sender against the receiver's
 * declared acceptance. */
ex_error exi_check_accepts(const ex_sender *s, ex_receiver r, const char *who);

/* Thread-locals on hot paths use the initial-exec TLS model: in a
 * position-independent build the default model calls __tls_get_addr on
 * every access. */
#define EXI_TLS _Thread_local __attribute__((tls_model("initial-exec")))

/* ex_recycling_allocator_create whose shared depot keeps at most
 * depot_batches batches per size class (the public one keeps 64). */
ex_error exi_recycling_allocator_create_bounded(const ex_allocator *under, uint32_t depot_batches,
                                                ex_recycling_allocator **out);
/* Take / give back every lock of r (around fork, for the built-in default). */
void exi_recycling_lock_all(ex_recycling_allocator *r);
void exi_recycling_unlock_all(ex_recycling_allocator *r);
/* Take / give back every lock of the built-in default and of the libc
 * allocator's registry, in the order the fork handlers take them (a test
 * holds them from another thread across a fork). */
void exi_builtin_prefork(void);
void exi_builtin_postfork(void);

/* ex_stop_source_request_stop that counts requests: *begun (if not NULL)
 * is incremented before the stop flag can be set, *done once it is set (or
 * found set) and before any callback runs.  begun == done means no request
 * counted here is half way; anyone who saw the flag of a counted request
 * reads a begun that includes it, and anyone who reads a done that
 * includes it sees its flag.  (The fork's start check, task.c.) */
bool exi_stop_source_request_stop_counted(ex_stop_source *s, uint64_t *begun, uint64_t *done);
/* Test hook: when set, called by a counted request between setting the
 * flag and incrementing *done (a test widens that window with it). */
extern void (*exi_stop_counted_hook)(void);

/* A pool's jemalloc allocator: a parked one with at least `arenas` arenas
 * (stats counted from now), else a new one; and parking it again when the
 * pool goes (never freed: blocks from it stay valid; jemalloc.c). */
ex_error exi_jemalloc_acquire(unsigned arenas, ex_jemalloc_allocator **out);
void exi_jemalloc_park(ex_jemalloc_allocator *j);

/* The built-in default's recycling allocator (NULL until it exists, or if
 * the default fell back to plain libc).  exi_builtin_of(a): it, when a is
 * it, else NULL, so hot paths can use its inline entry points. */
extern ex_recycling_allocator *exi_builtin_recycler;
extern void *exi_builtin_fast;
static inline ex_recycling_allocator *exi_builtin_of(const ex_allocator *a) {
    return a == exi_load_acq_ptr(&exi_builtin_fast) ? exi_builtin_recycler : NULL;
}
/* ex_default_allocator() without the calls, once the built-in one exists. */
extern void *exi_default_set;  /* what ex_set_default_allocator set */
static inline const ex_allocator *exi_default_allocator(void) {
    const ex_allocator *a = exi_load_acq_ptr(&exi_default_set);
    if (a) return a;
    a = exi_load_acq_ptr(&exi_builtin_fast);
    return a ? a : ex_builtin_allocator();
}

/* A sender's block: through the built-in default's inline entry points
 * when it is `a` (no interface call), else through `a`. */
static inline void *exi_sender_block(const ex_allocator *a, size_t size) {
    ex_recycling_allocator *r = exi_builtin_of(a);
    return r ? ex_recycling_allocate(r, size, alignof(max_align_t)) : ex_allocate(a, size, alignof(max_align_t));
}

/* The header fields every sender needs set (not sigs and status). */
static inline void exi_sender_header(ex_sender *s, const ex_sender_vtable *vt, size_t size, const ex_allocator *a) {
    s->vt = vt;
    s->refs = 1;
    s->size = (uint32_t)size;
    s->alloc = a;
    s->op_size = sizeof(ex_operation);
    s->op_align = alignof(ex_operation);
    s->depth = 1;
}

/* ex_sender_release, inline for the hot paths (a when_all's children, a
 * task's awaited sender). */
static inline void exi_sender_release(ex_sender *s) {
    if (!s) return;
    /* Acquire: a release that left ours the last reference happened before. */
    uint32_t refs = exi_load_acq_u32(&s->refs);
    if (!refs) return;  /* a static sender */
    /* The last reference, ours: nobody else can retain or release it, so
     * no read-modify-write (most senders are released by their only user). */
    if (refs != 1 && exi_faa_u32(&s->refs, (uint32_t)-1) != 1) return;
    if (s->vt->destroy) s->vt->destroy(s);
    ex_recycling_allocator *r = exi_builtin_of(s->alloc);
    if (r) ex_recycling_deallocate(r, s, s->size, alignof(max_align_t));
    else ex_deallocate(s->alloc, s, s->size, alignof(max_align_t));
}

/* ex_sender_alloc without zeroing the block past the ex_sender header
 * (sigs: none, status: EX_OK): for hot senders that set every field of
 * their own.  Inline: a fork-join step builds three senders. */
static inline ex_sender *exi_sender_alloc_bare(const ex_sender_vtable *vt, size_t size) {
    const ex_allocator *a = exi_default_allocator();
    if (size > UINT32_MAX) return NULL;
    ex_sender *s = exi_sender_block(a, size);
    if (!s) return NULL;
    exi_sender_header(s, vt, size, a);
    s->sigs.nvalues = 0;
    s->sigs.flags = 0;
    s->status = ex_ok();
    return s;
}

/* The allocator an environment gives work that runs on `sch` (NULL: the
 * environment's own scheduler): its allocator key, else sch's default, else
 * the process default.  For nodes that cache the answer for a child whose
 * scheduler they change. */
const ex_allocator *exi_allocator_under(ex_env e, const ex_scheduler *sch);

/* The identity of the calling thread (an address unique per live thread). */
const void *exi_thread_id(void);  /* out of line: a task that migrates must not reuse a cached TLS address */

/* Finishes a builder: sets op layout for a one-child adaptor whose own part
 * of the operation is `own` bytes with alignment `own_align` and child
 * placed after it, and its depth (one more than the child's).  Returns the
 * child offset. */
static inline size_t exi_child_offset(size_t own, const ex_sender *child) {
    return ex_align_up(own, child->op_align);
}
static inline void exi_layout_one_child(ex_sender *s, size_t own, size_t own_align, const ex_sender *child) {
    s->op_size = ex_size_add(exi_child_offset(own, child), child->op_size);  /* saturates: see ex_size_add */
    s->op_align = ex_max_size(own_align, child->op_align);
    s->depth = child->depth + 1;
}

/* Releases an input and returns an invalid sender (one-input builders). */
static inline ex_sender *exi_reject1(int code, const char *msg, ex_sender *in) {
    return ex_reject(code, msg, 1, &in);
}

/* Starts an allocated block where the allocation-free path has none. */
ex_sender *exi_oom_sender(void);

/* ------------------------------------------ schedule ops of queued resources */

/* The schedule operation of a resource with a queue (run_loop, pool): its
 * work item, when run, completes with set_stopped if the receiver's stop
 * token has stop requested, else with set_value(); when the resource drops
 * it, with set_stopped.  The resource's start queues &work. */
typedef struct exi_queued_op {
    ex_operation base;
    ex_work work;
    void *resource;
    ex_receiver r;
} exi_queued_op;

void exi_queued_op_init(exi_queued_op *o, const ex_operation_vtable *vt, void *resource, ex_receiver r);

/* ----------------------------------------------- internal adaptors (on) */

/* The scheduler `on` returns to, as the inner parts of an `on` sender see
 * it (a private forwarding key set by the capture node). */
extern const ex_key exi_key_on_orig;

/* write_env whose value is read, at connect, from `from_key` in the
 * receiver's environment (from_key == NULL: `value` as given).  Connect
 * fails with EX_EINVAL and `missing_msg` when the key is absent. */
ex_sender *exi_write_env(ex_sender *child, const ex_key *key, ex_value value, const ex_key *from_key,
                         const char *missing_msg);

/* continues_on to the scheduler found under exi_key_on_orig at connect. */
ex_sender *exi_continues_on_orig(ex_sender *child);

#endif
